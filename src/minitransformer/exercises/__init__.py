"""Checkers for the notebooks' exercises, one module per concept.

Each checker takes the student's answer (usually a function) and ``lang``, runs it on cases
whose right answer comes from the package or from PyTorch, and returns a :class:`Feedback`
that prints as one short message in the notebook's language: a success, or "not yet" with
a hint aimed at the typical mistake.
"""

from ._core import Feedback, attempt, checker, correct, not_yet

__all__ = ["Feedback", "attempt", "checker", "correct", "not_yet"]
