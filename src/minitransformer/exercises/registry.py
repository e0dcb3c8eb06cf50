"""The exercises of every notebook, their checkers and their worked solutions.

One line per exercise: its name (``"NN.slug"``), the checker module in this package, the
checker and the solution function. A solution is a plain function ``solution_<stub>`` next to
its checker, where ``<stub>`` is the name of the function the student writes in the notebook;
:func:`explain` attaches a short explanation in both languages (without it, the docstring is
shown). Nothing is imported until a solution is asked for.

In a notebook: ``show_solution("01.softmax")`` shows the code and the explanation in the
notebook's language (the checkers' "not yet" answers say so); ``show_solution("01")`` shows all
of notebook 01's, for a teacher.
"""

from __future__ import annotations

import ast
import builtins
import importlib
import inspect
import re
import sys
import textwrap
import types
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..i18n import error, language, tr

__all__ = [
    "EXERCISES",
    "Solution",
    "Solutions",
    "check_solution",
    "exercise_of",
    "explain",
    "register",
    "show_solution",
    "solution_function",
]

# name -> (module of minitransformer.exercises, checker, solution)
EXERCISES: dict[str, tuple[str, str, str]] = {}


def register(name: str, module: str, check: str, solution: str) -> None:
    """Add one exercise: ``register("01.softmax", "attention", "check_softmax", "solution_softmax")``."""
    EXERCISES[name] = (module, check, solution)


register("00.attention_shapes", "intro", "check_attention_shapes", "solution_attention_shapes")
register("00.mha_parameters", "intro", "check_mha_parameters", "solution_mha_parameters")
register("01.softmax", "attention", "check_softmax", "solution_softmax")
register("01.attention_weights", "attention", "check_attention_weights", "solution_attention_weights")
register("01.self_attention", "attention", "check_self_attention", "solution_self_attention")
register("02.split_heads", "attention", "check_split_heads", "solution_split_heads")
register("02.masked_attention", "attention", "check_masked_attention", "solution_masked_attention")
register("02.decoder_mask", "attention", "check_decoder_mask", "solution_decoder_mask")
register("03.sinusoidal", "positional", "check_sinusoidal_encoding", "solution_sinusoidal_vectorised")
register("03.interleaved_to_concat", "positional", "check_interleaved_to_concat", "solution_interleaved_to_concat")
register("03.shift_matrix_concat", "positional", "check_shift_matrix_concat", "solution_shift_matrix_concat")
register("04.layer_norm", "layers", "check_layer_norm", "solution_layer_norm")
register("04.sublayer_connection", "layers", "check_post_ln_sublayer", "solution_sublayer_connection")
register("04.rms_norm", "layers", "check_rms_norm", "solution_rms_norm")
register("05.shift_right", "decoder", "check_shift_right", "solution_my_shift_right")
register("05.cross_attention", "decoder", "check_cross_attention", "solution_my_cross_attention")
register("05.decoder_layer", "decoder", "check_decoder_layer", "solution_my_decoder_layer")
register("06.embed", "model", "check_scaled_embeddings", "solution_my_embed")
register("06.model_params", "model", "check_model_params", "solution_my_model_params")
register("06.output_probabilities", "model", "check_output_probabilities", "solution_my_output_probabilities")
register("07.noam_lr", "training", "check_noam_lr", "solution_my_noam_lr")
register("07.shift_targets", "training", "check_shift_targets", "solution_my_shift_targets")
register("07.smoothed_targets", "training", "check_smoothed_targets", "solution_my_smoothed_targets")
register("08.strongest_head", "heads", "check_strongest_head", "solution_strongest_head")
register("08.attention_row", "heads", "check_attention_row", "solution_attention_row")
register("09.top_k", "generation", "check_top_k", "solution_my_top_k")
register("09.top_p", "generation", "check_top_p", "solution_my_top_p")
register("09.cached_attention", "generation", "check_cached_attention", "solution_my_cached_attention")
register("10.rope", "modern", "check_rope", "solution_rope")
register("10.swiglu", "modern", "check_swiglu", "solution_swiglu")
register("10.online_softmax", "modern", "check_online_softmax", "solution_online_softmax")
register("10.rope_offset", "modern", "check_rope_offset", "solution_rope_offset")
register("11.count_pairs", "tokens", "check_count_pairs", "solution_my_count_pairs")
register("11.merge", "tokens", "check_merge", "solution_my_merge")
register("11.encode", "tokens", "check_encode", "solution_my_encode")


def explain(es: str, en: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Decorator for a solution: its short explanation in Spanish and English."""

    def attach(fn: Callable[..., Any]) -> Callable[..., Any]:
        fn.__explanation__ = (es, en)  # type: ignore[attr-defined]
        return fn

    return attach


def exercise_of(check: Callable[..., Any]) -> str | None:
    """The registered name of a checker, or ``None``."""
    module = getattr(check, "__module__", "").rpartition(".")[2]
    name = getattr(check, "__name__", "")
    for exercise, (mod, chk, _) in EXERCISES.items():
        if (mod, chk) == (module, name):
            return exercise
    return None


def _entry(name: str) -> tuple[Any, Callable[..., Any], Callable[..., Any]]:
    if name not in EXERCISES:
        known = ", ".join(f'"{n}"' for n in EXERCISES if n[:2] == str(name)[:2]) or ", ".join(EXERCISES)
        raise error(
            f"no hay ningún ejercicio llamado {name!r}; los de ese cuaderno son: {known}.",
            f"there is no exercise called {name!r}; that notebook's are: {known}.",
        )
    module, check, solution = EXERCISES[name]
    mod = importlib.import_module(f"{__package__}.{module}")
    return mod, getattr(mod, check), getattr(mod, solution)


def solution_function(name: str) -> Callable[..., Any]:
    """The worked solution of exercise ``name`` (a function the checker accepts)."""
    return _entry(name)[2]


def check_solution(name: str, lang: str | None = None) -> Any:  # the checker's Feedback
    """Run exercise ``name``'s checker on its own solution."""
    _, check, solution = _entry(name)
    return check(solution, lang=lang)


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
    node.decorator_list = []  # @explain is not part of the code shown
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
    if name not in EXERCISES and any(n.startswith(f"{name}.") for n in EXERCISES):
        return Solutions(show_solution(n, lang) for n in EXERCISES if n.startswith(f"{name}."))
    fn = solution_function(name)
    es, en = getattr(fn, "__explanation__", None) or ((inspect.getdoc(fn) or "",) * 2)
    return Solution(name, lang, tr(lang, es, en), _source(fn, lang))
