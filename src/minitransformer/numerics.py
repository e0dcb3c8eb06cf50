"""Moved to :mod:`minitransformer.course.numerics`; this old name keeps saved notebooks and commands working."""

from .course.numerics import *  # noqa: F403
from .course.numerics import main

if __name__ == "__main__":
    main()
