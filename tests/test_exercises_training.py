"""The checkers of notebook 07 accept right answers and explain the typical wrong ones."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from feedback_asserts import assert_bank, bank

from minitransformer.exercises.solutions.nb07 import solution_my_noam_lr, solution_my_smoothed_targets
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
    assert not fb and "la mayor de las dos ramas" in str(fb)
    fb = check_noam_lr(lambda s, d, w: d**-0.5 * min(s**-0.5, s * w**-0.5), lang="en")
    assert not fb and "-1.5" in str(fb)
    fb = check_noam_lr(lambda s, d, w: 0.001, lang="en")
    assert not fb and "expected" in str(fb)
    fb = check_noam_lr(lambda s, d, w: "x", lang="en")
    assert not fb and "number" in str(fb)


def test_shift_targets():
    assert check_shift_targets(lambda ids, bos, eos: ([bos] + ids, ids + [eos]), lang="en")
    fb = check_shift_targets(lambda ids, bos, eos: (torch.tensor([bos] + ids), torch.tensor(ids + [eos])), lang="en")
    assert not fb and "is a tensor; return lists of integers" in str(fb)
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
    assert not fb and "sums to 1 + ε" in str(fb)

    def over_the_others(target, V, eps):
        one_hot = F.one_hot(target, V).float()
        return (1 - eps) * one_hot + eps / (V - 1) * (1 - one_hot)

    fb = check_smoothed_targets(over_the_others, lang="es")
    assert not fb and "V − 1" in str(fb)
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


LANGS = ("es", "en")


NOAM_MISTAKES = {
    "only the decay": (
        lambda s, d, w: d**-0.5 * s**-0.5,
        {"es": "solo tienes la rama que decrece", "en": "you only have the decaying branch"},
    ),
    "only the warm-up": (
        lambda s, d, w: d**-0.5 * s * w**-1.5,
        {"es": "solo tienes la rama del calentamiento", "en": "you only have the warm-up branch"},
    ),
    "max": (
        lambda s, d, w: d**-0.5 * max(s**-0.5, s * w**-1.5),
        {"es": "la mayor de las dos ramas", "en": "the larger of the two branches"},
    ),
    "d_model^+0.5": (
        lambda s, d, w: d**0.5 * min(s**-0.5, s * w**-1.5),
        {"es": "no d_model^0,5", "en": "not d_model^0.5"},
    ),
    "warmup^-0.5": (
        lambda s, d, w: d**-0.5 * min(s**-0.5, s * w**-0.5),
        {"es": "-1,5, no -0,5", "en": "-1.5, not -0.5"},
    ),
    "hard-coded d_model": (
        lambda s, d, w: solution_my_noam_lr(s, 512, w),
        {"es": "no usas el argumento `d_model`", "en": "you do not use the `d_model` argument"},
    ),
    "hard-coded warmup": (
        lambda s, d, w: solution_my_noam_lr(s, d, 4000),
        {"es": "no usas el argumento `warmup`", "en": "you do not use the `warmup` argument"},
    ),
    "something else": (
        lambda s, d, w: 2 * solution_my_noam_lr(s, d, w),
        {
            "es": "se esperaba 1,74693e-07 y devuelves 3,49386e-07",
            "en": "the expected value is 1.74693e-07, you return 3.49386e-07",
        },
    ),
    "a string": (lambda s, d, w: "0.001", {"es": "debe devolver un número", "en": "it must return a number"}),
    "a nan": (lambda s, d, w: float("nan"), {"es": "devuelves nan", "en": "you return nan"}),
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
    "list.insert returns None": (insert_returns_none, {"es": "`list.insert`", "en": "`list.insert`"}),
    "pair of None": (
        insert_and_append,
        {"es": "no None. `list.insert` y `list.append`", "en": "not None. `list.insert` and `list.append`"},
    ),
    "modifies ids": (modifies_ids, {"es": "modifica la lista `ids`", "en": "modifies the list `ids`"}),
    "tensors": (
        lambda ids, b, e: (torch.tensor([b] + ids), torch.tensor(ids + [e])),
        {"es": "es un tensor", "en": "is a tensor"},
    ),
    "hard-coded bos and eos": (
        lambda ids, b, e: ([1] + ids, ids + [2]),
        {"es": "usa los argumentos `bos_id` y `eos_id`", "en": "use the arguments `bos_id`"},
    ),
    "swapped": (lambda ids, b, e: (ids + [e], [b] + ids), {"es": "están al revés", "en": "they are swapped"}),
    "floats": (
        lambda ids, b, e: ([float(b)] + ids, ids + [e]),
        {"es": "lista de ids enteros, pero contiene 1.0", "en": "list of integer ids, but it holds 1.0"},
    ),
    "eos on both": (
        lambda ids, b, e: ([b] + ids + [e], ids + [e]),
        {"es": "un solo token especial", "en": "one special token"},
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
        {"es": "no usas el argumento `eps`", "en": "you do not use the `eps` argument"},
    ),
    "V hard-coded 5 in the share": (
        lambda t, V, e: (1 - e) * F.one_hot(t, V).float() + e / 5,
        {"es": "usa el argumento `vocab_size`", "en": "use the `vocab_size` argument"},
    ),
    "V hard-coded 5 everywhere": (
        lambda t, V, e: solution_my_smoothed_targets(t, 5, e) if int(t.max()) < 5 else torch.zeros(len(t), 5),
        {"es": "¿usas el argumento `vocab_size`?", "en": "do you use the `vocab_size` argument?"},
    ),
    "(1 - eps) without + eps/V": (
        lambda t, V, e: (1 - e) * F.one_hot(t, V).float(),
        {"es": "cada fila suma 1 − ε", "en": "each row sums to 1 − ε"},
    ),
    "integer one-hot": (lambda t, V, e: F.one_hot(t, V), {"es": "no int64", "en": "not int64"}),
    "one-hot as wide as the targets": (
        lambda t, V, e: (1 - e) * F.one_hot(t).float() + e / V,
        {"es": "¿usas el argumento `vocab_size`?", "en": "do you use the `vocab_size` argument?"},
    ),
    "rows sum to 1, values off": (
        lambda t, V, e: solution_my_smoothed_targets(t, V, e / 2),
        {"es": "las filas suman 1 pero", "en": "the rows sum to 1 but"},
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
