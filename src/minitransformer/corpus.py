"""A toy corpus for language models, generated in code: counting in words.

Each line is a language tag and a run of consecutive numbers written in words
(:func:`~minitransformer.data.spell_number`), separated by commas::

    <bos> <es> treinta y nueve , cuarenta , cuarenta y uno <eos>
    <bos> <en> ninety-eight , ninety-nine , one hundred <eos>

A model that has learned the corpus continues any prompt with the right numbers, in the
prompt's language, and ends the line. :meth:`CountingCorpus.is_valid` checks exactly that
for a whole line, so a sampled continuation can be judged right or wrong:

* it starts with ``<bos>`` and a language tag;
* then at least ``min_count`` numbers below ``max_number``, each spelled as
  :func:`~minitransformer.data.spell_number` spells it in the tag's language, each one more
  than the one before, separated by ``,``;
* then ``<eos>`` (a line cut short is not valid); nothing but padding after it.

Stable API (notebooks 09 and 10 build on it): ``CountingCorpus(max_number, min_count,
max_count)``, ``.vocab``, ``.line``, ``.batch``, ``.prompt``, ``.prompts``, ``.is_valid``,
``.validity``, ``.parse``.

Letters: B batch, L line length.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

import torch
from torch import Tensor

from .data import Vocab, pad_sequences, spell_number
from .i18n import check_lang, error

__all__ = ["LANG_TAGS", "SEPARATOR", "CountingCorpus", "ParsedLine"]

LANG_TAGS = {"es": "<es>", "en": "<en>"}
SEPARATOR = ","


@dataclass
class ParsedLine:
    """What :meth:`CountingCorpus.parse` reads in a line."""

    lang: str | None  # "es", "en", or None without a valid tag
    numbers: list[int | None]  # each number read, None for words that spell no number
    ended: bool  # True if the line ends with <eos>
    valid: bool  # see CountingCorpus.is_valid


class CountingCorpus:
    """Lines of consecutive numbers in Spanish or English words.

    Args:
        max_number: numbers n with 0 ≤ n < max_number (at most 1 000 000).
        min_count, max_count: how many numbers a line holds (drawn uniformly).

    The vocabulary: ``<pad>`` = 0, ``<bos>`` = 1, ``<eos>`` = 2, ``<unk>`` = 3, the tags
    ``<es>`` and ``<en>``, ``,`` and every word the numbers use.
    """

    def __init__(self, max_number: int = 1000, min_count: int = 2, max_count: int = 6):
        if not 2 <= max_number <= 1_000_000:
            raise error(
                f"max_number debe estar entre 2 y 1 000 000, no {max_number}",
                f"max_number must lie between 2 and 1 000 000, got {max_number}",
            )
        if not 1 <= min_count <= max_count < max_number:
            raise error(
                f"hace falta 1 ≤ min_count ≤ max_count < max_number, no {min_count}, {max_count}",
                f"1 ≤ min_count ≤ max_count < max_number is needed, got {min_count}, {max_count}",
            )
        self.max_number, self.min_count, self.max_count = max_number, min_count, max_count
        words: dict[str, None] = {}
        self.spelled: dict[str, dict[str, int]] = {}  # lang -> spelling -> number
        for lang in LANG_TAGS:
            self.spelled[lang] = {}
            for n in range(max_number):
                text = spell_number(n, lang)
                self.spelled[lang][text] = n
                words.update(dict.fromkeys(text.split()))
        self.vocab = Vocab([*LANG_TAGS.values(), SEPARATOR, *words])
        self.tag_lang = {self.vocab.index[t]: lang for lang, t in LANG_TAGS.items()}
        self.sep_id = self.vocab.index[SEPARATOR]

    @property
    def longest_line(self) -> int:
        """Tokens in the longest line (with ``<bos>`` and ``<eos>``)."""
        return max(self.max_count * (1 + max(len(s.split()) for s in self.spelled[lang])) + 2 for lang in LANG_TAGS)

    def line(self, start: int, count: int, lang: str) -> list[int]:
        """Ids of the line counting ``count`` numbers from ``start`` in ``lang``."""
        check_lang(lang)
        if start < 0 or count < 1 or start + count > self.max_number:
            raise error(
                f"los números deben estar en [0, {self.max_number})", f"the numbers must lie in [0, {self.max_number})"
            )
        words = [LANG_TAGS[lang]]
        for i, n in enumerate(range(start, start + count)):
            words += ([SEPARATOR] if i else []) + spell_number(n, lang).split()
        return self.vocab.encode(words, bos=True, eos=True)

    def random_line(self, rng: random.Random) -> list[int]:
        """A line with a random language, length and start."""
        lang = rng.choice(list(LANG_TAGS))
        count = rng.randint(self.min_count, self.max_count)
        return self.line(rng.randrange(self.max_number - count + 1), count, lang)

    def batch(self, batch_size: int, rng: random.Random) -> Tensor:
        """``batch_size`` random lines, right-padded. Shapes: -> (B, L)."""
        return pad_sequences([self.random_line(rng) for _ in range(batch_size)], self.vocab.pad_id)

    def prompt(self, lang: str, numbers: tuple[int, ...] | list[int] = ()) -> list[int]:
        """Ids of the start of a line: ``<bos>``, the tag and, if given, the numbers
        (each followed by ``,``)."""
        check_lang(lang)
        words = [LANG_TAGS[lang]]
        for n in numbers:
            words += spell_number(n, lang).split() + [SEPARATOR]
        return self.vocab.encode(words, bos=True)

    def prompts(self, n: int, rng: random.Random, numbers: int = 1) -> Tensor:
        """``n`` random prompts with ``numbers`` numbers each, left-padded (for
        generation). Shapes: -> (n, L)."""
        rows = []
        for _ in range(n):
            lang = rng.choice(list(LANG_TAGS))
            start = rng.randrange(self.max_number - self.max_count)
            rows.append(self.prompt(lang, list(range(start, start + numbers))))
        width = max(len(r) for r in rows)
        return torch.tensor([[self.vocab.pad_id] * (width - len(r)) + r for r in rows])

    def parse(self, ids: Tensor | list[int]) -> ParsedLine:
        """Read a line of ids (padding anywhere is skipped) and judge it."""
        ids = [i for i in (ids.tolist() if isinstance(ids, Tensor) else list(ids)) if i != self.vocab.pad_id]
        if len(ids) < 2 or ids[0] != self.vocab.bos_id or ids[1] not in self.tag_lang:
            return ParsedLine(None, [], False, False)
        lang = self.tag_lang[ids[1]]
        body = ids[2:]
        ended = self.vocab.eos_id in body
        if ended:
            body = body[: body.index(self.vocab.eos_id)]
            rest = ids[2 + len(body) + 1 :]
        else:
            rest = []
        chunks, current = [], []
        for i in body:
            if i == self.sep_id:
                chunks.append(current)
                current = []
            else:
                current.append(i)
        chunks.append(current)
        numbers = [self.spelled[lang].get(" ".join(self.vocab.tokens[i] for i in c)) for c in chunks]
        valid = (
            ended
            and not rest
            and len(numbers) >= self.min_count
            and all(n is not None for n in numbers)
            and all(b == a + 1 for a, b in zip(numbers, numbers[1:]))
        )
        return ParsedLine(lang, numbers, ended, valid)

    def is_valid(self, ids: Tensor | list[int]) -> bool:
        """True if the line counts right (see the module's docstring)."""
        return self.parse(ids).valid

    def validity(self, lines: Tensor) -> float:
        """Fraction of valid lines. Shapes: lines (B, L)."""
        return sum(self.is_valid(row) for row in lines) / len(lines)

    def decode(self, ids: Tensor | list[int]) -> str:
        """The words of a line, without ``<bos>``, padding and what follows ``<eos>``."""
        return self.vocab.decode(ids)
