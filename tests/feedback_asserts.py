"""Assertions shared by the exercise-checker tests: they name a hint by its key, never by its wording,
so that a hint can be reworded without touching a test."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from typing import Any

import pytest
import torch

from minitransformer.exercises import Feedback
from minitransformer.exercises._core import CORE_HINTS

NOT_YET = {"es": "❌ Todavía no:", "en": "❌ Not yet:"}


def assert_correct(feedback: Feedback, lang: str) -> None:
    """The checker accepted the answer, and said so in ``lang``."""
    assert isinstance(feedback, Feedback)
    assert feedback.ok, feedback.message
    assert feedback.message.startswith("✅ ¡Correcto!" if lang == "es" else "✅ Correct!")


def assert_named(feedback: Feedback, lang: str, key: str) -> None:
    """The checker rejected the answer, in ``lang``, with the hint ``key``."""
    assert isinstance(feedback, Feedback)
    assert not feedback.ok, f"accepted a wrong answer (expected hint {key!r})"
    assert feedback.message.startswith(NOT_YET[lang]), feedback.message
    assert feedback.hint == key, f"expected hint {key!r}, got {feedback.hint!r}: {feedback.message}"


def assert_hint(feedback: Feedback, lang: str, key: str, hints: dict[str, tuple[str, str]]) -> None:
    """The checker rejected the answer, in ``lang``, with the hint ``key`` of the module's table ``hints``
    (or of the core's)."""
    assert key in hints or key in CORE_HINTS, f"{key!r} is not a hint of this module"
    assert_named(feedback, lang, key)


def assert_rejected(feedback: Feedback, lang: str, hint: str | dict[str, str]) -> None:
    """The checker rejected the answer with the hint ``hint`` (its key) in ``lang``."""
    if isinstance(hint, str):
        assert_named(feedback, lang, hint)
        return
    assert not feedback.ok, f"a wrong answer was accepted: {feedback.message}"
    assert feedback.message.startswith(NOT_YET[lang]), feedback.message
    assert hint[lang] in feedback.message, f"expected the hint {hint[lang]!r} in: {feedback.message}"
    if os.environ.get("RECORD_KEYS"):
        with open(os.environ["RECORD_KEYS"], "a") as out:
            out.write(json.dumps({"es": hint["es"], "en": hint["en"], "key": feedback.hint}, ensure_ascii=False) + "\n")


def bank(check: Callable[..., Feedback], mistakes: dict[str, tuple[Callable[..., Any], Any]]) -> list:
    """pytest parameters ``(check, wrong_answer, key)`` for a bank ``{name: (wrong_answer, hint key)}``."""
    return [pytest.param(check, fn, hint, id=f"{check.__name__}: {name}") for name, (fn, hint) in mistakes.items()]


def assert_bank(check: Callable[..., Feedback], fn: Callable[..., Any], hint: Any, lang: str) -> None:
    """The wrong answer ``fn`` is rejected with the hint ``hint`` (its key)."""
    assert_rejected(check(fn, lang=lang), lang, hint)


def _raises(*args):
    raise ValueError("boom")


def _recurses(*args):
    return _recurses(*args)


def _like(x, value):
    return torch.full_like(x, value, dtype=torch.float32) if isinstance(x, torch.Tensor) else value


# What a half-written answer returns, gathered from the tests of every notebook's checkers: plain values, containers of the wrong
# things, tensors of every wrong dtype and shape, and answers built from the first argument.
JUNK = {
    "None": lambda *a: None,
    "string": lambda *a: "abc",
    "empty dict": lambda *a: {},
    "dict of strings": lambda *a: {"a": 1},
    "dict of ints": lambda *a: {1: 2},
    "dict of triples": lambda *a: {(1, 2, 3): 1},
    "empty list": lambda *a: [],
    "empty tuple": lambda *a: (),
    "int": lambda *a: 3,
    "float": lambda *a: 3.5,
    "nan": lambda *a: float("nan"),
    "bool": lambda *a: True,
    "list of None": lambda *a: [None],
    "list of a float": lambda *a: [1.5],
    "list of a bool": lambda *a: [True],
    "list of floats": lambda *a: [1.0, 2.0],
    "empty tensor": lambda *a: torch.empty(0),
    "scalar tensor": lambda *a: torch.tensor(1.0),
    "scalar nan tensor": lambda *a: torch.tensor(float("nan")),
    "vector": lambda *a: torch.tensor([1.0, 2.0]),
    "int vector": lambda *a: torch.tensor([1, 2]),
    "nan matrix": lambda *a: torch.full((3, 3), float("nan")),
    "nan 3-d tensor": lambda *a: torch.full((2, 3, 5), float("nan")),
    "int tensor": lambda *a: torch.ones(3, 5, dtype=torch.long),
    "bool tensor": lambda *a: torch.ones(2, 3, dtype=torch.bool),
    "bfloat16 tensor": lambda *a: torch.zeros(3, 11, dtype=torch.bfloat16),
    "complex tensor": lambda *a: torch.ones(3, 5, dtype=torch.complex64),
    "triple of complex 4-d tensors": lambda *a: (torch.zeros(2, 3, 1, 4, dtype=torch.complex64),) * 3,
    "random tensor": lambda *a: torch.randn(4, 4),
    "list of tensors": lambda *a: [torch.zeros(2), torch.zeros(3)],
    "tuple of a tensor": lambda *a: (torch.zeros(1),),
    "triple of tensors": lambda *a: (torch.zeros(1),) * 3,
    "pair of None": lambda *a: (None, None),
    "triple of None": lambda *a: (None, None, None),
    "triple of strings": lambda *a: ("a", "b", "c"),
    "pair of floats": lambda *a: (0.5, 1.5),
    "function": lambda *a: _raises,
    "generator": lambda *a: (x for x in range(3)),
    "first argument back": lambda *a: a[0],
    "first argument as int": lambda *a: a[0].int(),
    "NaN shaped like the input": lambda *a: _like(a[0], float("nan")),
    "zeros shaped like the input": lambda *a: _like(a[0], 0.0),
    "pair of NaN tensors": lambda *a: (_like(a[0], float("nan")), _like(a[0], float("nan"))),
    "takes no argument": lambda: 0,
}
# What a student's function raises: the checker names it (hint "crashed").
RAISED = [ValueError("boom"), KeyError(241), IndexError("bad index"), ZeroDivisionError(), RuntimeError("boom")]
SAFETY_NET = {"es": "el comprobador no pudo interpretar", "en": "the checker could not make sense"}


def assert_junk_never_crashes(check: Callable[..., Feedback], lang: str) -> None:
    """Whatever a student's function returns (each of ``JUNK``) or raises (each of ``RAISED``), the checker answers
    "not yet" in ``lang``, never says that it could not check, and names the exception."""
    for what, answer in JUNK.items():
        fb = check(answer, lang=lang)
        assert isinstance(fb, Feedback), what
        assert not fb.ok, f"accepted junk ({what}): {fb.message}"
        assert fb.message.startswith(NOT_YET[lang]), (what, fb.message)
        assert SAFETY_NET[lang] not in fb.message, f"did not foresee {what}: {fb.message}"
    for exc in RAISED:

        def raises(*args, exc=exc):
            raise exc

        fb = check(raises, lang=lang)
        assert not fb and fb.hint == "crashed" and type(exc).__name__ in fb.message, fb.message
    fb = check(_recurses, lang=lang)
    assert not fb and "RecursionError" in fb.message, fb.message  # named as a function that calls itself
    fb = check("not a function", lang=lang)
    assert not fb.ok and fb.message.startswith(NOT_YET[lang])
