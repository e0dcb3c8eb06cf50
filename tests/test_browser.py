"""bertviz's views with the libraries from installed packages, opened in a real (headless) Chromium.

Every network request of the browser is refused, so these tests show that the views draw offline
with what pip installed (``bertviz.offline_scripts``: d3 from mpld3, jQuery and require.js from
nbclassic), and that bertviz's own page, which loads them from a CDN, stays blank offline.
"""

from __future__ import annotations

import html
import re
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import pytest
import torch

from minitransformer.model import Transformer, TransformerConfig
from minitransformer.viz import bertviz, heads

CHROMIUM = next((p for p in map(shutil.which, ("chromium", "chromium-browser", "google-chrome")) if p), None)

pytestmark = pytest.mark.skipif(
    CHROMIUM is None, reason="Chromium is not installed (apt-get install chromium); .ci/run installs it"
)

SRC = ["cuarenta", "y", "dos", "mil"]
TGT = ["<bos>", "forty-two", "thousand"]
L, H = 2, 4


def browser(url: str, *args: str, rules: str = "MAP * ~NOTFOUND") -> subprocess.CompletedProcess:
    """Run headless Chromium on ``url`` with no network at all (``rules`` may let this machine through)."""
    with tempfile.TemporaryDirectory() as profile:
        return subprocess.run(
            [
                CHROMIUM,
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-background-networking",
                "--no-first-run",
                "--disable-component-update",
                "--disable-sync",
                "--disable-extensions",
                f"--user-data-dir={profile}",
                f"--host-resolver-rules={rules}",
                "--virtual-time-budget=10000",
                *args,
                url,
            ],
            capture_output=True,
            text=True,
            timeout=120,
        )


def dom(page: Path) -> str:
    result = browser(page.as_uri(), "--dump-dom")
    assert result.returncode == 0, result.stderr[-2000:]
    return result.stdout


def texts(document: str) -> list[str]:
    return [html.unescape(t) for t in re.findall(r"<text[^>]*>([^<]*)</text>", document)]


@pytest.fixture(scope="module")
def maps():
    torch.manual_seed(0)
    config = TransformerConfig(
        src_vocab_size=12, tgt_vocab_size=12, d_model=16, n_heads=H, d_ff=32, n_layers=L, dropout=0.0
    )
    model = Transformer(config)
    src = torch.tensor([[4, 5, 6, 7, 0]])  # one padding token at the end
    tgt = torch.tensor([[1, 8, 9]])
    return heads.translator_attention(model, src, tgt)


def test_the_libraries_come_from_pip_packages():
    files = bertviz.script_files()
    assert files is not None, "mpld3 and nbclassic (the course's 'lab' extra) are not installed"
    assert all("site-packages" in str(p) or "dist-packages" in str(p) for p in files.values()), files


def test_head_view_draws_offline(maps, tmp_path):
    view = bertviz.head_view(maps, src_tokens=SRC, tgt_tokens=TGT, html_action="return")
    page = bertviz.write_offline_page(view, tmp_path / "head.html")
    document = dom(page)
    assert document.count("<svg") == 1, "the head view drew no SVG: the page is blank"
    # The first view is the encoder's self-attention: its tokens on both sides ...
    assert texts(document) == SRC + SRC
    # ... and one line per head and (query, key) pair, the padding left out.
    assert document.count("<line") == H * len(SRC) * len(SRC)
    # The three views of the encoder-decoder can be chosen in the page.
    options = re.findall(r"<option[^>]*>([^<]*)</option>", document)
    assert {"Encoder", "Decoder", "Cross"} <= set(options)
    shot = tmp_path / "head.png"
    result = browser(page.as_uri(), f"--screenshot={shot}", "--window-size=900,400")
    assert result.returncode == 0 and shot.exists()
    import matplotlib.image

    pixels = matplotlib.image.imread(shot)
    assert pixels[..., :3].std() > 0.02, "the screenshot is blank"


def test_model_view_draws_offline(maps, tmp_path):
    view = bertviz.model_view(maps, src_tokens=SRC, tgt_tokens=TGT, html_action="return")
    document = dom(bertviz.write_offline_page(view, tmp_path / "model.html"))
    assert document.count("<svg") == 1
    # one thumbnail per layer and head, each with a line per (query, key) pair
    assert document.count("<line") == L * H * len(SRC) * len(SRC)
    labels = texts(document)  # the words appear on hover; the grid is labelled
    assert labels[: H + 1] == ["Heads"] + [str(h) for h in range(H)]
    assert labels[H + 1 :] == ["Layers"] + [str(layer) for layer in range(L)]


def test_views_draw_where_the_page_already_has_require_js(maps, tmp_path):
    """As in a slide deck (nbconvert loads jQuery and require.js first) and in a notebook where
    the libraries cell ran twice: every view still draws."""
    files = bertviz.script_files()
    scripts = f"<script>{bertviz.offline_scripts().data}</script>"
    views = [
        bertviz.head_view(maps, src_tokens=SRC, tgt_tokens=TGT, html_action="return").data,
        bertviz.model_view(maps, src_tokens=SRC, tgt_tokens=TGT, html_action="return").data,
    ]
    page = tmp_path / "deck-like.html"
    page.write_text(
        f'<!DOCTYPE html><html><head><script src="{files["jquery"].as_uri()}"></script>'
        f'<script src="{files["requirejs"].as_uri()}"></script></head><body>'
        f"{scripts}{views[0]}{scripts}{views[1]}</body></html>",
        encoding="utf-8",
    )
    document = dom(page)
    assert document.count("<svg") == 2
    assert document.count("<line") == H * len(SRC) ** 2 + L * H * len(SRC) ** 2


def test_self_attention_view_draws_offline(tmp_path):
    torch.manual_seed(1)
    weights = [torch.softmax(torch.randn(1, 3, 5, 5), -1) for _ in range(2)]
    tokens = ["[CLS]", "the", "animal", "it", "[SEP]"]
    view = bertviz.head_view(weights, tokens, html_action="return")
    document = dom(bertviz.write_offline_page(view, tmp_path / "self.html"))
    assert texts(document) == tokens + tokens
    assert document.count("<line") == 3 * 5 * 5


def test_bertviz_page_from_the_cdn_stays_blank_offline(maps, tmp_path):
    """Why the libraries are needed: without them, bertviz's own page draws nothing offline."""
    view = bertviz.head_view(maps, src_tokens=SRC, tgt_tokens=TGT, html_action="return")
    page = tmp_path / "cdn.html"
    page.write_text(f"<!DOCTYPE html><html><body>{view.data}</body></html>", encoding="utf-8")
    document = dom(page)
    assert "<svg" not in document and texts(document) == []


# --------------------------------------------------------------------------- JupyterLab

ROOT = Path(__file__).resolve().parents[1]


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def jupyterlab_dom(tmp: Path, notebook: Path, app_settings: Path, pages=("lab/tree",)) -> list[str]:
    """Serve ``notebook`` (trusted) with JupyterLab; the pages Chromium shows at ``<page>/<notebook>``, offline."""
    import os
    import sys
    import time
    import urllib.request

    root = tmp / "root"
    root.mkdir(parents=True)
    shutil.copyfile(notebook, root / notebook.name)
    env = dict(os.environ)
    for var, sub in [
        ("JUPYTER_CONFIG_DIR", "config"),
        ("JUPYTER_DATA_DIR", "data"),
        ("JUPYTER_RUNTIME_DIR", "run"),
        ("JUPYTERLAB_SETTINGS_DIR", "user-settings"),
        ("JUPYTERLAB_WORKSPACES_DIR", "workspaces"),
    ]:
        env[var] = str(tmp / sub)
    # Trusted, as a notebook is once its cells have run: JupyterLab runs the stored scripts.
    subprocess.run(
        [sys.executable, "-m", "nbformat.sign", str(root / notebook.name)], env=env, check=True, capture_output=True
    )  # `jupyter trust` by its module: `python -m jupyter trust` would run the first `jupyter-trust` on PATH
    port = free_port()
    log = (tmp / "server.log").open("w")
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "jupyterlab",
            "--no-browser",
            f"--port={port}",
            "--ServerApp.ip=127.0.0.1",
            "--ServerApp.token=",
            "--ServerApp.password=",
            f"--ServerApp.root_dir={root}",
            f"--LabApp.app_settings_dir={app_settings}",
            *(["--allow-root"] if os.geteuid() == 0 else []),
        ],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=log,
    )
    try:
        for _ in range(120):
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/api/status", timeout=2)
                break
            except OSError:
                time.sleep(0.5)
        doms = []
        for page in pages:
            result = browser(
                f"http://127.0.0.1:{port}/{page}/{notebook.name}",
                "--dump-dom",
                "--window-size=1280,720",
                "--virtual-time-budget=30000",
                rules="MAP * ~NOTFOUND, EXCLUDE 127.0.0.1",
            )  # only the JupyterLab server
            assert result.returncode == 0 and result.stdout, (
                result.stderr[-2000:],
                (tmp / "server.log").read_text()[-3000:],
            )
            doms.append(result.stdout)
        return doms
    finally:
        server.terminate()
        server.wait(timeout=30)
        log.close()


def bertviz_views(document: str) -> tuple[int, int]:
    """How many bertviz views the page has, and how many of them drew."""
    starts = [m.start() for m in re.finditer(r'<div id="bertviz-', document)] + [len(document)]
    drawn = sum(
        "<svg" in document[a:b] and ("<line" in document[a:b] or "<rect" in document[a:b])
        for a, b in zip(starts, starts[1:])
    )
    return len(starts) - 1, drawn


def test_jupyterlab_for_a_projector_draws_bertviz_offline(tmp_path):
    """`python course.py lab`'s settings: no news question on screen; notebook 08's bertviz views draw
    in JupyterLab with no network, from the libraries of its offline_scripts() cell; RISE shows the
    notebook as live slides, formulas typeset, offline."""
    import sys

    sys.path.insert(0, str(ROOT))
    import course

    settings, _server = course.write_lab_settings(tmp_path / "prefix")
    notebook = next((ROOT / "notebooks" / "en").glob("08_*.ipynb"))
    document, rise = jupyterlab_dom(tmp_path / "course", notebook, settings.parents[1], ("lab/tree", "rise"))
    assert "jp-Notebook" in document and "jp-MarkdownCell" in document, "JupyterLab did not open the notebook"
    assert "official Jupyter news" not in document
    assert "Javascript Error" not in document
    views, drawn = bertviz_views(document)
    assert views >= 6 and drawn == views, (views, drawn)
    # RISE (jupyterlab-rise): a reveal.js slide per slide cell, MathJax from JupyterLab, no network
    import nbformat

    cells = nbformat.read(notebook, as_version=4).cells
    kinds = [c.metadata.get("slideshow", {}).get("slide_type") for c in cells]
    assert 'class="reveal' in rise and "mjx-container" in rise
    assert rise.count("<section") == 2 * kinds.count("slide") + kinds.count("subslide")
    # Without the course's settings JupyterLab asks about the news (so the check above can fail).
    (plain,) = jupyterlab_dom(tmp_path / "plain", notebook, tmp_path / "no-settings")
    assert "official Jupyter news" in plain


# --------------------------------------------------------------------------- live controls


@pytest.mark.slow
def test_a_live_control_redraws_in_jupyterlab_and_in_rise(tmp_path):
    """Issue 48: notebook 03's live control in JupyterLab as `python course.py lab` starts it, offline. Its cell is
    run, a slider is dragged, and the figure changes; then the same in RISE's live slides (the notebook's kernel,
    the cell run with Ctrl+Enter on its slide). Without a kernel the cell's stored output is the still figure
    (tests/test_viz_live.py)."""
    import lab_driver as lab

    marker, relative = "encoding_control(", "en/03_positional_encoding.ipynb"
    with lab.course_lab(tmp_path, [ROOT / "notebooks" / relative]) as (base, token):
        page = lab.DevTools(tmp_path / "chromium.log")
        try:
            lab.open_notebook(page, base, token, relative)
            lab.run_cell(page, "setup(seed=")  # LANG; the live cell imports what it needs
            index = lab.run_cell(page, marker)
            before = lab.wait_for_live(page, index)
            assert before["sliders"] == 2 and before["readouts"] == ["50", "4  (ω = 0.562)"]
            lab.move_live_slider(page, index, 1, 0.0)  # the frequency: down to pair 0
            after = lab.wait_for_change(page, index, before)
            assert after["readouts"] == ["50", "0  (ω = 1)"] and after["image"] != before["image"]
            shot = page.screenshot(tmp_path / "lab.png")
            import matplotlib.image

            assert matplotlib.image.imread(shot)[..., :3].std() > 0.05, "the screenshot is blank"

            lab.open_rise(page, base, token, relative, index, marker)
            before = lab.run_live_in_rise(page, marker)
            output = lab.rise_output(marker)
            assert before["sliders"] == 2 and before["readouts"] == ["50", "4  (ω = 0.562)"]  # the cell ran again
            lab.move_live_slider(page, output, 0, 0.1)  # the position: towards 0
            after = lab.wait_for_change(page, output, before)
            assert after["image"] != before["image"] and after["readouts"][0] != "50", after["readouts"]
            errors = [line for line in page.console if "comm" in line.lower() or "widget" in line.lower()]
            assert not [line for line in errors if line.startswith(("error", "exception"))], errors
        finally:
            page.close()


def sampling_slide(notebook: Path, folder: Path) -> Path:
    """Notebook 09 with only what its live sampling slide needs: its title, setup and imports, a counting GPT trained
    for a few steps in place of section 3's 800 (the control is the same; its bars and lines are a weaker model's),
    and the slide itself (heading, text, the live cell) as the notebook has it."""
    import nbformat

    nb = nbformat.read(notebook, as_version=4)
    live = next(i for i, c in enumerate(nb.cells) if "next_token_control(gpt" in c.source)
    heading = max(i for i in range(live) if nb.cells[i].metadata.get("slideshow", {}).get("slide_type"))
    imports = next(i for i, c in enumerate(nb.cells) if "train_counting_gpt" in c.source and "import" in c.source)
    train = nbformat.v4.new_code_cell(
        "import dataclasses\n\ngpt, corpus, losses = train_counting_gpt("
        "recipe=dataclasses.replace(COUNTING_RECIPE, steps=5), progress=False)"
    )
    nb.cells = [*nb.cells[: imports + 1], train, *nb.cells[heading : live + 2]]
    path = folder / notebook.parent.name / notebook.name
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, path)
    return path


@pytest.mark.slow
def test_the_sampling_slide_is_all_reachable_in_rise_at_1280_by_720(tmp_path):
    """Issue 53: in RISE at 1280 × 720 notebook 09's live sampling control is taller than the slide. With the course's
    settings the slide scrolls: the mouse wheel brings the "sample" button into the window, a click on it writes four
    seeded lines under it, and the wheel brings those too. JupyterLab's "Click to add a cell." button, which RISE
    left floating over every slide, is hidden there. In both languages."""
    import lab_driver as lab

    marker = "next_token_control(gpt"
    sources = {lang: next((ROOT / "notebooks" / lang).glob("09_*.ipynb")) for lang in ("es", "en")}
    copies = [sampling_slide(path, tmp_path / "built") for path in sources.values()]
    with lab.course_lab(tmp_path, copies) as (base, token):
        page = lab.DevTools(tmp_path / "chromium.log", 1280, 720)
        try:
            for (lang, label, head), copy in zip(
                (("es", "muestrear", "semilla 0:"), ("en", "sample", "seed 0:")), copies
            ):
                relative = f"{lang}/{copy.name}"
                lab.open_notebook(page, base, token, relative, f"lab/workspaces/{lang}/tree")  # one notebook open
                for cell in ("setup(seed=", "import math", "steps=5"):
                    lab.run_cell(page, cell)
                index = lab.run_cell(page, marker)
                lab.wait_for_live(page, index)
                lab.open_rise(page, base, token, relative, index, marker)
                lab.run_live_in_rise(page, marker)
                output = lab.rise_output(marker)
                footer = page.evaluate(
                    "[...document.querySelectorAll('.reveal .jp-Notebook-footer')].map(f => ["
                    " getComputedStyle(f).display, f.getBoundingClientRect().height])"
                )
                assert footer and all(shown == ["none", 0] for shown in footer), footer
                assert page.evaluate(f"{output}.getBoundingClientRect().bottom") > 720  # taller than the window
                lab.click_at(page, lab.scroll_to_reach(page, lab.live_button(output, label)))
                text = ""
                for _ in range(120):
                    text = lab.live_text(page, output)
                    if text:
                        break
                    time.sleep(0.5)
                lines = text.splitlines()
                assert lines[0] == head and len(lines) == 5 and all(line[:2] in ("✓ ", "✗ ") for line in lines[1:])
                lab.scroll_to_reach(page, f"{output}.querySelector('.widget-html pre')")
                page.screenshot(tmp_path / f"rise_{lang}.png")
        finally:
            page.close()
