"""Byte-level BPE: text -> UTF-8 bytes -> learned merges -> token ids, and back.

The scheme of GPT-2 and of Hugging Face ``tokenizers``' ``ByteLevel`` + ``BPE`` (no prefix
space, no normaliser), with the same ids:

* :func:`pretokenize` splits the text with GPT-2's pattern (:data:`PATTERN`); merges never
  cross a piece boundary;
* the first 256 ids are the bytes, in the order of GPT-2's table of printable characters
  (:data:`BYTE_ORDER`: ``!`` .. ``~`` first, space is 220);
* :func:`train_bpe` repeats: count adjacent pairs over the pieces (weighted by how often each
  piece occurs), merge the most frequent into a new id; on a tie, the pair with the smallest
  ids ``(left, right)`` wins (``tokenizers``' rule). Counts are updated incrementally, only
  in the pieces that hold the merged pair;
* :meth:`ByteBPE.encode` applies the merges to each piece in the order they were learned;
  :meth:`ByteBPE.decode` joins the tokens' bytes and decodes them as UTF-8 (an incomplete
  character becomes U+FFFD, as in ``tokenizers``).

The pattern's letters, digits and spaces come from the ``regex`` module's Unicode tables; a
character that only the newer of its tables and ``tokenizers``' (Oniguruma's) knows, one added
in the latest Unicode version, may be split differently; on the characters Python's
``unicodedata`` knows, the two agree.

:func:`token_stats` measures a tokenisation of a text (tokens per word, per byte). The corpus of
notebook 11, the course's own prose, is :func:`~minitransformer.course.prose.prose` (its old name
here still works: :data:`MOVED`).
"""

from __future__ import annotations

import heapq
import itertools
import json
import re
import unicodedata
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import regex

from .i18n import error
from .moved import moved_names

__all__ = [
    "PATTERN",
    "BYTE_ORDER",
    "BYTE_ID",
    "BYTE_CHAR",
    "pretokenize",
    "count_pairs",
    "merge",
    "ByteBPE",
    "train_bpe",
    "words",
    "count_words",
    "TokenStats",
    "token_stats",
]

# GPT-2's pre-tokenisation: contractions, letters, digits, other symbols (each with an optional
# leading space), then runs of spaces.
PATTERN = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
_SPLIT = regex.compile(PATTERN)


def _byte_order() -> tuple[int, ...]:
    printable = [*range(ord("!"), ord("~") + 1), *range(0xA1, 0xAC + 1), *range(0xAE, 0xFF + 1)]
    return (*printable, *(b for b in range(256) if b not in printable))


BYTE_ORDER: tuple[int, ...] = _byte_order()  # id -> byte, for ids 0..255
BYTE_ID: dict[int, int] = {b: i for i, b in enumerate(BYTE_ORDER)}  # byte -> id
# byte -> the printable character GPT-2's table writes it as (a byte that prints is itself)
BYTE_CHAR: dict[int, str] = {b: chr(b if i < 188 else 256 + i - 188) for i, b in enumerate(BYTE_ORDER)}


def _text(text: Any) -> str:
    """``text`` if it is a string UTF-8 can write, else a clear error."""
    if not isinstance(text, str):
        raise error(
            f"el texto debe ser un str, no {type(text).__name__}.",
            f"the text must be a str, not {type(text).__name__}.",
        )
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as bad:
        code = f"U+{ord(text[bad.start]):04X}"
        raise error(
            f"el texto tiene un sustituto suelto ({code}, posición {bad.start}), que UTF-8 no puede escribir: "
            "no es un carácter.",
            f"the text holds a lone surrogate ({code}, position {bad.start}), which UTF-8 cannot write: it is not "
            "a character.",
        ) from None
    return text


def pretokenize(text: str) -> list[str]:
    """The pieces of ``text`` that BPE works inside (GPT-2's pattern); they join back to ``text``."""
    return _SPLIT.findall(_text(text))


def count_pairs(words: Mapping[tuple[int, ...], int] | Iterable[Sequence[int]]) -> Counter[tuple[int, int]]:
    """How often each adjacent pair of ids occurs inside the words (never across two words).

    Args:
        words: id sequences, or a mapping ``{ids: how often the word occurs}``.
    """
    items = words.items() if isinstance(words, Mapping) else ((w, 1) for w in words)
    counts: Counter[tuple[int, int]] = Counter()
    for ids, n in items:
        for pair in zip(ids, ids[1:]):
            counts[pair] += n
    return counts


def merge(ids: Sequence[int], pair: tuple[int, int], new_id: int) -> list[int]:
    """``ids`` with every occurrence of ``pair`` replaced by ``new_id``, from left to right
    (``a a a`` with the pair ``(a, a)`` gives ``new a``)."""
    out, i = [], 0
    while i < len(ids):
        if i + 1 < len(ids) and ids[i] == pair[0] and ids[i + 1] == pair[1]:
            out.append(new_id)
            i += 2
        else:
            out.append(ids[i])
            i += 1
    return out


def _check_size(vocab_size: Any, most: int | None = None) -> int:
    if isinstance(vocab_size, bool) or not isinstance(vocab_size, int) or vocab_size < 256:
        raise error(
            f"vocab_size debe ser un entero de al menos 256 (los 256 bytes son los primeros tokens), no {vocab_size!r}.",
            f"vocab_size must be an integer of at least 256 (the 256 bytes are the first tokens), not {vocab_size!r}.",
        )
    if most is not None and vocab_size > most:
        raise error(
            f"este tokenizador tiene {most} tokens: no se puede ampliar a {vocab_size} sin entrenar más.",
            f"this tokenizer has {most} tokens: it cannot grow to {vocab_size} without more training.",
        )
    return vocab_size


@dataclass(frozen=True)
class ByteBPE:
    """A trained byte-level BPE tokenizer.

    Args:
        merges: ``((left, right), new_id)`` in the order they were learned (their rank).
        vocab: the bytes of every token, by id (the 256 bytes first).
    """

    merges: tuple[tuple[tuple[int, int], int], ...]
    vocab: tuple[bytes, ...]
    _ranks: dict[tuple[int, int], tuple[int, int]] = field(init=False, repr=False, compare=False)
    _cache: dict[str, list[int]] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_ranks", {pair: (rank, new) for rank, (pair, new) in enumerate(self.merges)})
        object.__setattr__(self, "_cache", {})

    @property
    def vocab_size(self) -> int:
        return len(self.vocab)

    def _encode_piece(self, piece: str) -> list[int]:
        ids = self._cache.get(piece)
        if ids is None:
            ids = [BYTE_ID[b] for b in piece.encode("utf-8")]
            ranks = self._ranks
            while len(ids) > 1:
                best = min(zip(ids, ids[1:]), key=lambda p: ranks.get(p, (len(ranks),))[0])
                if best not in ranks:
                    break
                ids = merge(ids, best, ranks[best][1])
            if len(piece) < 64:
                self._cache[piece] = ids
        return list(ids)

    def encode(self, text: str) -> list[int]:
        """Token ids of ``text``."""
        return [i for piece in pretokenize(text) for i in self._encode_piece(piece)]

    def _ids(self, ids: Any) -> list[int]:
        if hasattr(ids, "tolist") and not isinstance(ids, (list, tuple)):  # a tensor or an array
            ids = ids.tolist()
        if isinstance(ids, (str, bytes)) or not isinstance(ids, Iterable):
            raise error(
                f"ids debe ser una lista de enteros, no {type(ids).__name__}.",
                f"ids must be a list of integers, not {type(ids).__name__}.",
            )
        ids = list(ids)
        for i in ids:
            if isinstance(i, bool) or not isinstance(i, int) or not 0 <= i < len(self.vocab):
                raise error(
                    f"el id {i!r} no es un token de este tokenizador (ids de 0 a {len(self.vocab) - 1}).",
                    f"the id {i!r} is not a token of this tokenizer (ids from 0 to {len(self.vocab) - 1}).",
                )
        return ids

    def token_bytes(self, ids: Iterable[int]) -> list[bytes]:
        """The bytes of each token."""
        return [self.vocab[i] for i in self._ids(ids)]

    def pieces(self, ids: Iterable[int]) -> list[str]:
        """Each token as readable text: the bytes of a character cut between two tokens as ``\\xNN``,
        control and invisible characters as Python escapes (``\\n``, ``\\u200d``)."""
        return [_readable(b) for b in self.token_bytes(ids)]

    def decode(self, ids: Iterable[int]) -> str:
        """The text of the ids (U+FFFD where the bytes are not valid UTF-8)."""
        return b"".join(self.token_bytes(ids)).decode("utf-8", errors="replace")

    def truncated(self, vocab_size: int) -> ByteBPE:
        """The tokenizer with only the merges learned until the vocabulary reached ``vocab_size``
        (training stops there: the same as training with that size)."""
        _check_size(vocab_size, len(self.vocab))
        made = [rank for rank, (_, new) in enumerate(self.merges) if new == vocab_size - 1]
        kept = self.merges[: made[0] + 1] if made else ()
        return ByteBPE(kept, self.vocab[:vocab_size])

    def save(self, path: str | Path) -> Path:
        """Write the merges as JSON (the vocabulary follows from them)."""
        path = Path(path)
        path.write_text(json.dumps({"merges": [[a, b, new] for (a, b), new in self.merges]}), encoding="utf-8")
        return path

    @classmethod
    def load(cls, path: str | Path) -> ByteBPE:
        """Read a tokenizer written by :meth:`save`."""
        merges = [((a, b), new) for a, b, new in json.loads(Path(path).read_text(encoding="utf-8"))["merges"]]
        return _from_merges(merges)


def _readable(data: bytes) -> str:
    text = data.decode("utf-8", errors="backslashreplace")
    return "".join(c.encode("unicode_escape").decode() if unicodedata.category(c)[0] == "C" else c for c in text)


def _from_merges(merges: Sequence[tuple[tuple[int, int], int]]) -> ByteBPE:
    vocab = [bytes([b]) for b in BYTE_ORDER]
    for (a, b), new in merges:
        if new == len(vocab):
            vocab.append(vocab[a] + vocab[b])
        elif new > len(vocab) or vocab[new] != vocab[a] + vocab[b]:
            raise error(
                f"la fusión {(a, b)} -> {new} no encaja con las anteriores.",
                f"the merge {(a, b)} -> {new} does not fit the earlier ones.",
            )
    return ByteBPE(tuple(merges), tuple(vocab))


def _merge_word(word: list[int], a: int, b: int, new: int) -> list[tuple[tuple[int, int], int]]:
    """Merge ``(a, b)`` in ``word`` in place, left to right; the pair counts that change."""
    changes = []
    i = 0
    while i < len(word):
        if word[i] == a and i + 1 < len(word) and word[i + 1] == b:
            if i > 0:
                changes += [((word[i - 1], a), -1), ((word[i - 1], new), 1)]
            word[i : i + 2] = [new]
            if i + 1 < len(word):
                changes += [((b, word[i + 1]), -1), ((new, word[i + 1]), 1)]
        i += 1
    return changes


def train_bpe(text: str, vocab_size: int) -> ByteBPE:
    """Learn byte-level BPE merges on ``text`` until the vocabulary has ``vocab_size`` tokens
    (or no pair is left).

    The most frequent pair is merged first; on a tie, the smallest ``(left, right)`` ids.
    A merge whose bytes are already a token reuses its id (as ``tokenizers`` does).
    """
    _check_size(vocab_size)
    word_counts = Counter(pretokenize(text))
    words = [[BYTE_ID[b] for b in w.encode("utf-8")] for w in word_counts]
    counts = list(word_counts.values())
    vocab = [bytes([b]) for b in BYTE_ORDER]
    token_id = {t: i for i, t in enumerate(vocab)}

    pair_counts: dict[tuple[int, int], int] = {}
    where: dict[tuple[int, int], set[int]] = {}
    for w, (ids, n) in enumerate(zip(words, counts)):
        for pair in zip(ids, ids[1:]):
            pair_counts[pair] = pair_counts.get(pair, 0) + n
            where.setdefault(pair, set()).add(w)
    order = itertools.count()  # only to break ties between two entries of the same pair
    heap = [(-pair_counts[p], p, next(order), pos) for p, pos in where.items()]
    heapq.heapify(heap)

    merges: list[tuple[tuple[int, int], int]] = []
    while len(vocab) < vocab_size and heap:
        count, pair, _, pos = heapq.heappop(heap)
        if -count != pair_counts[pair]:  # counted before earlier merges changed it: look again
            heapq.heappush(heap, (-pair_counts[pair], pair, next(order), pos))
            continue
        if -count < 1:
            break
        new_bytes = vocab[pair[0]] + vocab[pair[1]]
        new = token_id.get(new_bytes, len(vocab))
        if new == len(vocab):
            vocab.append(new_bytes)
            token_id[new_bytes] = new
        merges.append((pair, new))
        grown: dict[tuple[int, int], set[int]] = {}
        for w in pos:
            for changed, sign in _merge_word(words[w], *pair, new):
                pair_counts[changed] = pair_counts.get(changed, 0) + sign * counts[w]
                if sign > 0:
                    grown.setdefault(changed, set()).add(w)
        for changed, where_now in grown.items():
            if pair_counts[changed] > 0:
                heapq.heappush(heap, (-pair_counts[changed], changed, next(order), where_now))
    return ByteBPE(tuple(merges), tuple(vocab))


# ------------------------------------------------------------------------- measures of a tokenisation

_WORD = re.compile(r"[^\W\d_]+")  # a run of letters


def words(text: str) -> list[str]:
    """The words of ``text``: runs of letters (digits and punctuation are not words)."""
    return _WORD.findall(_text(text))


def count_words(text: str) -> int:
    """How many words :func:`words` finds in ``text``."""
    return len(words(text))


@dataclass(frozen=True)
class TokenStats:
    """How much text each token carries."""

    tokens: int
    words: int
    bytes: int

    @property
    def tokens_per_word(self) -> float:
        return self.tokens / self.words

    @property
    def bytes_per_token(self) -> float:
        return self.bytes / self.tokens


def token_stats(encode: Callable[[str], Sequence[Any]], text: str) -> TokenStats:
    """Tokens, words and UTF-8 bytes of ``text`` under a tokenizer's ``encode``."""
    return TokenStats(len(encode(_text(text))), count_words(text), len(text.encode("utf-8")))


# The name that lived here before the course's prose joined the course's props: saved copies of
# notebook 11 import it from here.
MOVED = {"prose": "course.prose", "HELD_OUT": "course.prose"}
__getattr__ = moved_names(__name__, MOVED)
