"""Old names: a module whose names moved to another module still answers for them."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping

__all__ = ["moved_names"]


def moved_names(module: str, table: Mapping[str, str]) -> Callable[[str], object]:
    """The ``__getattr__`` (PEP 562) of ``module`` that finds each name of ``table`` (name -> the
    package's module that holds it now, e.g. ``"generate": "generation"``) where it lives.

    The module is imported when the name is asked for, not before: a name may have moved to a
    module that imports ``module`` itself (``course.counting`` imports ``gpt``).
    """
    package = module.split(".")[0]

    def __getattr__(name: str) -> object:
        if name in table:
            return getattr(importlib.import_module(f"{package}.{table[name]}"), name)
        raise AttributeError(f"module {module!r} has no attribute {name!r}")

    return __getattr__
