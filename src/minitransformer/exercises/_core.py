"""What every checker shares: the feedback object and safe calls to the student's code."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..i18n import tr

__all__ = ["COMMON_HINTS", "Feedback", "not_a_tensor", "correct", "not_yet", "attempt", "checker", "Unfinished"]


# Hints that several checkers give, (Spanish, English); modules merge them into their HINTS.
COMMON_HINTS: dict[str, tuple[str, str]] = {
    "not_tensor": (
        "tu función debe devolver un tensor de PyTorch.",
        "your function must return a PyTorch tensor.",
    ),
    "nan": (
        "el resultado contiene NaN o infinitos.",
        "the result contains NaN or infinite values.",
    ),
}


@dataclass(frozen=True)
class Feedback:
    """The answer of a checker. True when the exercise is solved; prints as its message."""

    ok: bool
    message: str

    def __bool__(self) -> bool:
        return self.ok

    def __repr__(self) -> str:
        return self.message

    __str__ = __repr__


def correct(lang: str, es: str = "", en: str = "") -> Feedback:
    """A success, with an optional extra sentence."""
    extra = tr(lang, es, en)
    head = tr(lang, "✅ ¡Correcto!", "✅ Correct!")
    return Feedback(True, f"{head} {extra}".strip())


def not_yet(lang: str, es: str, en: str) -> Feedback:
    """A "not yet" with a hint."""
    head = tr(lang, "❌ Todavía no:", "❌ Not yet:")
    return Feedback(False, f"{head} {tr(lang, es, en)}")


def not_a_tensor(lang: str, got: Any) -> Feedback:
    """A "not yet" for an answer that is not a tensor, naming what it is instead."""
    return not_yet(
        lang,
        f"tu función debe devolver un tensor de PyTorch, no {type(got).__name__}.",
        f"your function must return a PyTorch tensor, not {type(got).__name__}.",
    )


class Unfinished(Exception):
    """Raised by :func:`attempt` to carry the feedback for code that did not run."""

    def __init__(self, feedback: Feedback):
        super().__init__(feedback.message)
        self.feedback = feedback


def attempt(lang: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """Call the student's ``fn``; turn "not written yet" and crashes into feedback.

    Raises :class:`Unfinished` (caught by :func:`checker`) when ``fn`` raises
    ``NotImplementedError``, returns ``None`` or raises another exception.
    """
    try:
        result = fn(*args, **kwargs)
    except NotImplementedError:
        raise Unfinished(not_yet(
            lang,
            "falta escribir la función: sustituye `raise NotImplementedError` por tu código.",
            "the function is not written yet: replace `raise NotImplementedError` with your code.",
        )) from None
    except Exception as exc:  # the student's code crashed: say how, briefly
        raise Unfinished(not_yet(
            lang,
            f"tu función lanzó {type(exc).__name__}: {exc}",
            f"your function raised {type(exc).__name__}: {exc}",
        )) from None
    if result is None:
        raise Unfinished(not_yet(
            lang, "tu función devuelve `None`: ¿te falta un `return`?",
            "your function returns `None`: are you missing a `return`?",
        ))
    return result


def checker(fn: Callable[..., Feedback]) -> Callable[..., Feedback]:
    """Decorator for checkers: an :class:`Unfinished` inside becomes its feedback."""
    import functools

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Feedback:
        try:
            return fn(*args, **kwargs)
        except Unfinished as stop:
            return stop.feedback

    return wrapper
