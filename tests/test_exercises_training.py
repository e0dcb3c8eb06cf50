"""The checkers of notebook 07 accept right answers and explain the typical wrong ones."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from minitransformer.exercises.training import check_noam_lr, check_shift_targets, check_smoothed_targets


def stub(*args):
    raise NotImplementedError


@pytest.mark.parametrize("lang", ["es", "en"])
def test_stubs_are_not_yet(lang):
    for check in (check_noam_lr, check_shift_targets, check_smoothed_targets):
        fb = check(stub, lang=lang)
        assert not fb and "NotImplementedError" in str(fb)


def test_noam_lr():
    assert check_noam_lr(lambda s, d, w: d**-0.5 * min(s**-0.5, s * w**-1.5), lang="en")
    fb = check_noam_lr(lambda s, d, w: min(s**-0.5, s * w**-1.5), lang="en")
    assert not fb and "d_model^-0.5" in str(fb)
    fb = check_noam_lr(lambda s, d, w: d**-0.5 * max(s**-0.5, s * w**-1.5), lang="es")
    assert not fb and "mínimo" in str(fb)
    fb = check_noam_lr(lambda s, d, w: d**-0.5 * min(s**-0.5, s * w**-0.5), lang="en")
    assert not fb and "-1.5" in str(fb)
    fb = check_noam_lr(lambda s, d, w: 0.001, lang="en")
    assert not fb and "expected" in str(fb)
    fb = check_noam_lr(lambda s, d, w: "x", lang="en")
    assert not fb and "number" in str(fb)


def test_shift_targets():
    assert check_shift_targets(lambda ids, bos, eos: ([bos] + ids, ids + [eos]), lang="en")
    assert check_shift_targets(lambda ids, bos, eos: (torch.tensor([bos] + ids), torch.tensor(ids + [eos])))
    fb = check_shift_targets(lambda ids, bos, eos: (ids + [eos], [bos] + ids), lang="en")
    assert not fb and "swapped" in str(fb)
    fb = check_shift_targets(lambda ids, bos, eos: ([bos] + ids + [eos],) * 2, lang="en")
    assert not fb and "equal" in str(fb)
    fb = check_shift_targets(lambda ids, bos, eos: ([bos] + ids + [eos], ids + [eos]), lang="en")
    assert not fb and "one special token" in str(fb)
    fb = check_shift_targets(lambda ids, bos, eos: ([bos] + ids, ids), lang="es")
    assert not fb and "longitud" in str(fb)
    fb = check_shift_targets(lambda ids, bos, eos: [bos] + ids, lang="en")
    assert not fb and "pair" in str(fb)


def test_smoothed_targets():
    def right(target, V, eps):
        return (1 - eps) * F.one_hot(target, V).float() + eps / V

    assert check_smoothed_targets(right, lang="en")
    fb = check_smoothed_targets(lambda t, V, e: F.one_hot(t, V).float(), lang="en")
    assert not fb and "one-hot" in str(fb)
    fb = check_smoothed_targets(lambda t, V, e: F.one_hot(t, V).float() + e / V, lang="en")
    assert not fb and "sum to 1" in str(fb)

    def over_the_others(target, V, eps):
        one_hot = F.one_hot(target, V).float()
        return (1 - eps) * one_hot + eps / (V - 1) * (1 - one_hot)

    fb = check_smoothed_targets(over_the_others, lang="es")
    assert not fb and "V-1" in str(fb)
    fb = check_smoothed_targets(lambda t, V, e: torch.zeros(V, len(t)), lang="en")
    assert not fb and "shape" in str(fb)
    fb = check_smoothed_targets(lambda t, V, e: [0.1] * V, lang="en")
    assert not fb and "tensor" in str(fb)


def test_the_smoothed_target_is_the_one_pytorch_uses():
    # The checker's reference distribution gives F.cross_entropy(..., label_smoothing=ε).
    target, V, eps = torch.tensor([0, 3, 1, 4]), 5, 0.1
    q = (1 - eps) * F.one_hot(target, V).float() + eps / V
    logits = torch.randn(len(target), V, generator=torch.Generator().manual_seed(0))
    ours = -(q * torch.log_softmax(logits, -1)).sum(-1).mean()
    torch.testing.assert_close(ours, F.cross_entropy(logits, target, label_smoothing=eps))
