"""The package's imports run one way: down the order written in src/minitransformer/README.md."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "minitransformer"
MAP = PACKAGE / "README.md"


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
