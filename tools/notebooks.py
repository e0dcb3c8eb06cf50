"""Build the Spanish and English notebooks from their shared source, and execute them.

    python tools/notebooks.py build            # write notebooks/{es,en}/*.ipynb from notebooks/source
    python tools/notebooks.py run [03 07 ...]  # build, then execute and store the outputs
    python tools/notebooks.py check            # fail if a notebook is not what its source builds
    python tools/notebooks.py readme           # refresh only the README's list of notebooks

Each notebook pair has one source file, ``notebooks/source/NN_<slug>.md``: a Markdown file
whose blocks start with a marker line

    <!-- meta -->      es: <slug-es> | <Spanish title>   and   en: <slug-en> | <English title>
    <!-- md es -->     a Markdown cell in Spanish, immediately followed by
    <!-- md en -->     the same cell in English
    <!-- code -->      a code cell, shared by both languages, in a ```python fence

Inside code, «texto|text» is replaced by the Spanish or the English text (comments, labels);
``LANG`` is "es" or "en". ``![alt](img/...)`` images are embedded as cell attachments, so they
render in JupyterLab, on GitHub and in Colab. The builder adds the title cell (with the
"Open in Colab" badge) and the setup cell in front of every notebook.

Execution is deterministic: fixed seed and thread count (set by the setup cell), no timing
metadata, no widget state, stable cell ids.
"""

from __future__ import annotations

import argparse
import base64
import copy
import os
import re
import sys
import time
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parents[1]
SOURCE_DIR = ROOT / "notebooks" / "source"
LANGS = ("es", "en")
MARKER = re.compile(r"^<!--\s*(meta|md es|md en|code)\s*-->\s*$")
# A swap «es|en»: one "|" between the guillemets. A text that needs "|" itself (log p(y | x))
# goes outside the swap; a swap with two "|" would be split at the wrong one, so it is refused.
# The Spanish side may quote with «…» itself (Spanish quotation marks): «"«it» mira"|"“it” looks"».
_ES_SIDE = r"(?:[^«»|]|«[^«»|]*»)*"
INLINE = re.compile(rf"«({_ES_SIDE})\|([^«»|]*)»")
SWAP = re.compile(r"«(?:[^«»]|«[^«»]*»)*»")
IMAGE = re.compile(r"!\[([^\]]*)\]\((img/[^)\s]+)\)")
KERNELSPEC = {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"}


def repository() -> str:
    """The repository's GitHub address ("owner/name"), kept in one place: pyproject.toml."""
    data = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    url = data["project"]["urls"]["Repository"]
    return url.removeprefix("https://github.com/").rstrip("/")


@dataclass
class Source:
    path: Path
    number: str
    slugs: dict[str, str] = field(default_factory=dict)
    titles: dict[str, str] = field(default_factory=dict)
    cells: list[tuple[str, dict[str, str]]] = field(default_factory=list)  # (kind, text per lang)

    def notebook_path(self, lang: str) -> Path:
        return ROOT / "notebooks" / lang / f"{self.number}_{self.slugs[lang]}.ipynb"


def parse_source(path: Path) -> Source:
    number = path.name[:2]
    if not number.isdigit():
        raise ValueError(f"{path.name}: source files start with a two-digit number")
    src = Source(path, number)
    blocks: list[tuple[str, int, list[str]]] = []
    for lineno, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        m = MARKER.match(line)
        if m:
            blocks.append((m.group(1), lineno, []))
        elif blocks:
            blocks[-1][2].append(line)
        elif line.strip():
            raise ValueError(f"{path.name}:{lineno}: text before the first marker")
    pending_es: tuple[int, str] | None = None
    for kind, lineno, lines in blocks:
        text = "\n".join(lines).strip("\n")
        where = f"{path.name}:{lineno}"
        if pending_es is not None and kind != "md en":
            raise ValueError(f"{path.name}:{pending_es[0]}: a 'md es' block must be followed by 'md en'")
        if kind == "meta":
            for entry in text.splitlines():
                if not entry.strip():
                    continue
                lang, _, rest = entry.partition(":")
                slug, _, title = rest.partition("|")
                lang = lang.strip()
                if lang not in LANGS or not slug.strip() or not title.strip():
                    raise ValueError(f"{where}: meta lines are 'es: slug | Title'")
                src.slugs[lang] = slug.strip()
                src.titles[lang] = title.strip()
        elif kind == "md es":
            pending_es = (lineno, text)
        elif kind == "md en":
            if pending_es is None:
                raise ValueError(f"{where}: 'md en' without a 'md es' before it")
            src.cells.append(("markdown", {"es": pending_es[1], "en": text}))
            pending_es = None
        else:
            code = re.sub(r"^```(python)?\s*\n", "", text)
            code = re.sub(r"\n```\s*$", "", code).strip("\n")
            src.cells.append(("code", {lang: translate(code, lang, where) for lang in LANGS}))
    if pending_es is not None:
        raise ValueError(f"{path.name}:{pending_es[0]}: a 'md es' block must be followed by 'md en'")
    if set(src.slugs) != set(LANGS):
        raise ValueError(f"{path.name}: the meta block must name both languages")
    return src


def translate(code: str, lang: str, where: str) -> str:
    for lineno, line in enumerate(code.splitlines(), 1):
        for swap in SWAP.findall(line):
            if swap.count("|") != 1:
                raise ValueError(
                    f"{where}, line {lineno} of the code cell: the swap {swap} has {swap.count('|')} '|'; "
                    f"a swap is «es|en» with exactly one (put a '|' of the text outside the swap)"
                )
    out = INLINE.sub(lambda m: m.group(1) if lang == "es" else m.group(2), code)
    rest = INLINE.sub("", code)
    if "«" in rest or "»" in rest:
        raise ValueError(f"{where}: unbalanced «es|en» in code")
    return out.replace('LANG = "es"', f'LANG = "{lang}"')


def title_cell(src: Source, lang: str) -> str:
    rel = src.notebook_path(lang).relative_to(ROOT).as_posix()
    url = f"https://colab.research.google.com/github/{repository()}/blob/main/{rel}"
    other = "en" if lang == "es" else "es"
    other_rel = f"../{other}/{src.notebook_path(other).name}"
    course = {"es": "Transformers desde cero", "en": "Transformers from scratch"}[lang]
    switch = {"es": f"[English version]({other_rel})", "en": f"[Versión en español]({other_rel})"}[lang]
    return (
        f"# {src.number} · {src.titles[lang]}\n\n"
        f"[![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)]({url})\n\n"
        f"*{course}* · {switch}"
    )


SETUP_CODE = '''\
# «Preparación: en Colab instala el paquete del curso (torch ya viene instalado); en tu equipo no hace nada más.|Setup: in Colab this installs the course package (torch is already there); elsewhere it does nothing more.»
import subprocess
import sys

if "google.colab" in sys.modules:
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "minitransformer @ git+https://github.com/{repo}"], check=True)

from minitransformer.runtime import setup

LANG = "es"  # «idioma de las figuras y de los mensajes|language of figures and messages»
device = setup(seed=0, lang=LANG)  # «semilla fija: en el mismo tipo de máquina, los mismos números|fixed seed: the same numbers on the same kind of machine»'''


def markdown_cell(text: str, cell_id: str) -> nbformat.NotebookNode:
    attachments = {}

    def embed(m: re.Match) -> str:
        path = ROOT / m.group(2)
        if not path.exists():
            raise FileNotFoundError(f"image {m.group(2)} not found (run the code that draws it)")
        mime = {".png": "image/png", ".svg": "image/svg+xml", ".jpg": "image/jpeg"}[path.suffix]
        attachments[path.name] = {mime: base64.b64encode(path.read_bytes()).decode("ascii")}
        return f"![{m.group(1)}](attachment:{path.name})"

    text = IMAGE.sub(embed, text)
    cell = nbformat.v4.new_markdown_cell(text, id=cell_id)
    if attachments:
        cell["attachments"] = attachments
    first = text.lstrip().split("\n", 1)[0]
    slide = "slide" if first.startswith(("# ", "## ")) else "-"
    cell["metadata"] = {"slideshow": {"slide_type": slide}}
    return cell


def build_notebook(src: Source, lang: str) -> nbformat.NotebookNode:
    nb = nbformat.v4.new_notebook()
    nb["metadata"] = {
        "kernelspec": dict(KERNELSPEC),
        "language_info": {"name": "python"},
        "colab": {"provenance": []},
    }
    cid = lambda i: f"{lang}-{src.number}-{i:03d}"  # noqa: E731  (stable ids: clean diffs)
    cells = [markdown_cell(title_cell(src, lang), cid(0))]
    setup = translate(SETUP_CODE.replace("{repo}", repository()), lang, "setup")
    cells.append(nbformat.v4.new_code_cell(setup, id=cid(1)))
    for i, (kind, text) in enumerate(src.cells, start=2):
        if kind == "markdown":
            cells.append(markdown_cell(text[lang], cid(i)))
        else:
            cells.append(nbformat.v4.new_code_cell(text[lang], id=cid(i)))
    for c in cells:
        if c["cell_type"] == "code":
            c["metadata"] = {}
    nb["cells"] = cells
    return nb


def sources(numbers: list[str] | None = None) -> list[Source]:
    paths = sorted(SOURCE_DIR.glob("[0-9][0-9]_*.md"))
    if numbers:
        paths = [p for p in paths if p.name[:2] in numbers]
    return [parse_source(p) for p in paths]


def same_sources(a: nbformat.NotebookNode, b: nbformat.NotebookNode) -> bool:
    strip = lambda nb: [(c["cell_type"], c["source"], c.get("attachments")) for c in nb["cells"]]  # noqa: E731
    return strip(a) == strip(b)


def build(numbers: list[str] | None = None, verbose: bool = True) -> list[Path]:
    """Write the notebooks whose source changed; keep the stored outputs of unchanged cells."""
    written = []
    for src in sources(numbers):
        for lang in LANGS:
            nb = build_notebook(src, lang)
            path = src.notebook_path(lang)
            if path.exists():
                old = nbformat.read(path, as_version=4)
                if same_sources(old, nb):
                    continue
            path.parent.mkdir(parents=True, exist_ok=True)
            nbformat.write(nb, path)
            written.append(path)
            if verbose:
                print(f"built {path.relative_to(ROOT)}")
    return written


def execute(path: Path, timeout: int = 900) -> float:
    """Execute one notebook in place, deterministically. Returns the seconds it took."""
    from nbclient import NotebookClient

    nb = nbformat.read(path, as_version=4)
    for cell in nb["cells"]:
        if cell["cell_type"] == "code":
            cell["outputs"] = []
            cell["execution_count"] = None
            cell["metadata"] = {}
    env_backup = dict(os.environ)
    os.environ.update({"PYTHONHASHSEED": "0", "TQDM_MININTERVAL": "1000"})
    # Stored outputs are computed with a fixed thread count (runtime.STORED_THREADS).
    os.environ.setdefault("MINITRANSFORMER_THREADS", "2")  # runtime.STORED_THREADS
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # idle threads sleep; results unchanged
    start = time.perf_counter()
    try:
        client = NotebookClient(
            nb,
            timeout=timeout,
            kernel_name="python3",
            resources={"metadata": {"path": str(path.parent)}},
            record_timing=False,
            store_widget_state=False,
        )
        client.execute()
    finally:
        os.environ.clear()
        os.environ.update(env_backup)
    seconds = time.perf_counter() - start
    nb["metadata"]["kernelspec"] = dict(KERNELSPEC)
    nb["metadata"]["language_info"] = {"name": "python"}
    nb["metadata"].pop("widgets", None)
    for cell in nb["cells"]:
        if cell["cell_type"] == "code":
            cell["metadata"] = {}
    nbformat.write(nb, path)
    return seconds


README = ROOT / "README.md"
TABLE_START, TABLE_END = "<!-- notebooks:start -->", "<!-- notebooks:end -->"


def readme_tables(srcs: list[Source]) -> dict[str, str]:
    """The README's list of notebooks, per language, with links and Colab badges."""
    tables = {}
    head = {"es": "| Nº | Cuaderno | Colab |\n| --- | --- | --- |", "en": "| No. | Notebook | Colab |\n| --- | --- | --- |"}
    for lang in LANGS:
        rows = [head[lang]]
        for src in srcs:
            rel = src.notebook_path(lang).relative_to(ROOT).as_posix()
            colab = f"https://colab.research.google.com/github/{repository()}/blob/main/{rel}"
            badge = f"[![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)]({colab})"
            rows.append(f"| {src.number} | [{src.titles[lang]}]({rel}) | {badge} |")
        tables[lang] = "\n".join(rows)
    return tables


def render_readme(text: str, srcs: list[Source]) -> str:
    """Replace each `<!-- notebooks:start --><!-- lang -->...<!-- notebooks:end -->` block."""
    tables = readme_tables(srcs)
    pattern = re.compile(re.escape(TABLE_START) + r"<!-- (es|en) -->.*?" + re.escape(TABLE_END), re.S)
    return pattern.sub(lambda m: f"{TABLE_START}<!-- {m.group(1)} -->\n{tables[m.group(1)]}\n{TABLE_END}", text)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("command", choices=["build", "run", "check", "readme"])
    parser.add_argument("numbers", nargs="*", help="two-digit notebook numbers (default: all)")
    parser.add_argument("--lang", choices=LANGS, help="only this language")
    args = parser.parse_args(argv)
    if args.command == "check":
        stale = []
        for src in sources(args.numbers):
            for lang in LANGS:
                path = src.notebook_path(lang)
                if not path.exists() or not same_sources(nbformat.read(path, as_version=4), build_notebook(src, lang)):
                    stale.append(path.relative_to(ROOT).as_posix())
        if README.exists() and not args.numbers:
            text = README.read_text(encoding="utf-8")
            if render_readme(text, sources()) != text:
                stale.append("README.md (its list of notebooks)")
        if stale:
            print("not built from their source (run `python tools/notebooks.py run`):", *stale, sep="\n  ")
            return 1
        return 0
    if args.command != "readme":
        build(args.numbers)
    if README.exists() and not args.numbers:
        text = README.read_text(encoding="utf-8")
        new = render_readme(text, sources())
        if new != text:
            README.write_text(new, encoding="utf-8")
            print("updated README.md")
    if args.command in ("build", "readme"):
        return 0
    langs = [args.lang] if args.lang else list(LANGS)
    for src in sources(args.numbers):
        for lang in langs:
            path = src.notebook_path(lang)
            seconds = execute(path)
            print(f"executed {path.relative_to(ROOT)} in {seconds:.1f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
