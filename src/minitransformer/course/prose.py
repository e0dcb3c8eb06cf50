"""The course's own prose as a corpus (notebooks 11 and 12): the Markdown cells of notebooks 00-11, in
Spanish or English, a snapshot shipped with the package (``corpora/``, written by ``tools/make_prose_corpus.py``,
dated on its first line).
"""

from __future__ import annotations

import re
from importlib.resources import files

from ..i18n import check_lang, error

__all__ = ["HELD_OUT", "prose", "snapshot_date"]

HELD_OUT = "10"  # the notebook whose prose is kept out of training


def _text(lang: str) -> str:
    return (files("minitransformer") / "corpora" / f"prose_{lang}.txt").read_text(encoding="utf-8")


def snapshot_date() -> str:
    """The day the snapshot was taken (``"2026-11-27"``), the same for both languages."""
    found = re.search(r"taken (\d{4}-\d\d-\d\d)", _text("en").splitlines()[0])
    return found.group(1) if found else ""


def prose(lang: str, part: str = "all") -> str:
    """The course's prose in ``lang``: ``"train"`` (every notebook of the snapshot but 10), ``"test"`` (notebook 10,
    never trained on) or ``"all"``. Paragraphs separated by blank lines."""
    check_lang(lang)
    if part not in ("all", "train", "test"):
        raise error(
            f"part debe ser 'all', 'train' o 'test', no {part!r}.",
            f"part must be 'all', 'train' or 'test', not {part!r}.",
        )
    text = _text(lang)
    notebooks = re.split(r"^§ (\d\d)\n\n", text, flags=re.M)[1:]
    chosen = [
        body.strip()
        for number, body in zip(notebooks[::2], notebooks[1::2])
        if part == "all" or (number == HELD_OUT) == (part == "test")
    ]
    return "\n\n".join(chosen)
