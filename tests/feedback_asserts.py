"""Assertions shared by the exercise-checker tests."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from minitransformer.exercises import Feedback


def assert_correct(feedback: Feedback, lang: str) -> None:
    """The checker accepted the answer, and said so in ``lang``."""
    assert isinstance(feedback, Feedback)
    assert feedback.ok, feedback.message
    assert feedback.message.startswith("✅ ¡Correcto!" if lang == "es" else "✅ Correct!")


def assert_hint(feedback: Feedback, lang: str, key: str, hints: dict[str, tuple[str, str]]) -> None:
    """The checker rejected the answer with the hint ``hints[key]`` in ``lang``."""
    assert isinstance(feedback, Feedback)
    assert not feedback.ok, f"accepted a wrong answer (expected hint {key!r})"
    assert feedback.message.startswith("❌ Todavía no:" if lang == "es" else "❌ Not yet:")
    es, en = hints[key]
    text = es if lang == "es" else en
    # hints with {fields} are checked up to their first field
    assert text.split("{")[0] in feedback.message, f"expected hint {key!r}, got: {feedback.message}"


def assert_rejected(feedback: Feedback, lang: str, hint: dict[str, str]) -> None:
    """The checker rejected the answer with a message containing ``hint[lang]``."""
    assert not feedback.ok, f"a wrong answer was accepted: {feedback.message}"
    assert feedback.message.startswith("❌ Todavía no:" if lang == "es" else "❌ Not yet:"), feedback.message
    assert hint[lang] in feedback.message, f"expected the hint {hint[lang]!r} in: {feedback.message}"


def bank(check: Callable[..., Feedback], mistakes: dict[str, tuple[Callable[..., Any], dict[str, str]]]) -> list:
    """pytest parameters ``(check, wrong_answer, hint)`` for a bank ``{name: (wrong_answer, {lang: hint})}``."""
    return [pytest.param(check, fn, hint, id=f"{check.__name__}: {name}") for name, (fn, hint) in mistakes.items()]


def assert_bank(check: Callable[..., Feedback], fn: Callable[..., Any], hint: dict[str, str], lang: str) -> None:
    """The wrong answer ``fn`` is rejected with ``hint[lang]`` in the message."""
    assert_rejected(check(fn, lang=lang), lang, hint)
