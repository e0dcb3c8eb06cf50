"""The exercises of every notebook, found by their ids, and their worked solutions shown.

An exercise's id (``"NN.slug"``) is written twice, on its checker, decorated with
``@exercise("NN.slug")`` (:func:`~._core.exercise`), and on its worked solution, decorated with
``@solution("NN.slug", es, en)`` (:func:`solution`, with its short explanation in both languages):
that is the whole registration. The checkers live in the concept modules of this package; the
solutions of notebook NN in its answer key ``solutions/nbNN.py``, each a plain function
``solution_<stub>`` where ``<stub>`` is the name of the function the student writes in the
notebook. A notebook's answer key is imported only when one of its solutions is asked for.

In a notebook: ``show_solution("01.softmax")`` shows the code and the explanation in the
notebook's language (the checkers' "not yet" answers say so); ``show_solution("01")`` shows all
of notebook 01's, for a teacher.
"""

from __future__ import annotations

import ast
import builtins
import importlib
import inspect
import pkgutil
import re
import sys
import textwrap
import types
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..i18n import error, language, tr
from ._core import CHECKERS, SOLUTIONS

__all__ = [
    "Solution",
    "Solutions",
    "check_solution",
    "exercise_of",
    "exercises",
    "show_solution",
    "solution",
    "solution_function",
]


def _import_all(package: str) -> None:
    """Import every module of ``package`` (a subpackage of this one): their ``@exercise`` run."""
    path = importlib.import_module(f"{__package__}{package}").__path__
    for module in pkgutil.iter_modules(path):
        if not module.name.startswith("_"):
            importlib.import_module(f"{__package__}{package}.{module.name}")


def _answer_key(notebook: str) -> None:
    """Import notebook ``notebook``'s answer key (``"01"``: ``solutions/nb01.py``), if it has one."""
    with_key = {m.name for m in pkgutil.iter_modules(importlib.import_module(f"{__package__}.solutions").__path__)}
    if f"nb{notebook}" in with_key:
        importlib.import_module(f"{__package__}.solutions.nb{notebook}")


def exercises() -> dict[str, tuple[Callable[..., Any], Callable[..., Any]]]:
    """Every exercise of the course, ``id -> (checker, solution)``, in notebook order."""
    _import_all("")
    _import_all(".solutions")
    return {name: (CHECKERS[name], SOLUTIONS[name]) for name in sorted(SOLUTIONS, key=lambda n: n[:2])}


def solution(name: str, es: str, en: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Decorator for the worked solution of exercise ``name`` (``def solution_<stub>``), with its short
    explanation in Spanish and English: the answer ``show_solution(name)`` shows."""

    def attach(fn: Callable[..., Any]) -> Callable[..., Any]:
        fn.__exercise__ = name  # type: ignore[attr-defined]
        fn.__explanation__ = (es, en)  # type: ignore[attr-defined]
        SOLUTIONS[name] = fn
        return fn

    return attach


def exercise_of(check: Callable[..., Any]) -> str | None:
    """The id of a checker, or ``None``."""
    return getattr(check, "__exercise__", None)


def _solution(name: str) -> Callable[..., Any]:
    _answer_key(str(name)[:2])
    if name not in SOLUTIONS:
        every = exercises()
        known = ", ".join(f'"{n}"' for n in every if n[:2] == str(name)[:2]) or ", ".join(every)
        raise error(
            f"no hay ningún ejercicio llamado {name!r}; los de ese cuaderno son: {known}.",
            f"there is no exercise called {name!r}; that notebook's are: {known}.",
        )
    return SOLUTIONS[name]


def solution_function(name: str) -> Callable[..., Any]:
    """The worked solution of exercise ``name`` (a function the checker accepts)."""
    return _solution(name)


def check_solution(name: str, lang: str | None = None) -> Any:  # the checker's Feedback
    """Run exercise ``name``'s checker on its own solution."""
    solution = _solution(name)
    return exercises()[name][0](solution, lang=lang)


@dataclass(frozen=True)
class Solution:
    """A worked solution as the notebook shows it: explanation, then code."""

    name: str
    lang: str
    explanation: str
    code: str

    def _repr_markdown_(self) -> str:
        title = tr(self.lang, "Solución", "Solution")
        return f"**{title} · {self.name}**\n\n{self.explanation}\n\n```python\n{self.code}\n```\n"

    def __repr__(self) -> str:
        title = tr(self.lang, "Solución", "Solution")
        return f"{title} · {self.name}\n\n{self.explanation}\n\n{self.code}\n"

    __str__ = __repr__


# A comment in a solution may be written in both languages, as in the notebooks' sources:
# ``# «la caché crece|the cache grows»`` shows the Spanish side in Spanish, the English in English.
_SWAP = re.compile(r"«([^«»|]*)\|([^«»|]*)»")


def _imports(fn: Callable[..., Any], tree: ast.AST) -> list[str]:
    """The import lines the code of ``fn`` needs to run on its own, in a fresh cell: one for each
    module-level name it uses (``torch``, ``math``, ``F``, ``Tensor``, ...), standard library first."""
    local = {a.arg for a in ast.walk(tree) if isinstance(a, ast.arg)}
    local |= {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    used = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)} - local - set(dir(builtins))
    lines: dict[str, str] = {}  # top-level module -> line
    for name in sorted(used):
        if name not in fn.__globals__:
            continue  # undefined: the code fails where it is pasted, and the tests say so
        value = fn.__globals__[name]
        if isinstance(value, types.ModuleType):
            module = value.__name__
            line = f"import {module}" if module == name else f"import {module} as {name}"
        else:
            module = getattr(value, "__module__", None)
            if module is None or getattr(value, "__qualname__", None) != name:
                continue  # a constant cannot be imported by name: the tests say so
            line = f"from {module} import {name}"
        lines[line] = module.partition(".")[0]
    ours = __package__.partition(".")[0]
    groups = [
        [line for line, top in lines.items() if top in sys.stdlib_module_names],
        [line for line, top in lines.items() if top not in sys.stdlib_module_names and top != ours],
        [line for line, top in lines.items() if top == ours],
    ]
    out: list[str] = []
    for group in filter(None, groups):  # as isort writes them: a blank line between groups
        out += ([""] if out else []) + sorted(group, key=lambda line: (line.startswith("from"), line))
    return out


def _source(fn: Callable[..., Any], lang: str) -> str:
    """``fn``'s code from its ``def`` line (decorators dropped), named as the student's stub, its
    comments in ``lang``, after the imports it needs: it runs pasted into a fresh cell."""
    source = textwrap.dedent(inspect.getsource(fn))
    node = ast.parse(source).body[0]
    lines = source.splitlines()[node.lineno - 1 :]
    node.decorator_list = []  # @solution is not part of the code shown
    stub = fn.__name__.removeprefix("solution_")
    lines[0] = lines[0].replace(f"def {fn.__name__}(", f"def {stub}(", 1)
    code = _SWAP.sub(lambda m: m.group(1) if lang == "es" else m.group(2), "\n".join(lines).rstrip())
    imports = _imports(fn, node)
    return "\n".join(imports) + "\n\n\n" + code if imports else code


class Solutions(tuple):
    """Every worked solution of one notebook, shown one after the other (for teachers)."""

    def _repr_markdown_(self) -> str:
        return "\n".join(s._repr_markdown_() for s in self)

    def __repr__(self) -> str:
        return "\n".join(repr(s) for s in self)

    __str__ = __repr__


def show_solution(name: str, lang: str | None = None) -> Solution | Solutions:
    """The worked solution of exercise ``name`` (e.g. ``"01.softmax"``), in ``lang``
    (by default the notebook's language, set by its setup cell). ``name`` = ``"01"``: all of
    notebook 01's."""
    lang = lang or language()
    _answer_key(str(name)[:2])
    mine = [n for n in SOLUTIONS if n.startswith(f"{name}.")]  # name = "01": notebook 01's, in its order
    if name not in SOLUTIONS and mine:
        return Solutions(show_solution(n, lang) for n in mine)
    fn = solution_function(name)
    es, en = getattr(fn, "__explanation__", None) or ((inspect.getdoc(fn) or "",) * 2)
    return Solution(name, lang, tr(lang, es, en), _source(fn, lang))
