"""Moved to :mod:`minitransformer.course.ablation`; this old name keeps saved notebooks importing."""

from .course.ablation import *  # noqa: F403
