"""The runtime helpers: eval mode for a block."""

import pytest
from torch import nn

from minitransformer.runtime import eval_mode


@pytest.mark.parametrize("training", [True, False])
def test_eval_mode_gives_the_model_back_its_mode_even_after_an_error(training):
    model = nn.Sequential(nn.Linear(2, 2), nn.Dropout(0.5)).train(training)
    with eval_mode(model):
        assert not model.training and not model[1].training
    assert model.training is training and model[1].training is training
    with pytest.raises(RuntimeError), eval_mode(model):
        raise RuntimeError("boom")
    assert model.training is training
