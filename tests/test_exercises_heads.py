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
        {"es": "índices enteros, no float32", "en": "integer indices, not float32"},
    ),
    "floats": (
        lambda m, q, k: tuple(float(i) for i in solution_strongest_head(m, q, k)),
        {"es": "no decimales", "en": "not floats"},
    ),
    "(head, layer)": (
        lambda m, q, k: solution_strongest_head(m, q, k)[::-1],
        {"es": "(cabeza, capa)", "en": "(head, layer)"},
    ),
    "key to query": (
        lambda m, q, k: solution_strongest_head(m, k, q),
        {"es": "clave hacia la consulta", "en": "key to the query"},
    ),
    "flat index": (lambda m, q, k: int(torch.stack(m)[:, 0, :, q, k].argmax()), {"es": "divmod", "en": "divmod"}),
    "weakest head": (
        lambda m, q, k: divmod(int(torch.stack(m)[:, 0, :, q, k].argmin()), m[0].size(1)),
        {"es": "otra cabeza da más peso", "en": "another head gives more weight"},
    ),
    "a string": (lambda m, q, k: "layer 0", {"es": "de enteros", "en": "of integers"}),
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
    "no scale": (lambda q, k: torch.softmax(k @ q, -1), {"es": "√d_head", "en": "√d_head"}),
    "scale by S": (
        lambda q, k: torch.softmax(k @ q / math.sqrt(k.size(0)), -1),
        {"es": "suman 1 pero no coinciden", "en": "add up to 1 but do not match"},
    ),
    "scores": (
        lambda q, k: k @ q / math.sqrt(q.size(0)),
        {"es": "esas son las puntuaciones", "en": "those are the scores"},
    ),
    "list": (lambda q, k: solution_attention_row(q, k).tolist(), {"es": "no list", "en": "not list"}),
    "q @ k": (
        lambda q, k: torch.softmax(q @ k / math.sqrt(q.size(0)), -1),
        {"es": "RuntimeError", "en": "RuntimeError"},
    ),
    "integers": (lambda q, k: (k @ q).argmax().expand(k.size(0)), {"es": "deben sumar 1", "en": "must add up to 1"}),
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
