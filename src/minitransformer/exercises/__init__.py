"""Checkers for the notebooks' exercises, one module per concept, and their worked solutions.

Each checker takes the student's answer (usually a function) and ``lang``, runs it on cases
whose right answer comes from the package or from PyTorch, and returns a :class:`Feedback`
that prints as one short message in the notebook's language: a success, or "not yet" with
a hint aimed at the typical mistake. ``show_solution("01.softmax")`` shows an exercise's
worked solution, from its notebook's answer key in :mod:`.solutions` (see :mod:`.registry`).
"""

from ._core import Feedback, attempt, checker, correct, exercise, not_yet
from .registry import show_solution

__all__ = ["Feedback", "attempt", "checker", "correct", "exercise", "not_yet", "show_solution"]
