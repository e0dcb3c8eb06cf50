"""The checkers of notebook 07 accept right answers and explain the typical wrong ones."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from feedback_asserts import assert_bank, bank

from minitransformer.exercises.solutions.nb07 import solution_my_noam_lr, solution_my_smoothed_targets
from minitransformer.exercises.training import check_noam_lr, check_shift_targets, check_smoothed_targets


def test_noam_lr():
    assert check_noam_lr(lambda s, d, w: d**-0.5 * min(s**-0.5, s * w**-1.5), lang="en")
    fb = check_noam_lr(lambda s, d, w: min(s**-0.5, s * w**-1.5), lang="en")
    assert not fb and fb.hint == "noam_no_d_model"
    fb = check_noam_lr(lambda s, d, w: d**-0.5 * max(s**-0.5, s * w**-1.5), lang="es")
    assert not fb and fb.hint == "noam_larger_branch"
    fb = check_noam_lr(lambda s, d, w: d**-0.5 * min(s**-0.5, s * w**-0.5), lang="en")
    assert not fb and fb.hint == "noam_warmup_power"
    fb = check_noam_lr(lambda s, d, w: 0.001, lang="en")
    assert not fb and fb.hint == "noam_wrong"
    fb = check_noam_lr(lambda s, d, w: "x", lang="en")
    assert not fb and fb.hint == "noam_not_a_number"


def test_shift_targets():
    assert check_shift_targets(lambda ids, bos, eos: ([bos] + ids, ids + [eos]), lang="en")
    fb = check_shift_targets(lambda ids, bos, eos: (torch.tensor([bos] + ids), torch.tensor(ids + [eos])), lang="en")
    assert not fb and fb.hint == "targets_tensor"
    fb = check_shift_targets(lambda ids, bos, eos: (ids + [eos], [bos] + ids), lang="en")
    assert not fb and fb.hint == "targets_swapped"
    fb = check_shift_targets(lambda ids, bos, eos: ([bos] + ids + [eos],) * 2, lang="en")
    assert not fb and fb.hint == "targets_equal"
    fb = check_shift_targets(lambda ids, bos, eos: ([bos] + ids + [eos], ids + [eos]), lang="en")
    assert not fb and fb.hint == "targets_both_special"
    fb = check_shift_targets(lambda ids, bos, eos: ([bos] + ids, ids), lang="es")
    assert not fb and fb.hint == "targets_lengths"
    fb = check_shift_targets(lambda ids, bos, eos: [bos] + ids, lang="en")
    assert not fb and fb.hint == "targets_not_a_pair"


def test_smoothed_targets():
    def right(target, V, eps):
        return (1 - eps) * F.one_hot(target, V).float() + eps / V

    assert check_smoothed_targets(right, lang="en")
    fb = check_smoothed_targets(lambda t, V, e: F.one_hot(t, V).float(), lang="en")
    assert not fb and fb.hint == "smooth_one_hot"
    fb = check_smoothed_targets(lambda t, V, e: F.one_hot(t, V).float() + e / V, lang="en")
    assert not fb and fb.hint == "smooth_one_hot_kept"

    def over_the_others(target, V, eps):
        one_hot = F.one_hot(target, V).float()
        return (1 - eps) * one_hot + eps / (V - 1) * (1 - one_hot)

    fb = check_smoothed_targets(over_the_others, lang="es")
    assert not fb and fb.hint == "smooth_wrong_classes"
    fb = check_smoothed_targets(lambda t, V, e: torch.zeros(V, len(t)), lang="en")
    assert not fb and fb.hint == "smooth_shape"
    fb = check_smoothed_targets(lambda t, V, e: [0.1] * V, lang="en")
    assert not fb and fb.hint == "not_a_tensor"


def test_the_smoothed_target_is_the_one_pytorch_uses():
    # The checker's reference distribution gives F.cross_entropy(..., label_smoothing=ε).
    target, V, eps = torch.tensor([0, 3, 1, 4]), 5, 0.1
    q = (1 - eps) * F.one_hot(target, V).float() + eps / V
    logits = torch.randn(len(target), V, generator=torch.Generator().manual_seed(0))
    ours = -(q * torch.log_softmax(logits, -1)).sum(-1).mean()
    torch.testing.assert_close(ours, F.cross_entropy(logits, target, label_smoothing=eps))


LANGS = ("es", "en")


NOAM_MISTAKES = {
    "only the decay": (
        lambda s, d, w: d**-0.5 * s**-0.5,
        "noam_decay_only",
    ),
    "only the warm-up": (
        lambda s, d, w: d**-0.5 * s * w**-1.5,
        "noam_warmup_only",
    ),
    "max": (
        lambda s, d, w: d**-0.5 * max(s**-0.5, s * w**-1.5),
        "noam_larger_branch",
    ),
    "d_model^+0.5": (
        lambda s, d, w: d**0.5 * min(s**-0.5, s * w**-1.5),
        "noam_d_model_power",
    ),
    "warmup^-0.5": (
        lambda s, d, w: d**-0.5 * min(s**-0.5, s * w**-0.5),
        "noam_warmup_power",
    ),
    "hard-coded d_model": (
        lambda s, d, w: solution_my_noam_lr(s, 512, w),
        "noam_fixed_d_model",
    ),
    "hard-coded warmup": (
        lambda s, d, w: solution_my_noam_lr(s, d, 4000),
        "noam_fixed_warmup",
    ),
    "something else": (
        lambda s, d, w: 2 * solution_my_noam_lr(s, d, w),
        "noam_wrong",
    ),
    "a string": (lambda s, d, w: "0.001", "noam_not_a_number"),
    "a nan": (lambda s, d, w: float("nan"), "noam_wrong"),
}


def insert_returns_none(ids, bos_id, eos_id):
    return list(ids).insert(0, bos_id)


def insert_and_append(ids, bos_id, eos_id):
    a, b = list(ids), list(ids)
    return a.insert(0, bos_id), b.append(eos_id)


def modifies_ids(ids, bos_id, eos_id):
    out = ids + [eos_id]
    ids.insert(0, bos_id)
    return ids, out


SHIFT_MISTAKES = {
    "list.insert returns None": (insert_returns_none, "returns_none"),
    "pair of None": (
        insert_and_append,
        "targets_not_a_list",
    ),
    "modifies ids": (modifies_ids, "targets_modifies"),
    "tensors": (
        lambda ids, b, e: (torch.tensor([b] + ids), torch.tensor(ids + [e])),
        "targets_tensor",
    ),
    "hard-coded bos and eos": (
        lambda ids, b, e: ([1] + ids, ids + [2]),
        "targets_fixed_ids",
    ),
    "swapped": (lambda ids, b, e: (ids + [e], [b] + ids), "targets_swapped"),
    "floats": (
        lambda ids, b, e: ([float(b)] + ids, ids + [e]),
        "targets_odd_id",
    ),
    "eos on both": (
        lambda ids, b, e: ([b] + ids + [e], ids + [e]),
        "targets_both_special",
    ),
}


def test_shift_targets_accepts_numpy_integers():
    import numpy as np

    assert check_shift_targets(lambda ids, b, e: (list(np.array([b] + ids)), list(np.array(ids + [e]))), lang="en")


@pytest.mark.parametrize("lang", LANGS)
def test_shift_targets_fallback_does_not_print_the_answer(lang):
    fb = check_shift_targets(lambda ids, b, e: ([b] + ids[::-1], ids[::-1] + [e]), lang=lang)
    assert not fb
    assert "[1, 7, 8, 9], [7, 8, 9, 2]" not in str(fb)  # the right pair for the first case


SMOOTH_MISTAKES = {
    "eps hard-coded 0.1": (
        lambda t, V, e: solution_my_smoothed_targets(t, V, 0.1),
        "smooth_fixed_eps",
    ),
    "V hard-coded 5 in the share": (
        lambda t, V, e: (1 - e) * F.one_hot(t, V).float() + e / 5,
        "smooth_fixed_vocab",
    ),
    "V hard-coded 5 everywhere": (
        lambda t, V, e: solution_my_smoothed_targets(t, 5, e) if int(t.max()) < 5 else torch.zeros(len(t), 5),
        "smooth_shape",
    ),
    "(1 - eps) without + eps/V": (
        lambda t, V, e: (1 - e) * F.one_hot(t, V).float(),
        "smooth_not_shared",
    ),
    "integer one-hot": (lambda t, V, e: F.one_hot(t, V), "smooth_not_float"),
    "one-hot as wide as the targets": (
        lambda t, V, e: (1 - e) * F.one_hot(t).float() + e / V,
        "smooth_shape",
    ),
    "rows sum to 1, values off": (
        lambda t, V, e: solution_my_smoothed_targets(t, V, e / 2),
        "smooth_wrong",
    ),
}


@pytest.mark.parametrize("lang", LANGS)
@pytest.mark.parametrize(
    "check,fn,hint",
    [
        *bank(check_noam_lr, NOAM_MISTAKES),
        *bank(check_shift_targets, SHIFT_MISTAKES),
        *bank(check_smoothed_targets, SMOOTH_MISTAKES),
    ],
)
def test_wrong_answers_are_named_in_both_languages(check, fn, hint, lang):
    assert_bank(check, fn, hint, lang)
