"""Moved to :mod:`minitransformer.course.corpus`; this old name keeps saved notebooks importing."""

from .course.corpus import *  # noqa: F403
