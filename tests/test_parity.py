"""The Spanish and English notebooks stay in step: same cells, same code, same checks.

A failure names the notebook and the cell (counted from 0, as nbval does).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from notebook_tool import nbt

ROOT = Path(__file__).resolve().parents[1]
NB = ROOT / "notebooks"
ES = {p.name[:2]: p for p in sorted((NB / "es").glob("[0-9][0-9]_*.ipynb"))}
EN = {p.name[:2]: p for p in sorted((NB / "en").glob("[0-9][0-9]_*.ipynb"))}
NUMBERS = sorted(set(ES) | set(EN))
MARKERS = re.compile(r"#\s*(NBVAL_[A-Z_]+)")

SPANISH = set(
    "el la los las de del que y en un una es por con para como se su al lo más pero sus esta este cada también hay ya cuando son muy".split()
)
ENGLISH = set(
    "the of and to is in that it for with as on are this be by an each which its we you from can not also at".split()
)


def load(path: Path) -> list[dict]:
    return json.loads(path.read_text(encoding="utf-8"))["cells"]


def source(cell: dict) -> str:
    return "".join(cell["source"])


def language_score(text: str) -> tuple[int, int]:
    text = re.sub(r"\$[^$]*\$|`[^`]*`|\([^)]*\)|https?://\S+", " ", text)  # maths, code, links
    words = re.findall(r"[a-záéíóúñü]+", text.lower())
    return sum(w in SPANISH for w in words), sum(w in ENGLISH for w in words)


@pytest.mark.parametrize("number", NUMBERS)
def test_both_languages_exist(number):
    assert number in ES, f"notebook {number} has no Spanish version in notebooks/es"
    assert number in EN, f"notebook {number} has no English version in notebooks/en"


@pytest.mark.parametrize("number", sorted(set(ES) & set(EN)))
def test_pair_in_step(number):
    es, en = load(ES[number]), load(EN[number])
    name = f"{ES[number].name} / {EN[number].name}"
    kinds_es = [c["cell_type"] for c in es]
    kinds_en = [c["cell_type"] for c in en]
    assert len(es) == len(en), f"{name}: {len(es)} cells in Spanish, {len(en)} in English"
    for i, (a, b) in enumerate(zip(es, en)):
        where = f"{name}, cell {i}"
        assert a["cell_type"] == b["cell_type"], (
            f"{where}: a {a['cell_type']} cell in Spanish, a {b['cell_type']} cell in English"
        )
        if a["cell_type"] == "code":
            skeleton = nbt.code_skeleton(source(a))
            assert skeleton is not None, f"{where}: the code does not tokenize"
            assert skeleton == nbt.code_skeleton(source(b)), (
                f"{where}: the code differs (beyond comments and strings)\n--- es\n{source(a)}\n--- en\n{source(b)}"
            )
            assert MARKERS.findall(source(a)) == MARKERS.findall(source(b)), f"{where}: different nbval markers"
    assert kinds_es == kinds_en


@pytest.mark.parametrize(
    "lang,path",
    [("es", p) for p in ES.values()] + [("en", p) for p in EN.values()],
    ids=lambda x: getattr(x, "name", x),
)
def test_markdown_written_in_its_language(lang, path):
    for i, cell in enumerate(load(path)):
        if cell["cell_type"] != "markdown":
            continue
        text = source(cell)
        assert text.strip(), f"{path.name}, cell {i}: empty markdown cell"
        es, en = language_score(text)
        if es + en < 6:
            continue  # a heading or a formula: too short to tell
        if lang == "es":
            assert es > 2 * en, f"{path.name}, cell {i}: does not read as Spanish ({es} Spanish vs {en} English words)"
        else:
            assert en > 2 * es, f"{path.name}, cell {i}: does not read as English ({en} English vs {es} Spanish words)"


@pytest.mark.parametrize("path", list(ES.values()) + list(EN.values()), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_title_badge_and_setup(path):
    cells = load(path)
    rel = path.relative_to(ROOT).as_posix()
    first = source(cells[0])
    assert first.startswith(f"# {path.name[:2]} · "), f"{rel}: cell 0 must be the title"
    badge = re.search(r"\(https://colab\.research\.google\.com/github/([^/]+/[^/]+)/blob/([^/]+)/(\S+?)\)", first)
    assert badge, f"{rel}: cell 0 has no 'Open in Colab' badge"
    assert badge.group(3) == rel, f"{rel}: its Colab badge points at {badge.group(3)}"
    ref = nbt.git_ref(nbt.package_version())  # the release's tag, or main between releases
    assert badge.group(2) == ref, f"{rel}: its Colab badge opens {badge.group(2)}, not {ref}"
    setup = source(cells[1])
    assert 'if "google.colab" in sys.modules:' in setup and "pip" in setup, (
        f"{rel}: cell 1 must be the Colab setup cell"
    )
    install = re.search(r'"pip", "install"[^\]]*\]', setup).group(0)
    assert not re.search(r'"torch\b', install), f"{rel}: the setup cell must not reinstall torch"
    package = f'"minitransformer @ git+https://github.com/{badge.group(1)}@{ref}"'
    assert package in setup, f"{rel}: the setup cell must install {package}"
    assert f'LANG = "{path.parent.name}"' in setup


@pytest.mark.parametrize("path", list(ES.values()) + list(EN.values()), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_stored_outputs_and_size(path):
    cells = load(path)
    for i, cell in enumerate(cells):
        if cell["cell_type"] == "code" and source(cell).strip():
            assert cell.get("execution_count") is not None, (
                f"{path.name}, cell {i}: not executed (run tools/notebooks.py run)"
            )
            for out in cell.get("outputs", []):
                assert out.get("output_type") != "error", f"{path.name}, cell {i}: stored output is an error"
    assert path.stat().st_size <= 2_000_000, f"{path.name} is {path.stat().st_size / 1e6:.1f} MB (limit 2 MB)"


def test_notebooks_built_from_source():
    result = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "notebooks.py"), "check"], capture_output=True, text=True
    )
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("path", list(ES.values()) + list(EN.values()), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_figures_are_shown(path):
    """A cell whose last line draws a figure (`fig = ...`) stores an image."""
    for i, cell in enumerate(load(path)):
        lines = [l for l in source(cell).splitlines() if l.strip() and not l.lstrip().startswith("#")]
        if cell["cell_type"] != "code" or not lines or not re.match(r"fig\w* = ", lines[-1]):
            continue
        images = [o for o in cell.get("outputs", []) if "image/png" in o.get("data", {})]
        assert images, f"{path.name}, cell {i}: draws a figure but stores no image"
