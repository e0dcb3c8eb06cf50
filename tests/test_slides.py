"""The slide decks (tools/slides.py), built as the README says and opened offline in headless Chromium.

Every deck of every notebook, in both languages, is built into a temporary folder; a copy of each
is opened with every network request refused and a script (``deck_check.js``) visits every slide:
reveal.js must have initialised, the deck must have one slide per slide cell of the notebook, and no
text or picture may fall off the 1280 × 720 screen or be cut. The bertviz views of notebook 08 must
draw. Without Chromium only the checks that need no browser run.
"""

from __future__ import annotations

import html
import importlib.util
import json
import re
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
import slides  # noqa: E402
from notebook_tool import nbt  # noqa: E402

CHROMIUM = next((p for p in map(shutil.which, ("chromium", "chromium-browser", "google-chrome")) if p), None)
NOTEBOOKS = {lang: sorted((ROOT / "notebooks" / lang).glob("[0-9][0-9]_*.ipynb")) for lang in slides.LANGS}
DECKS = [(lang, nb) for lang in slides.LANGS for nb in NOTEBOOKS[lang]]
MIN_SCALE = 0.35  # a slide may be shrunk to fit the screen, but not below this


def chromium(url: str, *args: str, budget_ms: int = 20000) -> str:
    with tempfile.TemporaryDirectory() as profile:
        result = subprocess.run(
            [
                CHROMIUM,
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--disable-extensions",
                f"--user-data-dir={profile}",
                "--host-resolver-rules=MAP * ~NOTFOUND",
                "--hide-scrollbars",
                "--window-size=1280,720",
                f"--virtual-time-budget={budget_ms}",
                *args,
                url,
            ],
            capture_output=True,
            text=True,
            timeout=180,
        )
    assert result.returncode == 0, result.stderr[-2000:]
    return result.stdout


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """Every deck, built by the command the README gives (python tools/slides.py --out DIR)."""
    out = tmp_path_factory.mktemp("slides")
    result = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "slides.py"), "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return out


def deck_of(out: Path, lang: str, nb: Path) -> Path:
    return out / lang / f"{nb.stem}.html"


@pytest.mark.parametrize("lang,nb", DECKS, ids=lambda x: getattr(x, "name", x))
def test_deck_is_local_and_has_every_slide(built, lang, nb):
    deck = deck_of(built, lang, nb)
    text = deck.read_text(encoding="utf-8")
    # Every script and style sheet the deck itself loads is a file beside it (no CDN). (Outputs of
    # the notebook in between may name a CDN: bertviz's own require.js tag, unused offline.)
    frame = text[: text.index("<body")] + text[text.rindex("</main>") :]
    for url in re.findall(r'<(?:script|link)[^>]*(?:src|href)="([^"]+)"', frame):
        assert "://" not in url and not url.startswith("//"), f"{deck.name} loads {url}"
        assert (deck.parent / url.split("?")[0]).is_file(), f"{deck.name}: {url} is missing"
    assert "reveal/dist/reveal.js" in text and "mathjax/MathJax.js" in text
    # The title's link to the other language leads to that language's deck.
    links = re.findall(r'href="(\.\./(?:es|en)/[^"]+)"', text)
    assert links and all(link.endswith(".html") and (deck.parent / link).is_file() for link in links), links
    # reveal.js's structure: a slide cell opens a column (<section>) and its first slide (<section>);
    # each subslide cell one more slide in that column.
    kinds = [c.metadata.get("slideshow", {}).get("slide_type") for c in nbformat.read(nb, as_version=4).cells]
    assert kinds[0] == "slide" and slides.slide_count(nbformat.read(nb, as_version=4)) > kinds.count("slide")
    assert text.count("<section") == 2 * kinds.count("slide") + kinds.count("subslide")


def test_assets_come_from_installed_packages(built):
    static = built / "_static"
    for name, (package, inner) in slides.ASSETS.items():
        source = slides.package_dir(package) / inner
        target = static / name
        probe = "dist/reveal.js" if name == "reveal" else ("MathJax.js" if name == "mathjax" else "")
        assert (target / probe).read_bytes() == (source / probe).read_bytes()
    index = (built / "index.html").read_text(encoding="utf-8")
    for lang, nb in DECKS:
        assert f'href="{lang}/{nb.stem}.html"' in index


def test_slide_metadata_follows_the_headings():
    """A heading starts a slide, every other Markdown cell a subslide (what RISE shows live too)."""
    for _lang, nb in DECKS:
        for cell in nbformat.read(nb, as_version=4).cells:
            if cell.cell_type != "markdown":
                continue
            kind = cell.metadata.get("slideshow", {}).get("slide_type")
            heading = cell.source.lstrip().startswith(("# ", "## "))
            assert kind == ("slide" if heading else "subslide"), f"{nb.name}: {cell.source[:40]!r} is {kind}"


@pytest.fixture(scope="module")
def reports(built):
    """Each deck opened offline in Chromium with deck_check.js: its JSON report."""
    if CHROMIUM is None:
        pytest.skip("Chromium is not installed (apt-get install chromium); .ci/run installs it")

    def run(item):
        lang, nb = item
        return item, check_deck(deck_of(built, lang, nb))

    with ThreadPoolExecutor(max_workers=2) as pool:
        return dict(pool.map(run, DECKS))


def check_deck(deck: Path) -> dict:
    """The report of deck_check.js on ``deck``, opened offline from a copy beside it."""
    check = Path(__file__).with_name("deck_check.js").read_text(encoding="utf-8")
    probe = deck.with_name(f".check-{deck.name}")  # beside the deck: the same relative paths
    probe.write_text(
        deck.read_text(encoding="utf-8").replace("</html>", f"<script>{check}</script>\n</html>"), encoding="utf-8"
    )
    dom = chromium(probe.as_uri(), "--dump-dom")
    found = re.findall(r'<pre id="deck-report">(.*?)</pre>', dom, re.S)
    return json.loads(html.unescape(found[-1])) if found else {"ready": False, "dom": dom[-500:]}


def test_the_check_finds_text_cut_by_a_box(built):
    """deck_check.js reports text that a box around it cuts, naming the box, however deep the text sits under it."""
    if CHROMIUM is None:
        pytest.skip("Chromium is not installed")
    deck = deck_of(built, "en", NOTEBOOKS["en"][0])
    text = deck.read_text(encoding="utf-8")
    first = text.index(">", text.index("<section", text.index("<section") + 1)) + 1  # inside the first slide
    boxes = (
        '<div class="probe-outer" style="overflow:hidden;width:90px;height:40px"><div style="overflow:visible">'
        '<p><span style="white-space:nowrap">far too long for the outer box</span></p></div></div>'
        '<div style="width:600px"><div class="probe-inner" style="overflow:hidden;width:70px">'
        '<span><b style="white-space:nowrap">also far too long for the inner one</b></span></div></div>'
        '<p style="white-space:nowrap">fits where it is</p>'
    )
    broken = deck.with_name("cut.html")
    broken.write_text(text[:first] + boxes + text[first:], encoding="utf-8")
    report = check_deck(broken)
    assert report["ready"], report
    found = {p["what"]: p["cut_by"] for p in report["slides"][0]["problems"]}
    assert found == {
        "far too long for the outer box": "DIV.probe-outer",
        "also far too long for the inner one": "DIV.probe-inner",
    }, report["slides"][0]
    assert all(not s["problems"] for s in report["slides"][1:])


@pytest.mark.parametrize("lang,nb", DECKS, ids=lambda x: getattr(x, "name", x))
def test_deck_works_offline_and_every_slide_fits(reports, lang, nb):
    report = reports[(lang, nb)]
    assert report["ready"], f"{nb.name}: reveal.js did not start offline: {report}"
    assert report["size"] == [slides.WIDTH, slides.HEIGHT]
    n = slides.slide_count(nbformat.read(nb, as_version=4))
    assert report["total"] == n == len(report["slides"]), f"{nb.name}: {report['total']} slides for {n} slide cells"
    for s in report["slides"]:
        where = f"{lang}/{nb.name} slide {s['h']}/{s['v']} ({s['title']!r})"
        assert not s["problems"], f"{where} overflows: {s['problems']}"
        assert MIN_SCALE <= s["fit"] <= 1, f"{where} is shrunk to {s['fit']}"


@pytest.mark.parametrize("lang", slides.LANGS)
def test_bertviz_views_draw_in_the_deck(reports, lang):
    nb = next(p for p in NOTEBOOKS[lang] if p.name.startswith("08_"))
    views = reports[(lang, nb)]["bertviz"]
    assert views["views"] >= 5 and views["drawn"] == views["views"], views


def test_formulas_are_typeset_offline(built):
    """MathJax (from the installed package) turns the formulas of notebook 01 into rendered maths."""
    if CHROMIUM is None:
        pytest.skip("Chromium is not installed")
    nb = next(p for p in NOTEBOOKS["en"] if p.name.startswith("01_"))
    dom = chromium(deck_of(built, "en", nb).as_uri() + "#/2", "--dump-dom")
    assert dom.count('class="MathJax"') + dom.count('class="MathJax_Display"') >= 10
    assert "math processing error" not in dom.lower()


def test_lab_settings_for_a_projector(tmp_path):
    """`python course.py lab` writes JupyterLab settings that silence the news question and the update
    check, as an overrides.d file of the environment (JupyterLab's own mechanism); rewriting is stable."""
    sys.path.insert(0, str(ROOT))
    import course

    path, server = course.write_lab_settings(tmp_path)
    assert (
        path.relative_to(tmp_path).as_posix() == "share/jupyter/lab/settings/overrides.d/transformers-desde-cero.json"
    )
    settings = json.loads(path.read_text(encoding="utf-8"))
    notification = settings["@jupyterlab/apputils-extension:notification"]
    assert notification == {"fetchNews": "false", "checkForUpdates": False}
    # the values are valid for the installed JupyterLab's schema
    schema_dir = Path(sys.prefix) / "share" / "jupyter" / "lab" / "schemas" / "@jupyterlab" / "apputils-extension"
    schema = json.loads((schema_dir / "notification.json").read_text(encoding="utf-8"))
    fetch = schema["properties"]["fetchNews"]  # JupyterLab 4.1 lists the values in "enum", later ones in "oneOf"
    assert notification["fetchNews"] in fetch.get("enum", [o["const"] for o in fetch.get("oneOf", [])])
    assert schema["properties"]["checkForUpdates"]["type"] == "boolean"
    # the server's file turns nbclassic's extension off, and is read after nbclassic's own (name order)
    assert json.loads(server.read_text(encoding="utf-8")) == {
        "ServerApp": {"jpserver_extensions": {"nbclassic": False}}
    }
    installed = sorted(
        p.name for p in (Path(sys.prefix) / "etc" / "jupyter" / "jupyter_server_config.d").glob("*.json")
    )
    assert "nbclassic.json" not in installed or sorted([*installed, server.name])[-1] == server.name
    before = path.stat().st_mtime_ns, server.stat().st_mtime_ns
    assert course.write_lab_settings(tmp_path) == [path, server]
    assert (path.stat().st_mtime_ns, server.stat().st_mtime_ns) == before


# --------------------------------------------------------------------------- the lecture path


NOTEBOOKS_WITH_OPTIONS = [nb for nb in NOTEBOOKS["en"] if slides.optional_cells(nbformat.read(nb, as_version=4))]


def test_optional_sections_are_the_same_in_both_languages_and_close_their_section():
    """A section marked (opcional)/(optional) is the same cells in both languages, and the cell after it starts a new
    section (a slide): → in a deck goes past the optional subsections, which close their section's column. In such
    a notebook every section heading starts its cell, so that each section is a column of its own."""
    assert any(nb.name.startswith("11_") for nb in NOTEBOOKS_WITH_OPTIONS)
    for es, en in zip(NOTEBOOKS["es"], NOTEBOOKS["en"]):
        notebooks = {lang: nbformat.read(path, as_version=4) for lang, path in (("es", es), ("en", en))}
        optional = {lang: slides.optional_cells(nb) for lang, nb in notebooks.items()}
        assert optional["es"] == optional["en"], en.name
        cells = notebooks["en"].cells
        if optional["en"]:
            for cell in cells:
                if cell.cell_type == "markdown":
                    inside = re.findall(r"^## ", cell.source.strip(), re.M)[int(cell.source.startswith("## ")) :]
                    assert not inside, f"{en.name}: a section starts in the middle of {cell.source[:40]!r}"
        for i in optional["en"]:
            if i + 1 < len(cells) and i + 1 not in optional["en"]:
                kind = cells[i + 1].metadata.get("slideshow", {}).get("slide_type")
                assert kind == "slide", f"{en.name}: cell {i + 1} follows an optional section inside its section"
            if cells[i].cell_type == "markdown" and slides.OPTIONAL.match(cells[i].source.strip()):
                marked = {lang: nb.cells[i].source.strip().split()[1].lower() for lang, nb in notebooks.items()}
                assert marked == {"es": "(opcional)", "en": "(optional)"}, marked


def test_optional_cells_follow_the_headings():
    nb = nbformat.v4.new_notebook()
    md, code = nbformat.v4.new_markdown_cell, nbformat.v4.new_code_cell
    nb.cells = [
        md("## 1. A"),
        code("a = 1"),
        md("### (Optional) B"),
        code("b = 2"),
        md("text"),
        md("### C"),
        code("c = 3"),
        md("### (Opcional) D"),
        md("#### inside"),
        code("d = 4"),
        md("## 2. E"),
    ]
    assert slides.optional_cells(nb) == [2, 3, 4, 7, 8, 9]
    nb.cells = [md("### (Optional) B"), md("the end of B\n\n### C")]
    with pytest.raises(ValueError, match="middle of a cell"):
        slides.optional_cells(nb)


def test_the_lecture_deck_leaves_the_optional_sections_out(tmp_path):
    """`--lecture` writes NN_name.lecture.html beside the whole deck, without the optional sections' slides, and the
    index links it."""
    result = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "slides.py"), "11", "--lecture", "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    for lang in slides.LANGS:
        path = next(p for p in NOTEBOOKS[lang] if p.name.startswith("11_"))
        nb = nbformat.read(path, as_version=4)
        whole, lecture = deck_of(tmp_path, lang, path), tmp_path / lang / f"{path.stem}.lecture.html"
        left_out = set(slides.optional_cells(nb))
        kinds = [c.metadata.get("slideshow", {}).get("slide_type") for c in nb.cells]
        kept = [k for i, k in enumerate(kinds) if i not in left_out]
        text = lecture.read_text(encoding="utf-8")
        assert text.count("<section") == 2 * kept.count("slide") + kept.count("subslide")
        assert whole.read_text(encoding="utf-8").count("<section") > text.count("<section")
        assert ("(Opcional)" if lang == "es" else "(Optional)") not in text
        assert f'href="{lang}/{lecture.name}"' in (tmp_path / "index.html").read_text(encoding="utf-8")


@pytest.mark.slow
@pytest.mark.parametrize("nb", NOTEBOOKS_WITH_OPTIONS, ids=lambda p: p.name)
def test_a_notebook_runs_without_its_optional_sections(nb, tmp_path):
    """What the goals of such a notebook promise: no other cell depends on an optional section, so a lecture can skip
    them when it runs the notebook (executed without the cells the lecture's deck leaves out). Nothing is compared
    with the stored outputs, only whether every cell runs, its assertions included, which hold under any numerics:
    so the kernel runs under the first foreign profile (one thread, seed 1, MKL's own path, idle threads sleeping),
    as CI's second leg does. That is the lecture path proven on other numerics too, and it costs about half: MKL's
    pinned COMPATIBLE path makes notebook 12's training about twice as slow, and one thread does not fight the other
    worker's (with a student's threads, 13 took 308 s in a fresh-clone CI, spinning against the other worker)."""
    spec = importlib.util.spec_from_file_location("benchmark_notebooks", ROOT / "benchmarks" / "notebooks.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    notebook = nbformat.read(nb, as_version=4)
    left_out = set(slides.optional_cells(notebook))
    notebook.cells = [cell for i, cell in enumerate(notebook.cells) if i not in left_out]
    lecture = tmp_path / nb.name
    nbformat.write(notebook, lecture)
    # raises nbclient's CellExecutionError if a cell needs a skipped one
    bench.execute(lecture, timeout=600, profile=True, env=nbt.FOREIGN_PROFILES[0])


GUIDES = {"es": ("guia_docente.md", "Camino de clase"), "en": ("teachers_guide.md", "Lecture path")}


@pytest.mark.parametrize("lang", slides.LANGS)
@pytest.mark.parametrize("nb", NOTEBOOKS_WITH_OPTIONS, ids=lambda p: p.name)
def test_the_guides_lecture_path_fits_its_slot(nb, lang):
    """A notebook with optional sections has a lecture path in the teacher's guide whose minutes add up to its slot,
    and the guide says what the lecture leaves for home: the sections marked optional."""
    name, label = GUIDES[lang]
    guide = (ROOT / "docs" / name).read_text(encoding="utf-8")
    number = nb.name[:2]
    section = re.search(rf"^### {number} · .*?\((\d+) min\)\n(.*?)(?=^### |\Z)", guide, re.S | re.M)
    assert section, f"{name} has no section for notebook {number}"
    slot, text = int(section.group(1)), section.group(2)
    path = re.search(rf"\*\*{label} \((\d+) min\):\*\*(.*?)(?=\n- \*\*)", text, re.S)
    assert path, f"{name}, notebook {number}: no lecture path"
    minutes = [int(m) for m in re.findall(r"\((\d+) min\)", path.group(2))]
    assert int(path.group(1)) == slot and sum(minutes) == slot, (minutes, slot)
    assert ("(opcional)" if lang == "es" else "(optional)") in text.lower()  # what the lecture leaves for home
