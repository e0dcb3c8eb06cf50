"""Build the Spanish and English notebooks from their shared source, and execute them.

    python tools/notebooks.py build            # write notebooks/{es,en}/*.ipynb from notebooks/source
    python tools/notebooks.py run [03 07 ...]  # build, then execute and store the outputs
    python tools/notebooks.py import notebooks/en/03_positional_encoding.ipynb
                                               # bring an edit made in JupyterLab back to the source
    python tools/notebooks.py check            # fail if a notebook is not what its source builds
    python tools/notebooks.py readme           # refresh only the README's list of notebooks
    python tools/notebooks.py numerics [07 ...]  # list the cells whose outputs depend on the numerics

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

Execution is deterministic: the numerics profile of the stored outputs
(``minitransformer.course.numerics.PROFILE``: threads, CPU kernels, MKL's path; the seed of the setup
cell), no timing metadata, no widget state. ``run`` first checks that this machine reproduces
that profile (its fingerprint, kept in ``notebooks/numerics.json``) and refuses to store outputs
that the others would not reproduce. ``numerics`` executes copies of the English notebooks under
other profiles (:data:`FOREIGN_PROFILES`) and records, in the same file, the cells whose outputs
change: on a machine that does not reproduce the profile, the test run compares all the others. A cell's id is derived from its content (``es-03-<hash>``, with
``-2``, ``-3`` for repeated cells), so inserting a cell leaves the other ids unchanged.
Building keeps the stored outputs of every cell whose source did not change; changed cells
are left without outputs until ``run`` executes the pair again.
"""

from __future__ import annotations

import argparse
import ast
import base64
import difflib
import hashlib
import io
import json
import os
import re
import shutil
import sys
import time
import tokenize
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10: pytest's dependency tomli is the same parser
    import tomli as tomllib

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
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
KERNELSPEC = {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"}
# The profiles a notebook's cells are classified under (``numerics``): CI's second leg (one thread,
# another seed, MKL's own choice of path), and PyTorch's plain CPU kernels on three threads at the
# stored seed.
FOREIGN_PROFILES = (
    {"MINITRANSFORMER_THREADS": "1", "MINITRANSFORMER_SEED": "1", "MKL_CBWR": "AUTO"},
    {"ATEN_CPU_CAPABILITY": "default", "MINITRANSFORMER_THREADS": "3"},
)
IGNORE_OUTPUT = "# NBVAL_IGNORE_OUTPUT"


def repository() -> str:
    """The repository's GitHub address ("owner/name"), kept in one place: pyproject.toml."""
    data = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    url = data["project"]["urls"]["Repository"]
    return url.removeprefix("https://github.com/").rstrip("/")


# A release's version; between releases main has a development version, X.Y.Z.devN (PEP 440).
RELEASE = re.compile(r"\d+\.\d+\.\d+")
DEVELOPMENT = re.compile(r"\d+\.\d+\.\d+\.dev\d+")


def package_version() -> str:
    """The package's ``__version__``, read from where it is written once (the package's ``__init__.py``)."""
    text = (ROOT / "src" / "minitransformer" / "__init__.py").read_text(encoding="utf-8")
    return re.search(r'^__version__ = "([^"]+)"$', text, re.M).group(1)


def git_ref(version: str) -> str:
    """The git ref that notebooks built at ``version`` install the package from and open in Colab: a release's
    tag, ``vX.Y.Z`` (a student's saved copy keeps installing the package it was written for), or for a
    development version the main branch (main's notebooks run main's package)."""
    if RELEASE.fullmatch(version):
        return f"v{version}"
    if DEVELOPMENT.fullmatch(version):
        return "main"
    raise ValueError(f"__version__ {version!r} is neither a release (X.Y.Z) nor a development version (X.Y.Z.devN)")


def latest_release() -> str:
    """The newest release: the package's version when it is one, else the newest one in CHANGELOG.md (its first
    ``## X.Y.Z`` heading). The README's badges open that release's notebooks."""
    version = package_version()
    if RELEASE.fullmatch(version):
        return version
    found = re.search(r"^## (\d+\.\d+\.\d+)\b", (ROOT / "CHANGELOG.md").read_text(encoding="utf-8"), re.M)
    if found is None:
        raise ValueError(f"version {version} is not a release, and CHANGELOG.md names none (a '## X.Y.Z' heading)")
    return found.group(1)


def colab_url(rel: str, ref: str) -> str:
    """Colab's address of the notebook at ``rel`` (a path in the repository) as it is at git ref ``ref``."""
    return f"https://colab.research.google.com/github/{repository()}/blob/{ref}/{rel}"


@dataclass
class Source:
    path: Path
    number: str
    slugs: dict[str, str] = field(default_factory=dict)
    titles: dict[str, str] = field(default_factory=dict)
    cells: list[tuple[str, dict[str, str]]] = field(default_factory=list)  # (kind, text per lang)
    raw: list[str] = field(default_factory=list)  # each cell as written in the source («es|en» kept in code)

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
            src.raw.append(f"{pending_es[1]}\0{text}")
            pending_es = None
        else:
            code = re.sub(r"^```(python)?\s*\n", "", text)
            code = re.sub(r"\n```\s*$", "", code).strip("\n")
            src.cells.append(("code", {lang: translate(code, lang, where) for lang in LANGS}))
            src.raw.append(code)
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
    url = colab_url(rel, git_ref(package_version()))
    other = "en" if lang == "es" else "es"
    other_rel = f"../{other}/{src.notebook_path(other).name}"
    course = {"es": "Transformers desde cero", "en": "Transformers from scratch"}[lang]
    switch = {"es": f"[English version]({other_rel})", "en": f"[Versión en español]({other_rel})"}[lang]
    return (
        f"# {src.number} · {src.titles[lang]}\n\n"
        f"[![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)]({url})\n\n"
        f"*{course}* · {switch}"
    )


# The setup cell. {repo} and {ref} are filled in by the builder: the notebook installs the package at the git ref
# its version gives (git_ref: a release's tag, or main between releases).
SETUP_CODE = """\
# «Preparación: en Colab instala el paquete del curso en la versión para la que se escribió|Setup: in Colab this installs the course package at the version this notebook»
# «este cuaderno (torch ya viene instalado); en tu equipo no hace nada más.|was written for (torch is already there); elsewhere it does nothing more.»
import subprocess
import sys

if "google.colab" in sys.modules:
    package = "minitransformer @ git+https://github.com/{repo}@{ref}"
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", package], check=True)

from minitransformer.runtime import setup

LANG = "es"  # «idioma de las figuras y de los mensajes|language of figures and messages»
# «semilla fija: en el mismo tipo de máquina, los mismos números|fixed seed: the same numbers on the same kind of machine»
device = setup(seed=0, lang=LANG)"""


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
    # A heading starts a slide; every other Markdown cell starts a subslide with the code cells
    # that follow it, so that each slide fits a 1280 × 720 screen (tools/slides.py, RISE).
    first = text.lstrip().split("\n", 1)[0]
    slide = "slide" if first.startswith(("# ", "## ")) else "subslide"
    cell["metadata"] = {"slideshow": {"slide_type": slide}}
    return cell


def cell_keys(src: Source) -> list[str]:
    """The content-derived part of each source cell's id: a hash of the cell as written in the
    source (both languages of a markdown pair, the shared code with its «es|en»), with
    ``-2``, ``-3``, ... for the second and later copies of the same cell."""
    seen: Counter[str] = Counter()
    keys = []
    for (kind, _), raw in zip(src.cells, src.raw, strict=True):
        digest = hashlib.sha1(f"{kind}\0{raw}".encode()).hexdigest()[:10]
        seen[digest] += 1
        keys.append(digest if seen[digest] == 1 else f"{digest}-{seen[digest]}")
    return keys


def build_notebook(src: Source, lang: str) -> nbformat.NotebookNode:
    nb = nbformat.v4.new_notebook()
    nb["metadata"] = {
        "kernelspec": dict(KERNELSPEC),
        "language_info": {"name": "python"},
        "colab": {"provenance": []},
    }
    prefix = f"{lang}-{src.number}-"
    cells = [markdown_cell(title_cell(src, lang), prefix + "title")]
    setup = SETUP_CODE.replace("{repo}", repository()).replace("{ref}", git_ref(package_version()))
    setup = translate(setup, lang, "setup")
    cells.append(nbformat.v4.new_code_cell(setup, id=prefix + "setup"))
    for (kind, text), key in zip(src.cells, cell_keys(src), strict=True):
        if kind == "markdown":
            cells.append(markdown_cell(text[lang], prefix + key))
        else:
            cells.append(nbformat.v4.new_code_cell(text[lang], id=prefix + key))
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
    """Same cells (ids, kinds, sources, attachments); outputs are not compared."""

    def strip(nb):
        return [(c.get("id"), c["cell_type"], c["source"], c.get("attachments")) for c in nb["cells"]]

    return strip(a) == strip(b)


def is_setup(cell: nbformat.NotebookNode) -> bool:
    """Whether ``cell`` is the setup cell the builder writes (``SETUP_CODE``)."""
    return cell["cell_type"] == "code" and cell.get("id", "").endswith("-setup")


def keep_outputs(new: nbformat.NotebookNode, old: nbformat.NotebookNode) -> list[int]:
    """Copy into ``new`` the outputs of every code cell of ``old`` with the same id and source (the setup cell:
    the same id, when it printed nothing).

    Returns the indices of the code cells left to execute (changed or new: no outputs)."""
    old_cells = {c.get("id"): c for c in old["cells"] if c["cell_type"] == "code"}
    pending = []
    for i, cell in enumerate(new["cells"]):
        if cell["cell_type"] != "code":
            continue
        before = old_cells.get(cell["id"])
        # The setup cell prints nothing outside Colab: a new one (another version, SETUP_CODE edited) keeps the
        # old one's empty output, and a rebuild changes no other output.
        same = before is not None and (before["source"] == cell["source"] or (is_setup(cell) and not before.outputs))
        if same and before.get("execution_count") is not None:
            cell["outputs"] = before.get("outputs", [])
            cell["execution_count"] = before["execution_count"]
        elif cell["source"].strip():
            pending.append(i)
    return pending


def build(numbers: list[str] | None = None, verbose: bool = True, hint: bool = True) -> list[Path]:
    """Write the notebooks whose source changed; keep the stored outputs of unchanged cells.

    With ``verbose``, prints each notebook written and (with ``hint``) the cells left to execute."""
    written = []
    for src in sources(numbers):
        for lang in LANGS:
            nb = build_notebook(src, lang)
            path = src.notebook_path(lang)
            pending = [i for i, c in enumerate(nb["cells"]) if c["cell_type"] == "code" and c["source"].strip()]
            if path.exists():
                old = nbformat.read(path, as_version=4)
                if same_sources(old, nb):
                    continue
                pending = keep_outputs(nb, old)
            path.parent.mkdir(parents=True, exist_ok=True)
            nbformat.write(nb, path)
            written.append(path)
            if verbose:
                run = f"; code cells {pending} to execute: python tools/notebooks.py run {src.number}"
                todo = run if pending and hint else ""
                print(f"built {path.relative_to(ROOT)}{todo}")
    return written


# ---------------------------------------------------------------------------------------
# import: an edit made in JupyterLab to one built notebook, back into its source
# ---------------------------------------------------------------------------------------


class CannotImport(Exception):
    """The edit cannot be mapped to the source; the message says what to do instead."""


def code_skeleton(code: str) -> list[tuple[int, str]] | None:
    """The code's tokens without comments and strings (the parts that may be translated), and
    without shell and magic lines (``!pip``, ``%time``); None when the code does not tokenize.

    The expressions inside an f-string are code, on every Python: Python 3.12 tokenizes an
    f-string into its parts (PEP 701), 3.10 and 3.11 into one string token. So a run of adjacent
    strings (``"a" f"{x}"``, however it is split) becomes one entry made from their syntax trees:
    the expressions, with the strings inside them and the format specs (``:>12``, layout) blanked."""
    lines = [line for line in code.splitlines() if not line.lstrip().startswith(("!", "%"))]
    text = "\n".join(lines) + "\n"
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(text).readline))
    except (tokenize.TokenError, SyntaxError):
        return None
    starts = [0]
    for line in text.splitlines(keepends=True):
        starts.append(starts[-1] + len(line))
    fstring_start = getattr(tokenize, "FSTRING_START", None)
    fstring_end = getattr(tokenize, "FSTRING_END", None)
    skeleton: list = []
    depth, opened = 0, 0

    def add_string(literal: str) -> None:
        expressions = _fstring_expressions(literal)
        if skeleton and isinstance(skeleton[-1], list):  # implicit concatenation: one run
            skeleton[-1].extend(expressions)
        else:
            skeleton.append(expressions)

    for t in tokens:
        if fstring_start is not None and t.type == fstring_start:  # Python 3.12+: an f-string in parts
            if depth == 0:
                opened = starts[t.start[0] - 1] + t.start[1]
            depth += 1
        elif fstring_end is not None and t.type == fstring_end:
            depth -= 1
            if depth == 0:
                add_string(text[opened : starts[t.end[0] - 1] + t.end[1]])
        elif depth:
            continue
        elif t.type == tokenize.STRING:  # a plain string, or (Python 3.10 and 3.11) a whole f-string
            add_string(t.string)
        elif t.type not in {tokenize.COMMENT, tokenize.NL}:
            skeleton.append((t.type, t.string))
    return [(tokenize.STRING, repr(e)) if isinstance(e, list) else e for e in skeleton]


def _fstring_expressions(literal: str) -> list[str]:
    """The expressions of one string literal (none for a plain string), as syntax trees without the
    strings inside them."""
    node = ast.parse(literal.strip(), mode="eval").body
    if not isinstance(node, ast.JoinedStr):
        return []
    return [ast.dump(_Untranslated().visit(part)) for part in node.values if not isinstance(part, ast.Constant)]


class _Untranslated(ast.NodeTransformer):
    """Blanks the strings inside an f-string's expressions (``{'capa':>12}``): translatable, as a string is
    outside one."""

    def visit_Constant(self, node: ast.Constant) -> ast.Constant:
        return ast.Constant("") if isinstance(node.value, str) else node


def _prose_spans(code: str) -> list[tuple[int, int, bool]]:
    """(start, end, is_comment) character spans of the comments and strings of ``code``."""
    starts = [0]
    for line in code.splitlines(keepends=True):
        starts.append(starts[-1] + len(line))
    prose = {tokenize.COMMENT, tokenize.STRING} | {
        getattr(tokenize, n) for n in ("FSTRING_MIDDLE",) if hasattr(tokenize, n)
    }
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(code + "\n").readline))
    except (tokenize.TokenError, SyntaxError):
        return []
    return [
        (starts[t.start[0] - 1] + t.start[1], starts[t.end[0] - 1] + t.end[1], t.type == tokenize.COMMENT)
        for t in tokens
        if t.type in prose
    ]


def _slide_to_pair(old: str, at: int, text: str, spans, segments, in_prose) -> tuple[int, str]:
    """An insertion can often sit at several places (" x" after "a" in "a b" is also "x " after
    "a "); move it onto the edge of a «es|en» pair inside a comment or string when one of
    those places is such an edge, so that the text goes into the pair."""
    edges = {a for (a, b), seg in zip(spans, segments, strict=True) if not isinstance(seg, str)}
    edges |= {b for (a, b), seg in zip(spans, segments, strict=True) if not isinstance(seg, str)}
    places = [(at, text)]
    p, t = at, text
    while t and p < len(old) and old[p] == t[0]:
        p, t = p + 1, t[1:] + old[p]
        places.append((p, t))
    p, t = at, text
    while t and p > 0 and old[p - 1] == t[-1]:
        p, t = p - 1, old[p - 1] + t[:-1]
        places.append((p, t))
    return next(((p, t) for p, t in places if p in edges and in_prose(p)), (at, text))


def map_code_edit(raw: str, lang: str, edited: str, where: str) -> tuple[str, bool]:
    """The source of a code cell (with «es|en») whose ``lang`` version reads ``edited``.

    Edits of the shared code apply to both languages; an edit inside the ``lang`` side of a
    «es|en» pair changes that side only (the second value returned is True then: the other
    language still needs the translation). Raises CannotImport when an edit straddles a pair
    and its surroundings, or leaves the two languages' code different outside comments and
    strings."""
    segments: list = []  # literal text (str) and pairs ({"es": ..., "en": ...}) alternate
    pos = 0
    for m in INLINE.finditer(raw):
        segments += [raw[pos : m.start()], {"es": m.group(1), "en": m.group(2)}]
        pos = m.end()
    segments.append(raw[pos:])
    text = lambda seg: seg if isinstance(seg, str) else seg[lang]  # noqa: E731
    old = "".join(text(seg) for seg in segments)
    if old != translate(raw, lang, where):
        raise CannotImport(f"{where}: this cell is rewritten by the builder; edit it in the source")
    spans, start = [], 0
    for seg in segments:
        spans.append((start, start + len(text(seg))))
        start += len(text(seg))
    prose = _prose_spans(old)
    in_prose = lambda p: any(a < p < b or (comment and a < p == b) for a, b, comment in prose)  # noqa: E731
    one_side = False
    ops = difflib.SequenceMatcher(None, old, edited, autojunk=False).get_opcodes()
    for tag, i1, i2, j1, j2 in reversed(ops):
        if tag == "equal":
            continue
        new = edited[j1:j2]
        if i1 < i2:
            touched = [k for k, (a, b) in enumerate(spans) if a < i2 and b > i1]
        else:
            i1, new = _slide_to_pair(old, i1, new, spans, segments, in_prose)
            i2 = i1
            inside = [k for k, (a, b) in enumerate(spans) if a < i1 < b]
            edges = [k for k, (a, b) in enumerate(spans) if a == i1 or b == i1]
            pairs = [k for k in edges if not isinstance(segments[k], str)]
            literal = [k for k in edges if isinstance(segments[k], str)]
            touched = inside or (pairs[:1] if pairs and in_prose(i1) else literal[:1] or pairs[:1])
        if not touched:
            raise CannotImport(f"{where}: cannot place the edit {new!r}; make it in the source")
        if len(touched) > 1:
            whole = all(isinstance(segments[k], str) or (i1 <= spans[k][0] and spans[k][1] <= i2) for k in touched)
            if new or not whole:
                raise CannotImport(
                    f"{where}: an edit changes a «es|en» text together with the code around it "
                    f"({old[i1:i2]!r} -> {new!r}); make it in the source"
                )
            for k in touched:  # a deletion that swallows whole pairs
                a, b = spans[k]
                if isinstance(segments[k], str):
                    segments[k] = segments[k][: max(i1 - a, 0)] + segments[k][min(i2, b) - a :]
                else:
                    segments[k] = ""
            continue
        k = touched[0]
        a = spans[k][0]
        if isinstance(segments[k], str):
            segments[k] = segments[k][: i1 - a] + new + segments[k][i2 - a :]
        else:
            segments[k][lang] = segments[k][lang][: i1 - a] + new + segments[k][lang][i2 - a :]
            one_side = True
    pieces = []
    for seg in segments:
        if isinstance(seg, str):
            if "«" in seg or "»" in seg:
                raise CannotImport(f"{where}: « and » mark «es|en» pairs; write new pairs in the source")
            pieces.append(seg)
        else:
            if "|" in seg["es"] or any(c in seg[side] for side in LANGS for c in "«»"):
                raise CannotImport(f"{where}: the edit puts | « or » inside a «es|en» pair; make it in the source")
            pieces.append(f"«{seg['es']}|{seg['en']}»")
    new_raw = "".join(pieces)
    assert translate(new_raw, lang, where) == edited, "internal error: the mapped source does not rebuild the edit"
    skeletons = [code_skeleton(translate(new_raw, side, where)) for side in LANGS]
    if skeletons[0] != skeletons[1]:
        raise CannotImport(
            f"{where}: after this edit the Spanish and English code would differ outside comments "
            "and strings; shared code is edited once, in the source"
        )
    return new_raw, one_side


def _unembed(text: str, source_text: str, where: str) -> str:
    """Markdown as JupyterLab stores it (``attachment:name``) back to the source's ``img/`` paths."""
    paths = {Path(m.group(2)).name: m.group(2) for m in IMAGE.finditer(source_text)}

    def back(m: re.Match) -> str:
        name = m.group(2)
        if name not in paths:
            raise CannotImport(
                f"{where}: the image {name!r} is new; save it under img/es and img/en and write "
                "![alt](img/<lang>/<file>) in the source"
            )
        return f"![{m.group(1)}]({paths[name]})"

    return re.sub(r"!\[([^\]]*)\]\(attachment:([^)\s]+)\)", back, text)


def _blocks(path: Path) -> tuple[list[str], list[list[tuple[str, list[str]]]]]:
    """The source file as (the lines up to the first cell, one list of blocks per cell), where a
    block is (its marker line, the lines after it)."""
    head: list[str] = []
    blocks: list[tuple[str, list[str]]] = []
    for line in path.read_text(encoding="utf-8").split("\n"):
        m = MARKER.match(line)
        if m:
            blocks.append((line, []))
        elif blocks:
            blocks[-1][1].append(line)
        else:
            head.append(line)
    cells: list[list[tuple[str, list[str]]]] = []
    for block in blocks:
        kind = MARKER.match(block[0]).group(1)
        if kind == "meta":
            head += [block[0], *block[1]]
        elif kind == "md en":
            cells[-1].append(block)
        else:
            cells.append([block])
    return head, cells


def _with_body(lines: list[str], text: str, fenced: bool) -> list[str]:
    """``lines`` of a block with its content replaced by ``text`` (blank lines and fences kept)."""
    lead = next((i for i, l in enumerate(lines) if l != ""), len(lines))
    end = next((i for i in range(len(lines), lead, -1) if lines[i - 1] != ""), lead)
    inner = text.split("\n")
    if fenced and lead < end and lines[lead].startswith("```"):
        inner = [lines[lead], *inner, lines[end - 1]]
    return lines[:lead] + inner + lines[end:]


def import_notebook(path: Path) -> list[str]:
    """Bring the edits made to one built notebook back into ``notebooks/source/NN_*.md``.

    Maps changed, moved and deleted cells; refuses (CannotImport, with every reason at once)
    what it cannot map: the generated title and setup cells, new cells (they exist in one
    language only), edits that would make the two languages' code differ, new images.
    Returns notes for the maintainer (for example, a text to translate into the other language)."""
    path = path.resolve()
    lang, number = path.parent.name, path.name[:2]
    srcs = sources([number]) if lang in LANGS and number.isdigit() else []
    if not srcs or srcs[0].notebook_path(lang).resolve() != path:
        raise CannotImport(f"{path}: not a notebook built by this tool (notebooks/es|en/NN_<slug>.ipynb)")
    src = srcs[0]
    name = f"notebooks/source/{src.path.name}"
    built = build_notebook(src, lang)
    edited = nbformat.read(path, as_version=4)
    prefix = f"{lang}-{number}-"
    keys = [prefix + k for k in cell_keys(src)]
    index = {k: i for i, k in enumerate(keys)}
    generated = {c["id"]: c for c in built["cells"][:2]}
    problems: list[str] = []
    notes: list[str] = []
    if not any(c.get("id") in index or c.get("id") in generated for c in edited["cells"]):
        raise CannotImport(
            f"{path.name}: none of its cell ids is one the source builds; run "
            f"`python tools/notebooks.py build {number}` first, then make the edit again"
        )
    other = "en" if lang == "es" else "es"
    twin = src.notebook_path(other)
    if twin.exists() and not same_sources(nbformat.read(twin, as_version=4), build_notebook(src, other)):
        problems.append(
            f"{twin.relative_to(ROOT)} is not what the source builds either (edited too, or not rebuilt): "
            "import one language at a time, onto a pair freshly built from the source"
        )
    for gid, cell in generated.items():
        found = [n for n, c in enumerate(edited["cells"]) if c.get("id") == gid]
        what = "title" if gid.endswith("title") else "setup"
        if not found:
            problems.append(f"the {what} cell was deleted; it is generated by tools/notebooks.py")
        elif edited["cells"][found[0]]["source"] != cell["source"]:
            problems.append(
                f"cell {found[0]} (the {what} cell) is generated: change "
                f"{'title_cell' if what == 'title' else 'SETUP_CODE'} in tools/notebooks.py instead"
            )
    order: list[int] = []
    new_text: dict[int, dict[str, str] | str] = {}
    for n, cell in enumerate(edited["cells"]):
        cid = cell.get("id")
        if cid in generated:
            continue
        where = f"{path.name}, cell {n}"
        if cid not in index:
            problems.append(
                f"{where} is new, in one language only: add it to {name} (a markdown cell in both "
                "languages; a code cell once, with «es|en» for its comments and strings)"
            )
            continue
        i = index[cid]
        kind, text = src.cells[i]
        if cell["cell_type"] != kind:
            problems.append(f"{where} changed from {kind} to {cell['cell_type']}; change it in {name}")
            continue
        order.append(i)
        if cell["source"] == built["cells"][i + 2]["source"]:
            continue
        try:
            if kind == "markdown":
                new_text[i] = {**text, lang: _unembed(cell["source"], text[lang], where)}
                other = "English" if lang == "es" else "Spanish"
                notes.append(f"{where}: translate the edit into the {other} cell of {name} too")
            else:
                new_text[i], one_side = map_code_edit(src.raw[i], lang, cell["source"], where)
                if one_side:
                    notes.append(f"{where}: a «es|en» text changed in one language; translate it in {name}")
        except CannotImport as e:
            problems.append(str(e))
    if len(order) != len(set(order)):
        problems.append(f"{path.name}: a cell appears twice; copy cells in {name}, not in the notebook")
    if problems:
        raise CannotImport("cannot bring the edit back to the source:\n  " + "\n  ".join(problems))
    deleted = [i for i in range(len(src.cells)) if i not in order]
    notes += [f"cell {i + 2} of the pair was deleted in both languages" for i in deleted]
    head, cells = _blocks(src.path)
    out = list(head)
    for i in order:
        blocks = cells[i]
        if i in new_text:
            kind = src.cells[i][0]
            if kind == "markdown":
                blocks = [
                    (marker, _with_body(lines, new_text[i][side], fenced=False))
                    for (marker, lines), side in zip(blocks, LANGS, strict=True)
                ]
            else:
                blocks = [(blocks[0][0], _with_body(blocks[0][1], new_text[i], fenced=True))]
        for marker, lines in blocks:
            out += [marker, *lines]
    if order and out[-1] != "":
        out.append("")
    src.path.write_text("\n".join(out), encoding="utf-8")
    parse_source(src.path)  # the result must parse
    return notes


def execute(path: Path, timeout: int = 900, profile: dict[str, str] | None = None) -> float:
    """Execute one notebook in place, deterministically, under the stored outputs' numerics profile
    (or under ``profile`` where it sets a variable). Returns the seconds it took."""
    from nbclient import NotebookClient

    from minitransformer.course.numerics import profile_environ

    nb = nbformat.read(path, as_version=4)
    for cell in nb["cells"]:
        if cell["cell_type"] == "code":
            cell["outputs"] = []
            cell["execution_count"] = None
            cell["metadata"] = {}
    env_backup = dict(os.environ)
    os.environ.update({"PYTHONHASHSEED": "0", "TQDM_MININTERVAL": "1000", **(profile or {})})
    os.environ.update(profile_environ())
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
            coalesce_streams=True,  # one output per stream, however the kernel flushed it
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
            for output in cell["outputs"]:
                # Widget state is not stored, so a widget view (a progress bar) would show an error
                # where it is opened; its text, which train() updates to the finished bar, stays.
                output.get("data", {}).pop(WIDGET_VIEW, None)
    nbformat.write(nb, path)
    return seconds


# ---------------------------------------------------------------------------------------
# numerics: the profile the stored outputs are computed under, and the cells that depend on it
# ---------------------------------------------------------------------------------------


def numerics_path() -> Path:
    return ROOT / "notebooks" / "numerics.json"


def read_numerics() -> dict:
    path = numerics_path()
    return json.loads(path.read_text(encoding="utf-8")) if path.exists() else {"fingerprint": None, "cells": {}}


def write_numerics(data: dict) -> None:
    data = {"fingerprint": data["fingerprint"], "cells": dict(sorted(data["cells"].items()))}
    numerics_path().write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")


def code_digest(src: Source) -> str:
    """A digest of a notebook's code cells (their content-derived keys): the classification of its
    cells is current while it does not change."""
    keys = [k for (kind, _), k in zip(src.cells, cell_keys(src), strict=True) if kind == "code"]
    return hashlib.sha1("\n".join(keys).encode()).hexdigest()[:12]


def check_profile(new: bool = False) -> str | None:
    """None when this machine reproduces the stored outputs' profile (or, with ``new``, after making
    this machine's fingerprint the stored one); otherwise the reason not to store outputs here."""
    from minitransformer.course.numerics import differences, measure, user_language, verdict

    data = read_numerics()
    measured = measure()
    if data["fingerprint"] is not None and not differences(measured, data["fingerprint"]):
        return None
    if new:
        write_numerics({**data, "fingerprint": measured})
        return None
    said = verdict(measured, data["fingerprint"] or {}, user_language()) if data["fingerprint"] else ""
    return (
        f"{said}\nOutputs stored here would not be those of the other notebooks. Run this on a machine that "
        "reproduces the profile, or re-run every notebook here with `run --new-profile` (all of them, in one go)."
    )


def outputs_text(cell: nbformat.NotebookNode) -> str:
    """What nbval compares of a code cell's outputs (text, HTML, JavaScript, streams, errors), sanitised
    as the test run sanitises them."""
    kept = []
    for out in cell.get("outputs", []):
        if out["output_type"] == "stream":  # consecutive writes to one stream are one text
            if kept and kept[-1][0] == out["name"]:
                kept[-1][1] += out["text"]
            else:
                kept.append([out["name"], out["text"]])
        elif out["output_type"] == "error":
            kept.append(["error", out["ename"], out["evalue"]])
        else:
            data = out.get("data", {})
            kept += [
                [mime, data[mime]] for mime in ("text/plain", "text/html", "application/javascript") if mime in data
            ]
    text = json.dumps(kept, ensure_ascii=False)
    config = ROOT / "tests" / "nbval_sanitize.cfg"
    if config.exists():
        import configparser

        parser = configparser.ConfigParser()
        parser.read(config, encoding="utf-8")
        for section in parser.sections():
            text = re.sub(parser[section]["regex"], parser[section]["replace"], text)
    return text


def classify(numbers: list[str] | None = None) -> dict[str, list[str]]:
    """Execute copies of the English notebooks under each of :data:`FOREIGN_PROFILES` and record in
    ``notebooks/numerics.json`` the cells whose outputs differ from the stored ones (by key, the
    same in both languages). Returns them per notebook."""
    data = read_numerics()
    found: dict[str, list[str]] = {}
    for src in sources(numbers):
        path = src.notebook_path("en")
        stored = nbformat.read(path, as_version=4)
        dependent: set[str] = set()
        for profile in FOREIGN_PROFILES:
            copy = path.with_name(f".numerics-{path.name}")  # same folder: same working directory and files
            shutil.copy(path, copy)
            try:
                seconds = execute(copy, profile=profile)
                ran = nbformat.read(copy, as_version=4)
            finally:
                copy.unlink(missing_ok=True)
            print(f"executed {path.name} under {profile} in {seconds:.1f} s", flush=True)
            for before, after in zip(stored["cells"], ran["cells"], strict=True):
                if before["cell_type"] != "code" or before["source"].lstrip().startswith(IGNORE_OUTPUT):
                    continue
                if outputs_text(before) != outputs_text(after):
                    dependent.add(before["id"].split("-", 2)[-1])
        keys = cell_keys(src)
        found[src.number] = sorted(dependent, key=keys.index)
        data["cells"][src.number] = {"code": code_digest(src), "dependent": found[src.number]}
        write_numerics(data)
    return found


def unclassified() -> list[str]:
    """The notebooks whose code changed since their cells were classified (or never were)."""
    cells = read_numerics()["cells"]
    return [src.number for src in sources() if cells.get(src.number, {}).get("code") != code_digest(src)]


README = ROOT / "README.md"
TABLE_START, TABLE_END = "<!-- notebooks:start -->", "<!-- notebooks:end -->"


def readme_tables(srcs: list[Source]) -> dict[str, str]:
    """The README's list of notebooks, per language, with links and Colab badges; a badge opens the notebook of the
    latest release, whose setup cell installs that release (a copy a student saves keeps working)."""
    release = latest_release()
    tables = {}
    head = {
        "es": "| Nº | Cuaderno | Colab |\n| --- | --- | --- |",
        "en": "| No. | Notebook | Colab |\n| --- | --- | --- |",
    }
    for lang in LANGS:
        rows = [head[lang]]
        for src in srcs:
            rel = src.notebook_path(lang).relative_to(ROOT).as_posix()
            colab = colab_url(rel, f"v{release}")
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
    parser.add_argument("command", choices=["build", "run", "check", "readme", "import", "numerics"])
    parser.add_argument("numbers", nargs="*", help="two-digit notebook numbers (default: all); for import, notebooks")
    parser.add_argument("--lang", choices=LANGS, help="only this language")
    parser.add_argument(
        "--new-profile",
        action="store_true",
        help="run: make this machine's numerics the stored ones (every notebook is re-executed)",
    )
    args = parser.parse_args(argv)
    if args.new_profile and (args.command != "run" or args.numbers or args.lang):
        parser.error("--new-profile re-executes every notebook in both languages: `run --new-profile` alone")
    if args.command == "import":
        if not args.numbers:
            parser.error("import needs the path of the notebook you edited")
        for name in args.numbers:
            try:
                notes = import_notebook(Path(name))
            except CannotImport as e:
                print(e, file=sys.stderr)
                return 1
            number = Path(name).name[:2]
            print(f"brought {name} back into notebooks/source/; then: python tools/notebooks.py run {number}")
            for note in notes:
                print(f"  note: {note}")
            build([number])
        return 0
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
        todo = [n for n in unclassified() if not args.numbers or n in args.numbers]
        if todo:
            print(
                f"code changed since its cells were classified: run `python tools/notebooks.py numerics {' '.join(todo)}`"
            )
            return 1
        return 0
    if args.command == "numerics":
        build(args.numbers, verbose=False)
        for number, keys in classify(args.numbers).items():
            print(f"{number}: {len(keys)} cells depend on the numerics")
        return 0
    if args.command != "readme":
        build(args.numbers, hint=args.command == "build")
    if README.exists() and not args.numbers:
        text = README.read_text(encoding="utf-8")
        new = render_readme(text, sources())
        if new != text:
            README.write_text(new, encoding="utf-8")
            print("updated README.md")
    if args.command in ("build", "readme"):
        return 0
    refused = check_profile(new=args.new_profile)
    if refused:
        print(refused, file=sys.stderr)
        return 1
    langs = [args.lang] if args.lang else list(LANGS)
    for src in sources(args.numbers):
        for lang in langs:
            path = src.notebook_path(lang)
            seconds = execute(path)
            print(f"executed {path.relative_to(ROOT)} in {seconds:.1f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
