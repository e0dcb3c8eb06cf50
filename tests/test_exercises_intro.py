"""The introduction's exercise checkers accept right answers and name the typical mistakes."""

from __future__ import annotations

import pytest
from feedback_asserts import assert_correct
from feedback_asserts import assert_hint as shared_assert_hint

from minitransformer.exercises import Feedback
from minitransformer.exercises.intro import HINTS, check_attention_shapes, check_mha_parameters

LANGS = ("es", "en")


def assert_hint(feedback: Feedback, lang: str, key: str) -> None:
    shared_assert_hint(feedback, lang, key, HINTS)


@pytest.mark.parametrize("lang", LANGS)
def test_attention_shapes_checker(lang):
    right = lambda B, S, T, H: ((B, H, S, S), (B, H, T, T), (B, H, T, S))  # noqa: E731
    assert_correct(check_attention_shapes(right, lang=lang), lang)
    as_lists = lambda B, S, T, H: [[B, H, S, S], [B, H, T, T], [B, H, T, S]]  # noqa: E731
    assert_correct(check_attention_shapes(as_lists, lang=lang), lang)
    cases = {
        "cross_swapped": lambda B, S, T, H: ((B, H, S, S), (B, H, T, T), (B, H, S, T)),
        "no_heads": lambda B, S, T, H: ((B, S, S), (B, T, T), (B, T, S)),
        "encoder": lambda B, S, T, H: ((B, H, T, T), (B, H, T, T), (B, H, T, S)),
        "decoder_self": lambda B, S, T, H: ((B, H, S, S), (B, H, S, S), (B, H, T, S)),
        "cross": lambda B, S, T, H: ((B, H, S, S), (B, H, T, T), (B, H, T, T)),
        "not_triple": lambda B, S, T, H: (B, H, T, S),
    }
    for key, fn in cases.items():
        assert_hint(check_attention_shapes(fn, lang=lang), lang, key)
    fb = check_attention_shapes(lambda *a: (_ for _ in ()).throw(NotImplementedError), lang=lang)
    assert not fb.ok and fb.hint == "not_written"


@pytest.mark.parametrize("lang", LANGS)
def test_mha_parameters_checker(lang):
    assert_correct(check_mha_parameters(lambda D, H: 4 * (D * D + D), lang=lang), lang)
    assert_correct(check_mha_parameters(lambda D, H: 4.0 * (D * D + D), lang=lang), lang)
    cases = {
        "no_bias": lambda D, H: 4 * D * D,
        "three_projections": lambda D, H: 3 * (D * D + D),
        "per_head": lambda D, H: H * 4 * (D * D + D),
        "not_int": lambda D, H: "4 * (D * D + D)",
        "wrong_count": lambda D, H: 4 * (D * D + D) + 1,
    }
    for key, fn in cases.items():
        assert_hint(check_mha_parameters(fn, lang=lang), lang, key)
    assert_hint(check_mha_parameters(lambda D, H: 4 * (D * (D // H) + D // H), lang=lang), lang, "per_head")
