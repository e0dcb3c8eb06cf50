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


def assert_junk_never_crashes(check: Callable[..., Feedback], lang: str, junk: list) -> None:
    """Whatever a student's function returns (each of ``junk``) or raises, the checker answers "not yet" in
    ``lang`` and never says that it could not check; an exception is named."""
    for value in junk:
        fb = check(lambda *args, value=value: value, lang=lang)
        assert isinstance(fb, Feedback) and not fb.ok, value
        assert fb.message.startswith(NOT_YET[lang])
        assert "el comprobador no pudo" not in fb.message and "checker could not" not in fb.message, fb.message

    def raises(*args):
        raise KeyError(241)

    fb = check(raises, lang=lang)
    assert not fb and fb.hint == "crashed" and "KeyError" in fb.message


def shown_solutions_in_a_fresh_interpreter(checks: str, notebook: str, lang: str) -> list[str]:
    """What the checkers of module ``checks`` say of the code ``show_solution`` shows for each exercise of
    ``notebook`` ("12"), run by a new Python process with only the checkers imported, each solution in a namespace
    of its own: one line per exercise."""
    import subprocess
    import sys
    from pathlib import Path

    from minitransformer.exercises import show_solution
    from minitransformer.exercises.registry import exercises

    lines = [f"import {checks} as checks", "results = []"]
    for name, (check, solution) in exercises().items():
        if name.startswith(f"{notebook}."):
            code = show_solution(name, lang=lang).code
            stub_name = solution.__name__.removeprefix("solution_")
            lines += [
                "cell = {}",
                f"exec(compile({code!r}, '<cell>', 'exec', dont_inherit=True), cell)",
                f"results.append(str(checks.{check.__name__}(cell[{stub_name!r}], lang={lang!r})))",
            ]
    lines.append("print('\\n'.join(results))")
    src = Path(__file__).resolve().parents[1] / "src"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(src), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run(
        [sys.executable, "-c", "\n".join(lines)], capture_output=True, text=True, env=env, timeout=300
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout.splitlines()
