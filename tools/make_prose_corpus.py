"""Write the course's own prose, in Spanish and English, as the corpus of notebooks 11 (tokens) and 12.

    python tools/make_prose_corpus.py            # notebooks 00-11 -> src/minitransformer/corpora/
    python tools/make_prose_corpus.py --drift    # how far the sources have moved from the snapshot (a report)

The corpus is the Markdown cells of the notebooks' sources (``notebooks/source/NN_*.md``),
each language on its own: a parallel corpus of the course's sentences. What is not prose goes:
code blocks and inline code, formulas (``$…$``, ``$$…$$``), images, links' addresses, HTML,
tables and Markdown's marks (``#``, ``**``, ``*``, bullets). A paragraph becomes one line, and
a blank line separates paragraphs. Each notebook's text starts with a line ``§ NN`` (the
package's :func:`minitransformer.course.prose.prose` reads them to split the corpus).

The files are a frozen snapshot of the sources when they were written, dated on their first line:
notebook 11's numbers and notebook 12's model are computed on them, so they are not regenerated
when the prose of a notebook changes (12's own prose never enters them). ``--drift`` says, per
notebook and language, how many of the snapshot's paragraphs the sources still have, for a
maintainer who wonders whether a new snapshot is due (then re-execute 11 and 12).
"""

from __future__ import annotations

import argparse
import datetime
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from notebooks import LANGS, ROOT, sources  # noqa: E402

OUT = ROOT / "src" / "minitransformer" / "corpora"
NOTEBOOKS = [f"{n:02d}" for n in range(12)]  # 00-11: the notebooks up to the tokens one, frozen for 12

_RULES: list[tuple[re.Pattern[str], str]] = [
    (re.compile(r"```.*?```", re.S), ""),  # code blocks
    (re.compile(r"\$\$.*?\$\$", re.S), ""),  # display formulas
    (re.compile(r"`[^`]*`"), ""),  # inline code
    (re.compile(r"<!--.*?-->", re.S), ""),  # HTML comments
    (re.compile(r"!\[[^\]]*\]\([^)]*\)"), ""),  # images
    (re.compile(r"\[([^\]]*)\]\([^)]*\)"), r"\1"),  # links: their text stays
    (re.compile(r"https?://\S+"), ""),  # bare addresses
    (re.compile(r"</?[a-zA-Z][^>]*>"), ""),  # HTML tags
]


# An inline formula made only of these stays, as plain text: $d_\text{model} = 512$ -> d_model = 512.
_SYMBOLS = {
    "cdot": "·",
    "times": "×",
    "approx": "≈",
    "infty": "∞",
    "sqrt": "√",
    "dots": "…",
    "ldots": "…",
    "le": "≤",
    "leq": "≤",
    "ge": "≥",
    "geq": "≥",
    "neq": "≠",
    "ne": "≠",
    "to": "→",
    "in": "∈",
    "odot": "⊙",
    "alpha": "α",
    "beta": "β",
    "gamma": "γ",
    "delta": "δ",
    "Delta": "Δ",
    "varepsilon": "ε",
    "theta": "θ",
    "lambda": "λ",
    "mu": "μ",
    "pi": "π",
    "sigma": "σ",
    "tau": "τ",
    "omega": "ω",
    "ln": "ln",
    "log": "log",
    "cos": "cos",
    "sin": "sin",
    "max": "max",
    "min": "min",
    "top": "ᵀ",
}


def inline_formula(match: re.Match[str]) -> str:
    """A short formula as plain text, or nothing when it needs more than letters and symbols."""
    text = re.sub(r"\\[,;:! ]", " ", match.group(1))  # LaTeX's spaces
    text = re.sub(r"\\(?:text|mathrm|operatorname)\{([^{}]*)\}", r"\1", text)
    text = re.sub(r"\\([a-zA-Z]+)", lambda m: _SYMBOLS.get(m.group(1), "\\" + m.group(1)), text)
    if "\\" in text:
        return ""
    return text.replace("{", "").replace("}", "")


def prose(markdown: str) -> str:
    """The sentences of one Markdown cell: paragraphs on one line each, blank lines between."""
    for pattern, replacement in _RULES:
        markdown = pattern.sub(replacement, markdown)
    markdown = re.sub(r"(?<!\\)\$([^$]*?)(?<!\\)\$", inline_formula, markdown)
    paragraphs = []
    for block in re.split(r"\n\s*\n", markdown):
        lines = []
        for line in block.splitlines():
            if line.lstrip().startswith("|"):  # a table row
                continue
            line = re.sub(r"^\s*#+\s*", "", line)  # headings
            line = re.sub(r"^\s*(?:[-*+]|>)\s+", "", line)  # bullets, quotes
            lines.append(line.strip())
        text = " ".join(line for line in lines if line)
        text = re.sub(r"\*\*|(?<![\w*])\*(?=\S)|(?<=\S)\*(?![\w*])", "", text)  # bold and italics
        text = re.sub(r"\(\s*[,;:]?\s*\)", "", text)  # brackets left empty by a removed formula
        text = re.sub(r"\s+([,.;:)])", r"\1", text)  # no space before punctuation
        text = re.sub(r"\(\s+", "(", text)
        text = re.sub(r" {2,}", " ", text).strip()
        if re.search(r"[^\W\d_]{2}", text):  # at least one word
            paragraphs.append(text)
    return "\n\n".join(paragraphs)


def corpus(lang: str, numbers: list[str] = NOTEBOOKS) -> str:
    parts = []
    for src in sources(numbers):
        cells = [prose(text[lang]) for kind, text in src.cells if kind == "markdown"]
        parts.append(f"§ {src.number}\n\n" + "\n\n".join(cell for cell in cells if cell))
    return "\n\n".join(parts) + "\n"


def by_notebook(text: str) -> dict[str, list[str]]:
    """A corpus's paragraphs, by notebook number (the ``§ NN`` lines)."""
    pieces = re.split(r"^§ (\d\d)\n\n", text, flags=re.M)[1:]
    return {number: [p for p in body.strip().split("\n\n") if p] for number, body in zip(pieces[::2], pieces[1::2])}


def drift(snapshot: str, today: str) -> list[tuple[str, int, int, int]]:
    """Per notebook of the snapshot: (number, its paragraphs, how many the sources still have word for word,
    the sources' paragraphs today)."""
    then, now = by_notebook(snapshot), by_notebook(today)
    rows = []
    for number, paragraphs in then.items():
        current = set(now.get(number, []))
        rows.append((number, len(paragraphs), sum(p in current for p in paragraphs), len(now.get(number, []))))
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--drift", action="store_true", help="report how far the sources moved; write nothing")
    args = parser.parse_args(argv)
    if args.drift:
        for lang in LANGS:
            shipped = (OUT / f"prose_{lang}.txt").read_text(encoding="utf-8")
            print(f"{lang}: {shipped.splitlines()[0].lstrip('# ')}")
            for number, total, kept, today in drift(shipped, corpus(lang)):
                print(f"  {number}: {kept} of the snapshot's {total} paragraphs still in the sources ({today} today)")
        return 0
    OUT.mkdir(exist_ok=True)
    header = f"# snapshot of notebooks {NOTEBOOKS[0]}-{NOTEBOOKS[-1]}, taken {datetime.date.today().isoformat()}\n\n"
    for lang in LANGS:
        path = OUT / f"prose_{lang}.txt"
        text = header + corpus(lang)
        path.write_text(text, encoding="utf-8", newline="\n")
        size, words = len(text.encode()), len(text.split())
        print(f"wrote {path.relative_to(ROOT)}: {size:,} bytes, {words:,} words".replace(",", " "))
    return 0


if __name__ == "__main__":
    sys.exit(main())
