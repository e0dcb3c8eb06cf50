"""The checkers of notebook 08 from a student's side: right answers accepted, the usual wrong ones
named in both languages (the basic cases live in test_heads.py, next to the module they use)."""

from __future__ import annotations

import math

import pytest
import torch
from feedback_asserts import assert_bank, bank

from minitransformer.exercises.heads import check_attention_row, check_strongest_head
from minitransformer.exercises.solutions.nb08 import solution_attention_row, solution_strongest_head

LANGS = ("es", "en")


HEAD_MISTAKES = {
    "float tensor": (
        lambda m, q, k: torch.tensor(solution_strongest_head(m, q, k), dtype=torch.float32),
        "head_float_tensor",
    ),
    "floats": (
        lambda m, q, k: tuple(float(i) for i in solution_strongest_head(m, q, k)),
        "head_floats",
    ),
    "(head, layer)": (
        lambda m, q, k: solution_strongest_head(m, q, k)[::-1],
        "head_swapped",
    ),
    "key to query": (
        lambda m, q, k: solution_strongest_head(m, k, q),
        "head_key_to_query",
    ),
    "flat index": (lambda m, q, k: int(torch.stack(m)[:, 0, :, q, k].argmax()), "head_single_number"),
    "weakest head": (
        lambda m, q, k: divmod(int(torch.stack(m)[:, 0, :, q, k].argmin()), m[0].size(1)),
        "head_other_head",
    ),
    "a string": (lambda m, q, k: "layer 0", "head_not_a_pair"),
}


@pytest.mark.parametrize("lang", LANGS)
def test_strongest_head_accepts_tuples_lists_and_integer_tensors(lang):
    assert check_strongest_head(solution_strongest_head, lang=lang)
    assert check_strongest_head(lambda m, q, k: list(solution_strongest_head(m, q, k)), lang=lang)
    assert check_strongest_head(lambda m, q, k: torch.tensor(solution_strongest_head(m, q, k)), lang=lang)


@pytest.mark.parametrize("lang", LANGS)
def test_strongest_head_fallback_does_not_print_the_answer(lang):
    fb = check_strongest_head(HEAD_MISTAKES["weakest head"][0], lang=lang)
    assert ("la cabeza correcta es" if lang == "es" else "the right head is") not in str(fb)


ROW_MISTAKES = {
    "no scale": (lambda q, k: torch.softmax(k @ q, -1), "row_no_scale"),
    "scale by S": (
        lambda q, k: torch.softmax(k @ q / math.sqrt(k.size(0)), -1),
        "row_wrong",
    ),
    "scores": (
        lambda q, k: k @ q / math.sqrt(q.size(0)),
        "row_no_softmax",
    ),
    "list": (lambda q, k: solution_attention_row(q, k).tolist(), "not_a_tensor"),
    "q @ k": (
        lambda q, k: torch.softmax(q @ k / math.sqrt(q.size(0)), -1),
        "crashed",
    ),
    "integers": (lambda q, k: (k @ q).argmax().expand(k.size(0)), "row_not_normalised"),
}


@pytest.mark.parametrize("lang", LANGS)
@pytest.mark.parametrize(
    "check,fn,hint",
    [
        *bank(check_strongest_head, HEAD_MISTAKES),
        *bank(check_attention_row, ROW_MISTAKES),
    ],
)
def test_wrong_answers_are_named_in_both_languages(check, fn, hint, lang):
    assert_bank(check, fn, hint, lang)
