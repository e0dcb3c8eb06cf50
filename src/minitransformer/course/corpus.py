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

The corpus is small: a line is fixed by its language, its first number and how many numbers
it holds, so there are only ``2 · Σ (max_number - c + 1)`` distinct lines (780 for numbers
below 100 and 2 to 5 per line), each drawn with a known probability. That bounds what any
model can do, and both bounds are computed exactly here: the next-token loss cannot fall
below :meth:`CountingCorpus.entropy_per_token`, and n lines drawn from the corpus are, on
average, :meth:`CountingCorpus.expected_distinct` distinct. Lines given as ``held_out`` are
never drawn, so that a model can be measured on lines it has never seen.

Stable API (notebooks 09 and 10 build on it): ``CountingCorpus(max_number, min_count,
max_count, held_out)``, ``.vocab``, ``.line``, ``.batch``, ``.prompt``, ``.prompts``,
``.is_valid``, ``.validity``, ``.parse``, ``.distribution``, ``.entropy_per_token``,
``.held_out_rule_loss``, ``.expected_distinct``.

Letters: B batch, L line length.
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterable
from dataclasses import dataclass

import torch
from torch import Tensor

from ..data import Vocab, pad_sequences, spell_number
from ..i18n import check_lang, error

__all__ = ["LANG_TAGS", "SEPARATOR", "CountingCorpus", "LineKey", "ParsedLine"]

LineKey = tuple[str, int, int]  # (language, first number, how many numbers): one line of the corpus

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
        held_out: lines ``(lang, start, count)`` that are never drawn (for measuring a model
            on lines it has not seen).

    A line is drawn as: a language (uniform), a count (uniform in [min_count, max_count]),
    a first number (uniform among those whose line fits below ``max_number``); a held-out
    line is drawn again.

    The vocabulary: ``<pad>`` = 0, ``<bos>`` = 1, ``<eos>`` = 2, ``<unk>`` = 3, the tags
    ``<es>`` and ``<en>``, ``,`` and every word the numbers use.
    """

    def __init__(
        self, max_number: int = 1000, min_count: int = 2, max_count: int = 6, held_out: Iterable[LineKey] = ()
    ):
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
        self._lines: dict[LineKey, list[int]] = {}
        self.held_out = frozenset(held_out)
        every = set(self.keys())
        if not self.held_out <= every or self.held_out == every:
            raise error(
                "held_out debe ser un conjunto de líneas (idioma, inicio, cuántos) del corpus, sin ser todas",
                "held_out must be a set of the corpus's lines (lang, start, count), not all of them",
            )

    @property
    def longest_line(self) -> int:
        """Tokens in the longest line (with ``<bos>`` and ``<eos>``)."""
        return max(self.max_count * (1 + max(len(s.split()) for s in self.spelled[lang])) + 2 for lang in LANG_TAGS)

    def line(self, start: int, count: int, lang: str) -> list[int]:
        """Ids of the line counting ``count`` numbers from ``start`` in ``lang``."""
        key = (lang, start, count)
        if key not in self._lines:  # spelled once: training draws the same lines again and again
            check_lang(lang)
            if start < 0 or count < 1 or start + count > self.max_number:
                raise error(
                    f"los números deben estar en [0, {self.max_number})",
                    f"the numbers must lie in [0, {self.max_number})",
                )
            words = [LANG_TAGS[lang]]
            for i, n in enumerate(range(start, start + count)):
                words += ([SEPARATOR] if i else []) + spell_number(n, lang).split()
            self._lines[key] = self.vocab.encode(words, bos=True, eos=True)
        return list(self._lines[key])

    def random_line(self, rng: random.Random) -> list[int]:
        """A line with a random language, length and start (never a held-out one)."""
        while True:
            lang = rng.choice(list(LANG_TAGS))
            count = rng.randint(self.min_count, self.max_count)
            start = rng.randrange(self.max_number - count + 1)
            if (lang, start, count) not in self.held_out:
                return self.line(start, count, lang)

    def keys(self) -> list[LineKey]:
        """Every line the generator can write, held out or not, as ``(lang, start, count)``."""
        return [
            (lang, start, count)
            for lang in LANG_TAGS
            for count in range(self.min_count, self.max_count + 1)
            for start in range(self.max_number - count + 1)
        ]

    def distribution(self, held_out: bool = False) -> dict[LineKey, float]:
        """The probability of each line: of the lines :meth:`batch` draws (``held_out=False``),
        or of the held-out lines had they been drawn as the generator draws every line."""
        counts = self.max_count - self.min_count + 1
        weights = {
            key: 1 / (len(LANG_TAGS) * counts * (self.max_number - key[2] + 1))
            for key in self.keys()
            if (key in self.held_out) == held_out
        }
        total = sum(weights.values())
        return {key: w / total for key, w in weights.items()}

    def entropy_per_token(self) -> float:
        """The lowest next-token loss any model can reach on the lines :meth:`batch` draws, in
        nats per predicted token: the entropy of a line, -Σ p log p (the sum of the generator's
        next-token entropies along it), over the tokens a line predicts (all but ``<bos>``)."""
        p = self.distribution()
        entropy = -sum(q * math.log(q) for q in p.values())
        tokens = sum(q * (len(self.line(start, count, lang)) - 1) for (lang, start, count), q in p.items())
        return entropy / tokens

    def held_out_rule_loss(self) -> float:
        """The loss per predicted token, on the held-out lines, of a model that knows the rule
        but not which lines were held out: the generator that draws every line. A model that
        also learned which lines training never showed does worse on them."""
        if not self.held_out:
            raise error("este corpus no aparta ninguna línea (held_out)", "this corpus sets no line aside (held_out)")
        every = CountingCorpus(self.max_number, self.min_count, self.max_count).distribution()
        held = self.distribution(held_out=True)
        loss = -sum(q * math.log(every[key]) for key, q in held.items())
        tokens = sum(q * (len(self.line(start, count, lang)) - 1) for (lang, start, count), q in held.items())
        return loss / tokens

    def expected_distinct(self, n: int) -> float:
        """The expected share of distinct lines among ``n`` lines drawn as :meth:`batch` draws
        them: Σ (1 - (1 - p)^n) / n. A model that writes the corpus perfectly gets this much
        variety; writing more means writing lines the corpus does not hold."""
        return sum(1 - (1 - q) ** n for q in self.distribution().values()) / n

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
