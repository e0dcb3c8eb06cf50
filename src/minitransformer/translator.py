"""Moved to :mod:`minitransformer.course.translator`; this old name keeps saved notebooks importing."""

from .course.translator import *  # noqa: F403
