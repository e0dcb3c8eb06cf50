"""The positional-encoding exercises' checkers accept right answers and name the typical mistakes.

Right answers are written here from the formulas (not taken from the checkers); each wrong
answer is a mistake students make, and the checker must reject it with the hint written for
it, in both languages.
"""

from __future__ import annotations

import math

import pytest
import torch
from feedback_asserts import assert_correct
from feedback_asserts import assert_hint as shared_assert_hint

from minitransformer.exercises import Feedback
from minitransformer.exercises.positional import (
    HINTS,
    check_interleaved_to_concat,
    check_shift_matrix_concat,
    check_sinusoidal_encoding,
)
from minitransformer.positional import sinusoidal_encoding

LANGS = ("es", "en")


def assert_hint(feedback: Feedback, lang: str, key: str) -> None:
    shared_assert_hint(feedback, lang, key, HINTS)


def assert_shape(feedback: Feedback, lang: str) -> None:
    assert not feedback.ok and feedback.hint == "shape"


def unfinished(*args):
    raise NotImplementedError


def returns_nothing(*args):
    pass


# --------------------------------------------------------------------------- the table


def table_loops(max_len, d_model):
    pe = torch.zeros(max_len, d_model)
    for pos in range(max_len):
        for i in range(0, d_model, 2):
            angle = pos / 10000 ** (i / d_model)
            pe[pos, i] = math.sin(angle)
            pe[pos, i + 1] = math.cos(angle)
    return pe


def table_vectorised_float64(max_len, d_model):
    pos = torch.arange(max_len, dtype=torch.float64)[:, None]
    angle = pos / 10000 ** (torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)
    return torch.stack([angle.sin(), angle.cos()], dim=-1).reshape(max_len, d_model)


def table_mistake(kind):
    def encoding(max_len, d_model):
        pos = torch.arange(max_len, dtype=torch.float32)[:, None]
        two_i = torch.arange(0, d_model, 2, dtype=torch.float32)
        if kind == "from_one":
            pos = pos + 1
        if kind == "double_exponent":
            two_i = 2 * two_i
        if kind == "multiplied":
            angle = pos * 10000 ** (two_i / d_model)
        else:
            angle = pos / 10000 ** (two_i / d_model)
        pe = torch.zeros(max_len, d_model)
        if kind == "freq_per_dim":
            j = torch.arange(d_model, dtype=torch.float32)
            a = pos / 10000 ** (j / d_model)
            pe[:, 0::2], pe[:, 1::2] = a[:, 0::2].sin(), a[:, 1::2].cos()
            return pe
        if kind == "concatenated":
            return torch.cat([angle.sin(), angle.cos()], dim=1)
        if kind == "swapped":
            pe[:, 0::2], pe[:, 1::2] = angle.cos(), angle.sin()
            return pe
        if kind == "transposed":
            pe[:, 0::2], pe[:, 1::2] = angle.sin(), angle.cos()
            return pe.T
        if kind == "wrong_base":
            angle = pos / 1000 ** (two_i / d_model)
        pe[:, 0::2], pe[:, 1::2] = angle.sin(), angle.cos()
        return pe

    return encoding


@pytest.mark.parametrize("lang", LANGS)
@pytest.mark.parametrize("answer", [table_vectorised_float64, lambda n, d: sinusoidal_encoding(n, d)])
def test_table_accepts_right_answers(answer, lang):
    assert_correct(check_sinusoidal_encoding(answer, lang=lang), lang)


@pytest.mark.parametrize("lang", LANGS)
@pytest.mark.parametrize(
    "kind", ["concatenated", "swapped", "freq_per_dim", "double_exponent", "multiplied", "from_one", "transposed"]
)
def test_table_names_the_mistake(kind, lang):
    assert_hint(check_sinusoidal_encoding(table_mistake(kind), lang=lang), lang, kind)


@pytest.mark.parametrize("lang", LANGS)
def test_table_other_mistakes(lang):
    assert_hint(check_sinusoidal_encoding(table_mistake("wrong_base"), lang=lang), lang, "table_wrong")
    assert_shape(check_sinusoidal_encoding(lambda n, d: torch.zeros(n, d + 1), lang=lang), lang)
    fb = check_sinusoidal_encoding(lambda n, d: table_vectorised_float64(n, d).tolist(), lang=lang)
    assert not fb.ok and fb.hint == "not_a_tensor"


def table_comprehension(max_len, d_model):
    return torch.stack([table_vectorised_float64(max_len, d_model)[p] for p in range(max_len)])


@pytest.mark.parametrize("lang", LANGS)
@pytest.mark.parametrize("answer", [table_loops, table_comprehension])
def test_table_with_loops_is_rejected_as_the_statement_says(answer, lang):
    """The statement says "without Python loops": a right table built with loops is not accepted."""
    assert_hint(check_sinusoidal_encoding(answer, lang=lang), lang, "loops")
    assert_hint(check_sinusoidal_encoding(lambda n, d: torch.full((n, d), math.nan), lang=lang), lang, "nan")


@pytest.mark.parametrize("lang", LANGS)
def test_table_unwritten(lang):
    for fn in (unfinished, returns_nothing):
        feedback = check_sinusoidal_encoding(fn, lang=lang)
        assert not feedback.ok
        assert feedback.hint in ("not_written", "returns_none")


# --------------------------------------------------------------------------- the permutation


def perm_right(d_model):
    # the concatenated table is the even columns (sines) followed by the odd ones (cosines)
    return torch.cat([torch.arange(0, d_model, 2), torch.arange(1, d_model, 2)])  # (D,)


def perm_inverse(d_model):
    return torch.argsort(perm_right(d_model))


@pytest.mark.parametrize("lang", LANGS)
def test_permutation(lang):
    assert_correct(check_interleaved_to_concat(perm_right, lang=lang), lang)
    # a float index tensor cannot index: `interleaved[:, perm]` raises IndexError
    assert_hint(check_interleaved_to_concat(lambda d: perm_right(d).float(), lang=lang), lang, "perm_not_integer")
    assert_hint(check_interleaved_to_concat(lambda d: perm_right(d) > 0, lang=lang), lang, "perm_not_integer")
    assert_correct(check_interleaved_to_concat(lambda d: perm_right(d).int(), lang=lang), lang)
    assert_hint(check_interleaved_to_concat(perm_inverse, lang=lang), lang, "inverse_permutation")
    assert_hint(check_interleaved_to_concat(lambda d: torch.arange(d), lang=lang), lang, "permutation_wrong")
    assert_hint(
        check_interleaved_to_concat(lambda d: torch.zeros(d, dtype=torch.long), lang=lang), lang, "not_permutation"
    )
    assert_hint(check_interleaved_to_concat(lambda d: perm_right(d).float() + 0.5, lang=lang), lang, "perm_not_integer")
    assert_shape(check_interleaved_to_concat(lambda d: torch.arange(d + 1), lang=lang), lang)
    assert not check_interleaved_to_concat(unfinished, lang=lang).ok


def test_the_right_permutation_really_concatenates():
    # the checker's notion of "right" is the maths: interleaved[:, perm] is all sines, then all cosines
    d = 16
    pos = torch.arange(10.0)[:, None]
    angle = pos / 10000 ** (torch.arange(0, d, 2) / d)
    torch.testing.assert_close(sinusoidal_encoding(10, d)[:, perm_right(d)], torch.cat([angle.sin(), angle.cos()], 1))


# --------------------------------------------------------------------------- the shift matrix


def rotation_blocks(k, d_model):
    """cos(kω_i) and sin(kω_i) for every pair i."""
    w = 1 / 10000 ** (torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)
    return torch.cos(k * w), torch.sin(k * w)


def shift_right(k, d_model):
    c, s = rotation_blocks(k, d_model)
    C, S = torch.diag(c), torch.diag(s)
    return torch.cat([torch.cat([C, S], 1), torch.cat([-S, C], 1)], 0).float()


def shift_interleaved(k, d_model):
    c, s = rotation_blocks(k, d_model)
    return torch.block_diag(*[torch.tensor([[ci, si], [-si, ci]]) for ci, si in zip(c.tolist(), s.tolist())])


@pytest.mark.parametrize("lang", LANGS)
def test_shift_matrix(lang):
    assert_correct(check_shift_matrix_concat(shift_right, lang=lang), lang)
    assert_hint(check_shift_matrix_concat(shift_interleaved, lang=lang), lang, "shift_interleaved")
    assert_hint(check_shift_matrix_concat(lambda k, d: shift_right(k, d).T, lang=lang), lang, "shift_backwards")
    assert_hint(check_shift_matrix_concat(lambda k, d: torch.eye(d), lang=lang), lang, "shift_identity")
    assert_hint(check_shift_matrix_concat(lambda k, d: shift_right(k + 1, d), lang=lang), lang, "shift_wrong")
    assert_shape(check_shift_matrix_concat(lambda k, d: torch.eye(d)[:-1], lang=lang), lang)
    assert not check_shift_matrix_concat(unfinished, lang=lang).ok


def test_the_right_shift_matrices_move_the_package_tables():
    concat = sinusoidal_encoding(80, 32, interleaved=False)
    torch.testing.assert_close(concat[:-5] @ shift_right(5, 32).T, concat[5:], atol=1e-4, rtol=0)
    interleaved = sinusoidal_encoding(80, 32)
    torch.testing.assert_close(
        interleaved[:-5] @ shift_interleaved(5, 32).float().T, interleaved[5:], atol=1e-4, rtol=0
    )


def test_every_hint_exists_in_both_languages():
    for key, (es, en) in HINTS.items():
        assert es and en and es != en, key
