"""The course's own prose as a corpus (notebook 11's): the Markdown cells of notebooks 00-10, in
Spanish or English, shipped with the package (``corpora/``, written by ``tools/make_prose_corpus.py``).
"""

from __future__ import annotations

import re
from importlib.resources import files

from ..i18n import check_lang, error

__all__ = ["HELD_OUT", "prose"]

HELD_OUT = "10"  # the notebook whose prose is kept out of training


def prose(lang: str, part: str = "all") -> str:
    """The course's prose in ``lang``: ``"train"`` (notebooks 00-09), ``"test"`` (notebook 10,
    never trained on) or ``"all"``. Paragraphs separated by blank lines."""
    check_lang(lang)
    if part not in ("all", "train", "test"):
        raise error(
            f"part debe ser 'all', 'train' o 'test', no {part!r}.",
            f"part must be 'all', 'train' or 'test', not {part!r}.",
        )
    text = (files("minitransformer") / "corpora" / f"prose_{lang}.txt").read_text(encoding="utf-8")
    notebooks = re.split(r"^§ (\d\d)\n\n", text, flags=re.M)[1:]
    chosen = [
        body.strip()
        for number, body in zip(notebooks[::2], notebooks[1::2])
        if part == "all" or (number == HELD_OUT) == (part == "test")
    ]
    return "\n\n".join(chosen)
