"""Slide decks of the notebooks that work offline: reveal.js and MathJax from installed packages.

    python tools/slides.py                 # every notebook, both languages, into slides/
    python tools/slides.py 01 08 --lang es # some notebooks, one language
    python tools/slides.py --out /tmp/deck # another folder
    python tools/slides.py 11 --lecture    # also the lecture's deck: without the optional sections

Each deck is the notebook's stored outputs as a reveal.js presentation (nbconvert's slides
exporter), one slide per cell whose ``slideshow.slide_type`` is ``slide`` or ``subslide``. The
JavaScript that nbconvert would take from a CDN comes from Python packages installed with the
course's ``lab`` extra and is copied once into ``<out>/_static``:

    reveal.js   sphinx-revealjs          MathJax 2   jupyter-server-mathjax
    require.js  nbclassic                jQuery      nbclassic

so the folder ``<out>`` opens from ``file://`` with no network and can be copied as it is (a USB
stick). ``<out>/index.html`` lists the decks. A slide whose content is taller or wider than the
1280 × 720 screen is scaled down to fit it (``fit`` in the deck's script).

A section whose heading starts with "(opcional)" / "(optional)" is left for home: its title says so in the
notebook and in its deck, and it runs to the next heading of its level or above (:func:`optional_cells`). A
notebook puts its optional subsections last in their section, so that → in a deck goes past them to the next
section; ``--lecture`` also writes ``<name>.lecture.html``, the deck without them.
"""

from __future__ import annotations

import argparse
import html
import importlib.util
import re
import shutil
import sys
from pathlib import Path

import jinja2
import nbformat

from minitransformer.viz.bertviz import SCRIPTS

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"
LANGS = ("es", "en")
WIDTH, HEIGHT = 1280, 720  # the screen a deck is laid out for (a projector's 720p)
SLIDE_TYPES = ("slide", "subslide")
OTHER_LANGUAGE = re.compile(r"\((\.\./(?:es|en)/[0-9][0-9]_[^)]+)\.ipynb\)")
HEADING = re.compile(r"^(#{1,6}) ", re.MULTILINE)
OPTIONAL = re.compile(r"^#{1,6} \((?:opcional|optional)\)", re.IGNORECASE)
LECTURE = ".lecture"  # the lecture's deck of NN_name is NN_name.lecture.html


def package_dir(package: str) -> Path:
    """The folder of an installed package (found without importing it)."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit(
            f"the package '{package}' is not installed: install the course with its 'lab' extra "
            "(python course.py lab, or pip install -e '.[lab]')"
        )
    return Path(next(iter(spec.submodule_search_locations)))


# name in _static -> (package, path inside the package)
ASSETS = {
    "reveal": ("sphinx_revealjs", "_static/revealjs"),
    "mathjax": ("jupyter_server_mathjax", "static"),
    "require.js": SCRIPTS["requirejs"],  # the same files the package's offline bertviz views use
    "jquery.min.js": SCRIPTS["jquery"],
}


def copy_assets(out: Path) -> Path:
    """Copy reveal.js, MathJax, require.js and jQuery into ``out/_static`` (once)."""
    static = out / "_static"
    for name, (package, inner) in ASSETS.items():
        source = package_dir(package) / inner
        target = static / name
        if not source.exists():
            raise SystemExit(f"{source} is missing: reinstall {package}")
        if target.exists():
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        if source.is_dir():
            shutil.copytree(source, target, ignore=shutil.ignore_patterns("*.map", "*.esm.js"))
        else:
            shutil.copyfile(source, target)
    return static


# nbconvert's reveal template, with every URL local and the deck laid out for 1280 × 720.
TEMPLATE = r"""
{%- extends 'reveal/index.html.j2' -%}

{%- block html_head_js_mermaidjs -%}{%- endblock html_head_js_mermaidjs -%}

{%- block html_head_js_mathjax -%}
<script type="text/x-mathjax-config">
MathJax.Hub.Config({
  tex2jax: {inlineMath: [["$", "$"], ["\\(", "\\)"]], displayMath: [["$$", "$$"], ["\\[", "\\]"]],
            processEscapes: true, processEnvironments: true},
  TeX: {equationNumbers: {autoNumber: "AMS", useLabelIds: true}},
  "HTML-CSS": {availableFonts: [], webFont: "STIX-Web", imageFont: null},
  displayAlign: "center", messageStyle: "none", showMathMenu: false
});
</script>
<script src="{{ resources.course_static }}/mathjax/MathJax.js?config=TeX-AMS-MML_HTMLorMML-full,Safe"></script>
<style>
/* Larger text for a projector; code and outputs keep their lines. */
.reveal .slides { text-align: left; }
.reveal .slides section { font-size: 24px; line-height: 1.4; }
.reveal .jp-RenderedHTMLCommon table { font-size: 20px; }
.reveal .jp-OutputArea-output pre, .reveal .highlight pre { font-size: 17px; line-height: 1.3; }
.reveal img { max-width: 100%; }
.jp-InputPrompt, .jp-OutputPrompt { display: none; }
/* The "Open in Colab" badge is a picture from the internet: not in an offline deck. */
.reveal a[href^="https://colab.research.google.com"] { display: none; }
/* Nothing is cut: a long line widens the slide, and the slide is scaled down to fit. */
.reveal .jp-Cell, .reveal .jp-Cell-inputWrapper, .reveal .jp-InputArea, .reveal .jp-Editor,
.reveal .jp-Cell-outputWrapper, .reveal .jp-OutputArea, .reveal .jp-OutputArea-child,
.reveal .jp-OutputArea-output, .reveal .jp-RenderedText, .reveal .jp-RenderedHTMLCommon,
.reveal .highlight, .reveal .slides section pre { overflow: visible !important; }
/* When that makes the slide larger, a figure stands to the right of the code that draws it. */
.reveal .jp-CodeCell.side { display: flex; flex-direction: row; align-items: flex-start; gap: 12px; }
.reveal .jp-CodeCell.side > .jp-Cell-inputWrapper { flex: 0 0 auto; min-width: 0; }
.reveal .jp-CodeCell.side > .jp-Cell-outputWrapper { flex: 1 1 0; min-width: 40%; margin-top: 0; }
.reveal .jp-OutputArea-output pre { white-space: pre; }
.reveal .jp-OutputArea-output img { max-height: 600px; max-width: 100%; width: auto; height: auto; }
</style>
{%- endblock html_head_js_mathjax -%}

{% block footer_js %}
<script>
require({waitSeconds: 30}, ["{{ resources.course_static }}/reveal/dist/reveal.js",
                            "{{ resources.course_static }}/reveal/plugin/notes/notes.js"],
function (Reveal, RevealNotes) {
  // Scale the current slide down when it is taller or wider than the screen.
  // How much a slide must shrink to fit the screen: the extent of everything in it, in the
  // deck's units (Reveal scales the whole deck to the window).
  function shrink(slide) {
    var W = {{ resources.width }}, H = {{ resources.height }};
    var s = Reveal.getScale() || 1, box = slide.getBoundingClientRect();
    var w = W, h = slide.scrollHeight;
    slide.querySelectorAll("*").forEach(function (e) {
      var r = e.getBoundingClientRect();
      if (r.width === 0 && r.height === 0) { return; }
      w = Math.max(w, (Math.max(r.right, r.left + e.scrollWidth * s) - box.left) / s);
      h = Math.max(h, (Math.max(r.bottom, r.top + e.scrollHeight * s) - box.top) / s);
    });
    return {k: Math.min(1, H / h, W / w), w: w};
  }
  // Scale the current slide down when it is taller or wider than the screen; first try putting
  // its figures beside their code when that needs less shrinking.
  function fit(slide) {
    if (!slide) { return; }
    var W = {{ resources.width }};
    var cells = Array.prototype.filter.call(slide.querySelectorAll(".jp-CodeCell"), function (c) {
      return c.querySelector(".jp-RenderedImage");
    });
    slide.style.transform = "";
    cells.forEach(function (c) { c.classList.remove("side"); });
    var best = shrink(slide);
    if (best.k < 0.9 && cells.length) {
      cells.forEach(function (c) {
        c.classList.add("side");
        // the code keeps the width of its longest line; the figure takes the rest
        var input = c.querySelector(".jp-Cell-inputWrapper"), code = input && input.querySelector("pre");
        if (code) {
          input.style.flexBasis = "0px";  // then the code's scrollWidth is its longest line
          input.style.flexBasis = (code.scrollWidth + 40) + "px";
        }
      });
      var side = shrink(slide);
      if (side.k > best.k) { best = side; } else { cells.forEach(function (c) { c.classList.remove("side"); }); }
    }
    slide.dataset.fit = best.k.toFixed(3);
    if (best.k < 1) {  // scaled from its top left corner, then centred horizontally
      slide.style.transformOrigin = "0 0";
      slide.style.transform = "translateX(" + (W - best.w * best.k) / 2 + "px) scale(" + best.k + ")";
      slide.style.top = "0px";
    }
  }
  function fitCurrent() { fit(Reveal.getCurrentSlide()); }
  Reveal.initialize({
    width: {{ resources.width }}, height: {{ resources.height }}, margin: 0, minScale: 0.2, maxScale: 2.0,
    controls: true, progress: true, hash: true, center: true, transition: "slide",
    slideNumber: "c/t", plugins: [RevealNotes]
  });
  Reveal.on("ready", fitCurrent);
  Reveal.on("slidechanged", fitCurrent);
  Reveal.on("resize", fitCurrent);
  document.querySelectorAll(".reveal img").forEach(function (img) {
    if (!img.complete) { img.addEventListener("load", fitCurrent); }
  });
  if (window.MathJax && MathJax.Hub) {
    MathJax.Hub.Queue(fitCurrent);
    Reveal.on("slidechanged", function () {
      MathJax.Hub.Queue(["Rerender", MathJax.Hub, Reveal.getCurrentSlide()], fitCurrent);
    });
  }
  window.Reveal = Reveal;
  window.courseFit = fit;
});
</script>
{% endblock footer_js %}
"""


def exporter():
    from nbconvert import SlidesExporter

    return SlidesExporter(
        extra_loaders=[jinja2.DictLoader({"course_slides.html.j2": TEMPLATE})],
        template_file="course_slides.html.j2",
        reveal_url_prefix="../_static/reveal",
        require_js_url="../_static/require.js",
        jquery_url="../_static/jquery.min.js",
        mathjax_url="",
        exclude_input_prompt=True,
        exclude_output_prompt=True,
    )


def notebooks(numbers: list[str] | None, lang: str) -> list[Path]:
    paths = sorted((NOTEBOOKS / lang).glob("[0-9][0-9]_*.ipynb"))
    if numbers:
        paths = [p for p in paths if p.name[:2] in numbers]
    return paths


def slide_count(nb: nbformat.NotebookNode) -> int:
    """How many slides a deck of this notebook has: its cells that start a slide or a subslide."""
    return sum(c.get("metadata", {}).get("slideshow", {}).get("slide_type") in SLIDE_TYPES for c in nb.cells)


def optional_cells(nb: nbformat.NotebookNode) -> list[int]:
    """The indices of the cells of the notebook's optional sections: each runs from a Markdown cell whose first line is
    a heading marked "(opcional)" or "(optional)" to the cell before the next heading of its level or above. Such a
    heading must start a cell, and so must the one that ends the section (a cell is left out whole or kept whole)."""
    cells, level = [], None
    for i, cell in enumerate(nb.cells):
        if cell.cell_type == "markdown":
            for m in HEADING.finditer(cell.source.strip()):
                depth, first = len(m.group(1)), m.start() == 0
                if level is not None and depth <= level:
                    if not first:
                        raise ValueError(f"cell {i}: a heading ends an optional section in the middle of a cell")
                    level = None
                if OPTIONAL.match(cell.source.strip()[m.start() :]):
                    if not first:
                        raise ValueError(f"cell {i}: an optional section starts in the middle of a cell")
                    level = depth
        if level is not None:
            cells.append(i)
    return cells


def build_deck(path: Path, out: Path, lang: str, export=None, lecture: bool = False) -> Path:
    """Write the deck of one notebook into ``out/<lang>/<name>.html`` (``lecture``: without its optional sections,
    into ``<name>.lecture.html``); returns its path."""
    export = export or exporter()
    nb = nbformat.read(path, as_version=4)
    if lecture:
        left_out = set(optional_cells(nb))
        nb.cells = [cell for i, cell in enumerate(nb.cells) if i not in left_out]
    # The title's link to the notebook in the other language points at that notebook's deck.
    nb.cells[0].source = OTHER_LANGUAGE.sub(r"(\1.html)", nb.cells[0].source)
    body, _ = export.from_notebook_node(
        nb,
        resources={
            "course_static": "../_static",
            "width": WIDTH,
            "height": HEIGHT,
            "language_code": lang,
            "metadata": {"name": title(nb, path)},
        },
    )
    deck = out / lang / f"{path.stem}{LECTURE if lecture else ''}.html"
    deck.parent.mkdir(parents=True, exist_ok=True)
    deck.write_text(body, encoding="utf-8")
    return deck


def title(nb: nbformat.NotebookNode, path: Path) -> str:
    first = nb.cells[0].source.splitlines()[0] if nb.cells else ""
    return first.lstrip("# ").strip() or path.stem


def write_index(out: Path) -> Path:
    """``out/index.html``: a list of the decks in both languages."""
    rows = []
    for lang, heading in (("es", "Diapositivas"), ("en", "Slides")):
        decks = sorted(d for d in (out / lang).glob("[0-9][0-9]_*.html") if not d.stem.endswith(LECTURE))
        if not decks:
            continue
        rows.append(f"<h2>{heading}</h2>\n<ul>")
        for d in decks:
            nb = NOTEBOOKS / lang / f"{d.stem}.ipynb"
            name = title(nbformat.read(nb, as_version=4), nb) if nb.exists() else d.stem
            lecture = d.with_name(f"{d.stem}{LECTURE}.html")
            path = ("camino de clase" if lang == "es" else "lecture path") if lecture.exists() else ""
            extra = f' · <a href="{lang}/{lecture.name}">{path}</a>' if path else ""
            rows.append(f'<li><a href="{lang}/{d.name}">{html.escape(name)}</a>{extra}</li>')
        rows.append("</ul>")
    page = out / "index.html"
    page.write_text(
        "<!DOCTYPE html>\n<html><head><meta charset='utf-8'><title>Transformers desde cero · from scratch</title>"
        "<style>body{font-family:sans-serif;font-size:22px;margin:2em}li{margin:.3em 0}</style></head><body>\n"
        "<h1>Transformers desde cero · Transformers from scratch</h1>\n" + "\n".join(rows) + "\n</body></html>\n",
        encoding="utf-8",
    )
    return page


def build(
    numbers: list[str] | None = None, langs=LANGS, out: Path = ROOT / "slides", verbose=True, lecture: bool = False
) -> list[Path]:
    """Every deck of ``numbers`` (default: all) in ``langs``; with ``lecture``, also the lecture's deck of each
    notebook that has optional sections."""
    out = Path(out)
    copy_assets(out)
    export = exporter()
    decks = []
    for lang in langs:
        for path in notebooks(numbers, lang):
            kinds = [False]
            if lecture and optional_cells(nbformat.read(path, as_version=4)):
                kinds.append(True)
            for kind in kinds:
                deck = build_deck(path, out, lang, export, lecture=kind)
                decks.append(deck)
                if verbose:
                    print(f"wrote {deck}", flush=True)
    index = write_index(out)
    if verbose:
        print(f"open {index.as_uri()}")
    return decks


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("numbers", nargs="*", help="two-digit notebook numbers (default: all)")
    parser.add_argument("--lang", choices=LANGS, help="only this language (default: both)")
    parser.add_argument("--out", type=Path, default=ROOT / "slides", help="output folder (default: slides/)")
    parser.add_argument(
        "--lecture",
        action="store_true",
        help="also write NN_name.lecture.html, the deck without the sections marked (optional)",
    )
    args = parser.parse_args(argv)
    decks = build(args.numbers, [args.lang] if args.lang else LANGS, args.out, lecture=args.lecture)
    if not decks:
        print("no notebook matched", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
