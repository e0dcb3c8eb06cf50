"""The package's imports run one way: down the order written in src/minitransformer/README.md, and down
the layers written here (the concepts never import the course's props)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "minitransformer"
MAP = PACKAGE / "README.md"

# The package's layers, bottom to top: a module imports from its own layer or the layers below, never
# from one above. (Within a layer, the README's order decides.)
LAYERS = {
    "foundations": "the two languages, seed, threads and device",
    "concepts": "what the notebooks teach: attention to the models, training, generation, weights, measurements",
    "course": "the course's props (minitransformer.course): recipes, corpora, runs, the numerics profile",
    "figures": "viz: figures of the concepts and of the course's runs",
    "exercises": "exercises: checkers of the notebooks' exercises",
}
FOUNDATIONS = {"i18n", "runtime"}


def layer(module: str) -> str:
    """The layer of a module of the package (``viz.heads`` -> ``figures``)."""
    if module in FOUNDATIONS:
        return "foundations"
    return {"course": "course", "viz": "figures", "exercises": "exercises"}.get(module.split(".")[0], "concepts")


def import_order(text: str) -> list[str]:
    """The module names of the map, top to bottom (first word of each line of the block)."""
    block = re.search(r"<!-- import-order:start -->\s*```\n(.*?)```\s*<!-- import-order:end -->", text, re.S)
    assert block, f"{MAP.name} has no import-order block"
    return [line.split()[0] for line in block.group(1).splitlines() if line.strip()]


def module_name(path: Path) -> str:
    """``viz/heads.py`` -> ``viz.heads``; ``viz/__init__.py`` -> ``viz``; the package's own -> ``""``."""
    parts = list(path.relative_to(PACKAGE).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def imported(source: str, name: str, is_package: bool, known: set[str]) -> list[tuple[int, str]]:
    """(line, module) of every import of a package module in ``source``, the module ``name``'s
    code, including imports inside functions. ``from .viz import style`` names ``viz.style``
    when that is a module, else ``viz``."""
    here = name.split(".") if name else []
    package = here if is_package else here[:-1]
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
            bases = [
                t.removeprefix("minitransformer").lstrip(".") for t in targets if t.split(".")[0] == "minitransformer"
            ]
            found += [(node.lineno, b) for b in bases]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                up = package[: len(package) - (node.level - 1)] if node.level > 1 else package
                base = ".".join([*up, *(node.module.split(".") if node.module else [])])
            elif node.module and node.module.split(".")[0] == "minitransformer":
                base = node.module.removeprefix("minitransformer").lstrip(".")
            else:
                continue
            for alias in node.names:
                sub = f"{base}.{alias.name}" if base else alias.name
                found.append((node.lineno, sub if sub in known else base))
    return found


def violations(order: list[str], sources: dict[str, tuple[str, bool]]) -> list[str]:
    """Every import of a module that is not above the importer in ``order``."""
    rank = {name: i for i, name in enumerate(order)}
    known = set(sources)
    wrong = []
    for name, (source, is_package) in sources.items():
        for line, target in imported(source, name, is_package, known):
            if target == name:
                continue
            if name == "":
                wrong.append(
                    f"minitransformer/__init__.py:{line} imports {target}: keep `import minitransformer` light"
                )
            elif target == "":
                wrong.append(f"{name}:{line} imports the package itself; import the module it needs")
            elif rank.get(target, -1) >= rank.get(name, -1):
                wrong.append(f"{name}:{line} imports {target}, which the map puts below it")
    return wrong


def test_every_module_has_one_line_in_the_map():
    order = import_order(MAP.read_text(encoding="utf-8"))
    assert len(order) == len(set(order)), f"listed twice: {sorted({m for m in order if order.count(m) > 1})}"
    present = set(modules()) - {""}
    missing = sorted(present - set(order))
    assert not missing, (
        f"add one line for each of {missing} to the import order in src/minitransformer/README.md, "
        "below every module it imports"
    )
    stale = sorted(set(order) - present)
    assert not stale, f"the map lists modules that do not exist: {stale}"


def test_imports_run_down_the_map():
    order = import_order(MAP.read_text(encoding="utf-8"))
    sources = {name: (path.read_text(encoding="utf-8"), path.name == "__init__.py") for name, path in modules().items()}
    wrong = violations(order, sources)
    assert not wrong, "imports against the order of src/minitransformer/README.md:\n  " + "\n  ".join(wrong)


@pytest.mark.parametrize(
    ("name", "is_package", "source", "expected"),
    [
        ("data", False, "from .model import target_mask", ["model"]),
        ("data", False, "def f():\n    from minitransformer.model import target_mask", ["model"]),
        ("runtime", False, "def setup():\n    from .viz import style", ["viz.style"]),
        ("train", False, "from . import runtime", ["runtime"]),
        (
            "viz.heads",
            False,
            "from ..model import AttentionMaps\nfrom .attention import heatmap",
            ["model", "viz.attention"],
        ),
        ("exercises", True, "from ._core import Feedback", ["exercises._core"]),
        ("viz.training", False, "import minitransformer.analysis\nimport numpy", ["analysis"]),
    ],
)
def test_imports_are_resolved_to_modules(name, is_package, source, expected):
    known = {
        "model",
        "runtime",
        "viz",
        "viz.style",
        "viz.attention",
        "viz.heads",
        "exercises",
        "exercises._core",
        "analysis",
        "data",
        "train",
        "viz.training",
    }
    assert [target for _, target in imported(source, name, is_package, known)] == expected


def test_a_wrong_way_import_is_reported():
    order = ["attention", "data", "model", "viz"]
    sources = {
        "attention": ("import torch", False),
        "data": ("from .attention import padding_mask\ndef f():\n    from .model import target_mask", False),
        "model": ("from .attention import causal_mask", False),
        "viz": ("", True),
    }
    assert violations(order, sources) == ["data:3 imports model, which the map puts below it"]
    assert violations(order, {**sources, "data": ("from .attention import padding_mask", False)}) == []


def layer_violations(sources: dict[str, tuple[str, bool]]) -> list[str]:
    """Every import of a module in a higher layer than the importer's."""
    height = {name: i for i, name in enumerate(LAYERS)}
    known = set(sources)
    wrong = []
    for name, (source, is_package) in sources.items():
        if not name:
            continue
        for line, target in imported(source, name, is_package, known):
            if target and height[layer(target)] > height[layer(name)]:
                wrong.append(f"{name}:{line} ({layer(name)}) imports {target} ({layer(target)})")
    return wrong


def sources_of_the_package() -> dict[str, tuple[str, bool]]:
    return {name: (path.read_text(encoding="utf-8"), path.name == "__init__.py") for name, path in modules().items()}


def test_no_module_imports_a_higher_layer():
    wrong = layer_violations(sources_of_the_package())
    assert not wrong, "imports against the layers of tests/test_architecture.py:\n  " + "\n  ".join(wrong)


def test_the_concepts_never_import_the_course():
    sources = sources_of_the_package()
    known = set(sources)
    wrong = [
        f"{name}:{line} imports {target}"
        for name, (source, is_package) in sources.items()
        if name and layer(name) in ("foundations", "concepts")
        for line, target in imported(source, name, is_package, known)
        if target.split(".")[0] == "course"
    ]
    assert not wrong, "a concept module imports the course's props:\n  " + "\n  ".join(wrong)


def test_every_module_has_a_layer_and_the_layers_follow_the_map():
    order = import_order(MAP.read_text(encoding="utf-8"))
    heights = [list(LAYERS).index(layer(name)) for name in order]
    out_of_place = [name for name, h, before in zip(order[1:], heights[1:], heights) if h < before]
    assert not out_of_place, f"the README's map lists these below a higher layer: {out_of_place}"


def test_the_package_docstring_names_every_module_in_its_layer():
    """``help(minitransformer)`` is a reader's first map: one bullet per layer, naming every module and package of
    the top level (and the live controls) in the bullet of its layer."""
    import minitransformer

    bullets = re.findall(r"^\* (\w+|``\w+``):(.*?)(?=^\* |^$)", minitransformer.__doc__, re.M | re.S)
    named = [
        (name, head if head in LAYERS else layer(head.strip("`")))
        for head, text in bullets
        for name in dict.fromkeys(re.findall(r"``([\w.]+)``", head + text))
    ]
    twice = sorted({name for name, _ in named if [n for n, _ in named].count(name) > 1})
    assert not twice, f"named in two layers: {twice}"
    named = dict(named)
    top = {name.split(".")[0] for name in modules() if name}
    missing = sorted(top - set(named))
    assert not missing, f"name them in the docstring of src/minitransformer/__init__.py: {missing}"
    assert "viz.live" in named
    assert {name: named[name] for name in top} == {name: layer(name) for name in top}


def test_a_wrong_layer_import_is_reported():
    sources = {
        "model": ("from .course.translator import NUMBER_RECIPE", False),
        "course.translator": ("from ..model import Transformer", False),
        "viz.training": ("from ..course.translator import NUMBER_RECIPE", False),
        "i18n": ("", False),
        "course": ("", True),
    }
    assert layer_violations(sources) == ["model:1 (concepts) imports course.translator (course)"]
