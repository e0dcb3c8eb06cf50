"""The runtime helpers: eval mode and a thread count for a block, the device."""

import pytest
import torch
from torch import nn

from minitransformer.runtime import cpu_threads, eval_mode


@pytest.mark.parametrize("training", [True, False])
def test_eval_mode_gives_the_model_back_its_mode_even_after_an_error(training):
    model = nn.Sequential(nn.Linear(2, 2), nn.Dropout(0.5)).train(training)
    with eval_mode(model):
        assert not model.training and not model[1].training
    assert model.training is training and model[1].training is training
    with pytest.raises(RuntimeError), eval_mode(model):
        raise RuntimeError("boom")
    assert model.training is training


def test_cpu_threads_gives_torch_back_its_thread_count_even_after_an_error():
    before = torch.get_num_threads()
    other = 1 if before != 1 else 2
    with cpu_threads(other):
        assert torch.get_num_threads() == other
    assert torch.get_num_threads() == before
    with pytest.raises(RuntimeError), cpu_threads(other):
        raise RuntimeError("boom")
    assert torch.get_num_threads() == before


def test_the_device_is_chosen_in_one_place(monkeypatch):
    """CUDA when there is a GPU, else the CPU; Apple's MPS, or the CPU on a GPU machine, only when the user asks
    (MINITRANSFORMER_DEVICE); a name the course does not use, or a device this machine lacks, is a clear error."""
    from minitransformer import runtime
    from minitransformer.i18n import CourseError

    monkeypatch.delenv(runtime.DEVICE_ENV, raising=False)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert runtime.default_device() == torch.device("cpu")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert runtime.default_device() == torch.device("cuda")
    assert runtime.default_device(gpu=False) == torch.device("cpu")  # a toy model a GPU does not speed up
    monkeypatch.setenv(runtime.DEVICE_ENV, "cuda")
    assert runtime.default_device(gpu=False) == torch.device("cuda")  # the user's choice wins
    monkeypatch.setenv(runtime.DEVICE_ENV, "CPU")
    assert runtime.default_device() == torch.device("cpu")
    monkeypatch.setenv(runtime.DEVICE_ENV, "mps")
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: True)
    assert runtime.default_device() == torch.device("mps")
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: False)
    with pytest.raises(CourseError) as no_mps:
        runtime.default_device()
    assert "no such device" in no_mps.value.en and "no tiene ese dispositivo" in no_mps.value.es
    monkeypatch.setenv(runtime.DEVICE_ENV, "tpu")
    with pytest.raises(CourseError) as bad:
        runtime.default_device()
    assert "'cpu', 'cuda' or 'mps'" in bad.value.en and "«cpu», «cuda» o «mps»" in bad.value.es
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setenv(runtime.DEVICE_ENV, "cuda")
    with pytest.raises(CourseError):
        runtime.default_device()


def test_machine_records_the_cpu_the_cores_the_threads_and_the_versions():
    from minitransformer.runtime import cpu_threads, machine

    with cpu_threads(1):
        found = machine()
    assert set(found) == {"cpu", "cores", "threads", "python", "torch", "system"}
    assert found["cpu"] and found["threads"] == 1 and found["torch"] == torch.__version__
