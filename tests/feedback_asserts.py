"""Assertions shared by the exercise-checker tests: they name a hint by its key, never by its wording,
so that a hint can be reworded without touching a test."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from typing import Any

import pytest

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
