"""Byte-level BPE: text -> UTF-8 bytes -> learned merges -> token ids, and back.

The scheme of GPT-2 and of Hugging Face ``tokenizers``' ``ByteLevel`` + ``BPE`` (no prefix
space, no normaliser), with the same ids:

* :func:`pretokenize` splits the text with GPT-2's pattern (:data:`PATTERN`); merges never
  cross a piece boundary;
* the first 256 ids are the bytes, in the order of GPT-2's table of printable characters
  (:data:`BYTE_ORDER`: ``!`` .. ``~`` first, space is 220);
* :func:`train_bpe` repeats: count adjacent pairs over the pieces (weighted by how often each
  piece occurs), merge the most frequent into a new id; on a tie, the pair with the smallest
  ids ``(left, right)`` wins (``tokenizers``' rule; ``tie=`` names minbpe's and CS336's). Counts
  are updated incrementally, only in the pieces that hold the merged pair;
* special tokens (``special_tokens=``) take the ids after the merges (as GPT-2's
  ``<|endoftext|>``); the text is cut at them, so no merge crosses them. :meth:`ByteBPE.encode`
  turns their text into their id only where ``allowed_special`` says so (tiktoken's arguments);
* :meth:`ByteBPE.encode` applies the merges to each piece by rank, leftmost first;
  :meth:`ByteBPE.encode_iterable` gives the same ids for text read in chunks;
  :meth:`ByteBPE.decode` joins the tokens' bytes and decodes them as UTF-8 (an incomplete
  character becomes U+FFFD, as in ``tokenizers``), and :class:`StreamDecoder` does it as ids come;
* :meth:`ByteBPE.save` / :meth:`ByteBPE.load` write and read JSON; :meth:`ByteBPE.save_gpt2` /
  :meth:`ByteBPE.load_gpt2` GPT-2's ``encoder.json`` + ``vocab.bpe``, whose ids are ours.

The pattern's letters, digits and spaces come from the ``regex`` module's Unicode tables; a
character that only the newer of its tables and ``tokenizers``' (Oniguruma's) knows, one added
in the latest Unicode version, may be split differently; on the characters Python's
``unicodedata`` knows, the two agree.

:func:`viterbi_split` is the other family's encoder: the most probable split of a text under a Unigram model
(SentencePiece's, T5's), Viterbi's dynamic programme.

:func:`token_stats` measures a tokenisation of a text (tokens per word, per byte). The corpus of
notebook 11, the course's own prose, is :func:`~minitransformer.course.prose.prose`.
"""

from __future__ import annotations

import codecs
import contextlib
import heapq
import itertools
import json
import numbers
import operator
import re
import unicodedata
from collections import Counter, OrderedDict
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import regex

from .i18n import error

__all__ = [
    "PATTERN",
    "BYTE_ORDER",
    "BYTE_ID",
    "BYTE_CHAR",
    "CHAR_BYTE",
    "pretokenize",
    "count_pairs",
    "merge",
    "ByteBPE",
    "StreamDecoder",
    "CACHE_SIZE",
    "TIES",
    "train_bpe",
    "viterbi_split",
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
CHAR_BYTE: dict[str, int] = {c: b for b, c in BYTE_CHAR.items()}  # and back


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


def _check_size(vocab_size: Any, most: int | None = None, n_special: int = 0) -> int:
    least = 256 + n_special
    boolean = isinstance(vocab_size, bool) or str(getattr(vocab_size, "dtype", "")) in ("bool", "torch.bool")
    if not boolean:
        with contextlib.suppress(TypeError):  # any integer, numpy's and torch's too, as tokenizers takes them
            vocab_size = operator.index(vocab_size)
    if boolean or not isinstance(vocab_size, int) or vocab_size < least:
        es_why = "los 256 bytes son los primeros tokens" + (f", y hay {n_special} especiales" if n_special else "")
        en_why = "the 256 bytes are the first tokens" + (
            f", and there are {n_special} special ones" if n_special else ""
        )
        raise error(
            f"vocab_size debe ser un entero de al menos {least} ({es_why}), no {vocab_size!r}.",
            f"vocab_size must be an integer of at least {least} ({en_why}), not {vocab_size!r}.",
        )
    if most is not None and vocab_size > most:
        raise error(
            f"este tokenizador tiene {most} tokens: no se puede ampliar a {vocab_size} sin entrenar más.",
            f"this tokenizer has {most} tokens: it cannot grow to {vocab_size} without more training.",
        )
    return vocab_size


def _check_specials(special_tokens: Any) -> tuple[str, ...]:
    if isinstance(special_tokens, str) or not isinstance(special_tokens, Iterable):
        raise error(
            f"special_tokens debe ser una lista de textos, no {type(special_tokens).__name__}.",
            f"special_tokens must be a list of strings, not {type(special_tokens).__name__}.",
        )
    specials = tuple(special_tokens)
    for s in specials:
        if not isinstance(s, str) or not s:
            raise error(
                f"cada token especial debe ser un texto no vacío, no {s!r}.",
                f"each special token must be a non-empty string, not {s!r}.",
            )
        _text(s)
    if len(set(specials)) != len(specials):
        twice = next(s for s in specials if specials.count(s) > 1)
        raise error(f"el token especial {twice!r} está dos veces.", f"the special token {twice!r} is there twice.")
    return specials


def _special_regex(specials: Iterable[str]) -> Any:
    """A pattern that finds the leftmost special token, the longest one where several start
    (``tokenizers``' rule); ``None`` when there are none."""
    ordered = sorted(specials, key=lambda s: (-len(s), s))
    return regex.compile("|".join(regex.escape(s) for s in ordered)) if ordered else None


def _split_specials(text: str, pattern: Any) -> Iterator[tuple[str, bool]]:
    """``(part, is_special)`` in order: the text cut at every match of ``pattern``."""
    start = 0
    if pattern is not None:
        for m in pattern.finditer(text):
            if m.start() > start:
                yield text[start : m.start()], False
            yield m.group(), True
            start = m.end()
    if start < len(text):
        yield text[start:], False


def _as_id(i: Any, n: int | None = None) -> int:
    """``i`` as a Python int (numpy and torch integers too), else a clear error; below ``n`` if given."""
    boolean = isinstance(i, bool) or str(getattr(i, "dtype", "")) in ("bool", "torch.bool")  # numpy's, torch's
    if boolean or not hasattr(type(i), "__index__"):
        raise error(
            f"el id {i!r} no es un token de este tokenizador: los ids son enteros, no {type(i).__name__}.",
            f"the id {i!r} is not a token of this tokenizer: ids are integers, not {type(i).__name__}.",
        )
    i = operator.index(i)
    if i < 0 or (n is not None and i >= n):
        top = f"de 0 a {n - 1}" if n is not None else "de 0 en adelante"
        top_en = f"from 0 to {n - 1}" if n is not None else "from 0 up"
        raise error(
            f"el id {i} no es un token de este tokenizador (ids {top}).",
            f"the id {i} is not a token of this tokenizer (ids {top_en}).",
        )
    return i


CACHE_SIZE = 10_000  # pieces kept by each tokenizer's encode cache (only pieces shorter than 64 characters)
_HOLD = 4  # characters a piece must end before the end of the text seen so far to be final (encode_iterable)


@dataclass(frozen=True)
class ByteBPE:
    """A trained byte-level BPE tokenizer.

    Args:
        merges: ``((left, right), new_id)`` in the order they were learned (their rank).
        vocab: the bytes of every token, by id (special tokens last).
        special_tokens: the texts of the special tokens; their ids are the last ones, in this order.

    Encoding applies merges by rank, leftmost first (``tokenizers``' and tiktoken's rule), in
    O(n log n) for a piece of n bytes. Pieces shorter than 64 characters are cached, at most
    :data:`CACHE_SIZE` of them (the least recently used leave first).
    """

    merges: tuple[tuple[tuple[int, int], int], ...]
    vocab: tuple[bytes, ...]
    special_tokens: tuple[str, ...] = ()
    _rank: dict[int, int] = field(init=False, repr=False, compare=False)
    _made: list[int] = field(init=False, repr=False, compare=False)
    _byte_ids: list[int] = field(init=False, repr=False, compare=False)
    _byte_table: bytes | None = field(init=False, repr=False, compare=False)
    _byte_pair_rank: np.ndarray = field(init=False, repr=False, compare=False)
    _special_ids: dict[str, int] = field(init=False, repr=False, compare=False)
    _cache: OrderedDict[str, list[int]] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        merges = tuple(((operator.index(a), operator.index(b)), operator.index(new)) for (a, b), new in self.merges)
        object.__setattr__(self, "merges", merges)  # numpy or torch integers become ints
        object.__setattr__(self, "special_tokens", tuple(self.special_tokens))
        n_regular = len(self.vocab) - len(self.special_tokens)
        byte_ids = [-1] * 256
        for i, token in enumerate(self.vocab[:n_regular]):
            if len(token) == 1:
                byte_ids[token[0]] = i
        if -1 in byte_ids:
            missing = byte_ids.index(-1)
            raise error(
                f"al vocabulario le falta el byte {missing:#04x}: cada byte debe ser un token.",
                f"the vocabulary lacks the byte {missing:#04x}: every byte must be a token.",
            )
        stride = len(self.vocab)
        set_ = object.__setattr__
        set_(self, "_rank", {a * stride + b: rank for rank, ((a, b), _) in enumerate(self.merges)})
        set_(self, "_made", [new for _, new in self.merges])
        set_(self, "_byte_ids", byte_ids)
        set_(self, "_byte_table", bytes(byte_ids) if max(byte_ids) < 256 else None)  # for bytes.translate
        byte_pair_rank = np.full((256, 256), -1, dtype=np.int32)  # the bytes' pairs' ranks, for long pieces
        if self._byte_table is not None:
            for rank, ((a, b), _) in enumerate(merges):
                if a < 256 and b < 256:
                    byte_pair_rank[a, b] = rank
        set_(self, "_byte_pair_rank", byte_pair_rank)
        set_(self, "_special_ids", {s: n_regular + k for k, s in enumerate(self.special_tokens)})
        set_(self, "_cache", OrderedDict())

    @property
    def vocab_size(self) -> int:
        return len(self.vocab)

    # ------------------------------------------------------------------ encoding

    def _bpe(self, data: bytes) -> list[int]:
        """The merges applied to one piece's bytes: the pair of lowest rank first, leftmost among equals.

        The pairs wait in order of (rank, position), those of the bytes in a sorted list and those
        that merges make in a heap, and the tokens form a doubly linked list: each merge costs
        O(log n) (as in tiktoken and ``tokenizers``), not a pass over the piece."""
        table = self._byte_table
        ids = list(data.translate(table)) if table is not None else [self._byte_ids[b] for b in data]
        n = len(ids)
        if n < 2:
            return ids
        stride, made = len(self.vocab), self._made
        get = self._rank.get
        shift = n.bit_length()  # an entry is rank << shift | position: one int, ordered by rank then position
        mask = (1 << shift) - 1
        if n < 256:
            pair_rank = [get(a * stride + b, -1) for a, b in zip(ids, ids[1:])]  # rank of the pair at i, or -1
            waiting = sorted(r << shift | i for i, r in enumerate(pair_rank) if r >= 0)
        else:  # the same, with numpy doing the arithmetic
            if table is not None:  # the bytes' ids are 0-255: a table of their pairs' ranks
                array = np.frombuffer(data.translate(table), dtype=np.uint8)
                ranks = self._byte_pair_rank[array[:-1], array[1:]].astype(np.int64)
            else:
                array = np.array(ids, dtype=np.int64)
                ranks = np.fromiter(
                    map(get, (array[:-1] * stride + array[1:]).tolist(), itertools.repeat(-1)), np.int64
                )
            pair_rank = ranks.tolist()
            at = np.flatnonzero(ranks >= 0)
            waiting = np.sort(ranks[at] << shift | at).tolist()
        if not waiting:
            return ids
        end = len(self.merges) << shift  # after every entry
        waiting.append(end)
        made_now = [end]  # a heap
        pair_rank += [-1, -1]  # for the last token (no pair) and for the end
        ids.append(-stride * stride)  # the end, also at position -1: no pair with it has a rank
        after = list(range(1, n + 2))  # the next live position (n: the end)
        before = list(range(-1, n))  # the previous live position (-1: the end)
        pop, push = heapq.heappop, heapq.heappush
        w, next_waiting = 0, waiting[0]
        while True:
            if made_now[0] < next_waiting:
                key = pop(made_now)
            elif next_waiting == end:
                break
            else:
                key = next_waiting
                w += 1
                next_waiting = waiting[w]
            i, r = key & mask, key >> shift
            if pair_rank[i] != r:  # that pair is gone (merged, or its neighbour changed)
                continue
            new = made[r]
            ids[i] = new
            j = after[i]
            ids[j] = pair_rank[j] = -1  # j joins i
            k = after[j]
            after[i], before[k] = k, i
            r = pair_rank[i] = get(new * stride + ids[k], -1)  # the new pairs: (new, right) and (left, new)
            if r >= 0:
                push(made_now, r << shift | i)
            p = before[i]
            r = pair_rank[p] = get(ids[p] * stride + new, -1)
            if r >= 0:
                push(made_now, r << shift | p)
        ids.pop()
        return [t for t in ids if t >= 0]

    def _encode_pieces(self, pieces: Iterable[str]) -> list[int]:
        out: list[int] = []
        cache = self._cache
        get, touch = cache.get, cache.move_to_end
        for piece in pieces:
            ids = get(piece)
            if ids is not None:
                touch(piece)  # the most recently used: the last to leave
            else:
                ids = self._bpe(piece.encode("utf-8"))
                if len(piece) < 64:
                    cache[piece] = ids
                    if len(cache) > CACHE_SIZE:
                        cache.popitem(last=False)
            out += ids
        return out

    def _encode_ordinary(self, text: str) -> list[int]:
        return self._encode_pieces(_SPLIT.findall(text))

    def _special_choice(self, allowed_special: Any, disallowed_special: Any) -> tuple[Any, Any]:
        """The patterns of the allowed special tokens and of the disallowed ones (``None``: none)."""
        known = set(self.special_tokens)

        def chosen(value: Any, name: str) -> set[str]:
            if value == "all":
                return set(known)
            if isinstance(value, str) or not isinstance(value, Iterable):
                raise error(
                    f"{name} debe ser 'all' o un conjunto de tokens especiales, no {value!r}.",
                    f"{name} must be 'all' or a set of special tokens, not {value!r}.",
                )
            value = set(value)
            if value - known:
                stranger = sorted(map(str, value - known))[0]
                raise error(
                    f"{stranger!r} no es un token especial de este tokenizador ({name}); los suyos: "
                    f"{list(self.special_tokens)}.",
                    f"{stranger!r} is not a special token of this tokenizer ({name}); its own: "
                    f"{list(self.special_tokens)}.",
                )
            return value

        allowed = chosen(allowed_special, "allowed_special")
        if disallowed_special == "all":
            disallowed = known - allowed
        else:
            disallowed = chosen(disallowed_special, "disallowed_special")
        return _special_regex(allowed), _special_regex(disallowed)

    def _refuse(self, text: str, disallowed: Any, start: int = 0) -> None:
        found = disallowed.search(text, start) if disallowed is not None else None
        if found:
            raise error(
                f"el texto contiene el token especial {found.group()!r}. Para codificarlo como token especial, "
                f"pasa allowed_special={{{found.group()!r}}} (o 'all'); para codificarlo como texto normal, "
                "disallowed_special=().",
                f"the text contains the special token {found.group()!r}. To encode it as the special token, pass "
                f"allowed_special={{{found.group()!r}}} (or 'all'); to encode it as plain text, "
                "disallowed_special=().",
            )

    def encode(self, text: str, *, allowed_special: Any = (), disallowed_special: Any = "all") -> list[int]:
        """Token ids of ``text``.

        Args:
            allowed_special: ``"all"`` or the special tokens whose text becomes their id.
            disallowed_special: ``"all"`` (every special token not allowed) or the special tokens whose
                text in ``text`` is an error; the text of the others is encoded as plain text.
                ``disallowed_special=()`` encodes every special token's text as plain text.
                These are tiktoken's arguments and defaults.
        """
        text = _text(text)
        if not self.special_tokens and allowed_special == () and disallowed_special == "all":
            return self._encode_ordinary(text)
        allowed, disallowed = self._special_choice(allowed_special, disallowed_special)
        self._refuse(text, disallowed)
        out: list[int] = []
        for part, special in _split_specials(text, allowed):
            out += [self._special_ids[part]] if special else self._encode_ordinary(part)
        return out

    def encode_iterable(
        self, chunks: Iterable[str | bytes], *, allowed_special: Any = (), disallowed_special: Any = "all"
    ) -> Iterator[int]:
        """Token ids of the text that ``chunks`` make when joined, as they become final: the same ids
        as :meth:`encode` on the whole text, holding only the piece being read (and the start of a
        special token) in memory. Chunks may be ``str`` or UTF-8 ``bytes`` (cut anywhere, even inside
        a character). Arguments as in :meth:`encode`."""
        allowed, disallowed = self._special_choice(allowed_special, disallowed_special)
        longest = max(map(len, self.special_tokens), default=1)
        utf8 = codecs.getincrementaldecoder("utf-8")()
        buffer = ""
        for chunk in chunks:
            if isinstance(chunk, (bytes, bytearray)):
                try:
                    chunk = utf8.decode(chunk)
                except UnicodeDecodeError as bad:
                    raise error(
                        f"los bytes no son UTF-8 válido ({bad.reason}).",
                        f"the bytes are not valid UTF-8 ({bad.reason}).",
                    ) from None
            seen = len(buffer)
            buffer += _text(chunk)
            self._refuse(buffer, disallowed, max(0, seen - (longest - 1)))  # a special token ending in the chunk
            limit = len(buffer) - (longest - 1)  # a special token starting here may not be complete
            start = 0
            for m in allowed.finditer(buffer) if allowed is not None else ():
                if m.start() >= limit:
                    break
                yield from self._encode_ordinary(buffer[start : m.start()])
                yield self._special_ids[m.group()]
                start = m.end()
            end = start  # the pieces of the last text are final when they end well before the end
            for m in _SPLIT.finditer(buffer, start):
                if m.end() + _HOLD > limit:  # what follows (or a special token there) could change it
                    break
                yield from self._encode_pieces([m.group()])  # as found here: alone, a piece may split otherwise
                end = m.end()
            buffer = buffer[end:]
        try:
            buffer += utf8.decode(b"", final=True)
        except UnicodeDecodeError as bad:
            raise error(
                f"los bytes acaban en mitad de un carácter UTF-8 ({bad.reason}).",
                f"the bytes end inside a UTF-8 character ({bad.reason}).",
            ) from None
        yield from self.encode(buffer, allowed_special=allowed_special, disallowed_special=disallowed_special)

    # ------------------------------------------------------------------ decoding

    def _ids(self, ids: Any) -> list[int]:
        if hasattr(ids, "tolist") and not isinstance(ids, (list, tuple)):  # a tensor or an array
            ids = ids.tolist()
        if isinstance(ids, (str, bytes)) or not isinstance(ids, Iterable):
            raise error(
                f"ids debe ser una lista de enteros, no {type(ids).__name__}.",
                f"ids must be a list of integers, not {type(ids).__name__}.",
            )
        n = len(self.vocab)
        return [_as_id(i, n) for i in ids]

    def token_bytes(self, ids: Iterable[int]) -> list[bytes]:
        """The bytes of each token (a special token's are its text's)."""
        return [self.vocab[i] for i in self._ids(ids)]

    def pieces(self, ids: Iterable[int]) -> list[str]:
        """Each token as readable text: the bytes of a character cut between two tokens as ``\\xNN``,
        control and invisible characters as Python escapes (``\\n``, ``\\u200d``)."""
        return [_readable(b) for b in self.token_bytes(ids)]

    def decode(self, ids: Iterable[int]) -> str:
        """The text of the ids (U+FFFD where the bytes are not valid UTF-8); special tokens as their text."""
        return b"".join(self.token_bytes(ids)).decode("utf-8", errors="replace")

    def stream_decoder(self) -> StreamDecoder:
        """A decoder fed ids a few at a time (see :class:`StreamDecoder`)."""
        return StreamDecoder(self)

    # ------------------------------------------------------------------ smaller, saved, loaded

    def truncated(self, vocab_size: int) -> ByteBPE:
        """The tokenizer with only the merges learned until the vocabulary reached ``vocab_size``
        (training stops there: the same as training with that size). Special tokens stay, last."""
        k = len(self.special_tokens)
        _check_size(vocab_size, len(self.vocab), k)
        regular = vocab_size - k
        made = [rank for rank, (_, new) in enumerate(self.merges) if new == regular - 1]
        kept = self.merges[: made[0] + 1] if made else ()
        specials = tuple(s.encode("utf-8") for s in self.special_tokens)
        return ByteBPE(kept, self.vocab[:regular] + specials, self.special_tokens)

    def save(self, path: str | Path) -> Path:
        """Write the merges and the special tokens as JSON (the vocabulary follows from them)."""
        path = Path(path)
        saved: dict[str, Any] = {"merges": [[a, b, new] for (a, b), new in self.merges]}
        if self._byte_ids != [BYTE_ID[b] for b in range(256)]:
            saved["byte_ids"] = self._byte_ids
        saved["special_tokens"] = list(self.special_tokens)
        path.write_text(json.dumps(saved, ensure_ascii=False), encoding="utf-8")
        return path

    @classmethod
    def load(cls, path: str | Path) -> ByteBPE:
        """Read a tokenizer written by :meth:`save`; a file that is not one is a clear error."""
        path = Path(path)
        try:
            saved = json.loads(path.read_text(encoding="utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as bad:
            raise _bad_file(path, f"no es JSON ({bad})", f"it is not JSON ({bad})") from None
        if not isinstance(saved, dict) or not isinstance(saved.get("merges"), list):
            raise _bad_file(path, "le falta la lista 'merges'", "it lacks the list 'merges'")
        merges = []
        for m in saved["merges"]:
            if not isinstance(m, list) or len(m) != 3:
                raise _bad_file(
                    path,
                    f"cada fusión es [izquierda, derecha, nuevo], no {m!r}",
                    f"each merge is [left, right, new], not {m!r}",
                )
            a, b, new = (_as_id(x) for x in m)
            merges.append(((a, b), new))
        byte_ids = saved.get("byte_ids", [BYTE_ID[b] for b in range(256)])
        if not isinstance(byte_ids, list) or len(byte_ids) != 256:
            raise _bad_file(path, "'byte_ids' debe tener 256 ids", "'byte_ids' must hold 256 ids")
        return _build(
            {b: _as_id(i) for b, i in enumerate(byte_ids)}, merges, _check_specials(saved.get("special_tokens", []))
        )

    def save_gpt2(self, encoder: str | Path, merges: str | Path) -> tuple[Path, Path]:
        """Write GPT-2's two files: ``encoder.json`` (token -> id, tokens written with :data:`BYTE_CHAR`,
        special tokens as their text) and ``vocab.bpe`` (the merges by rank, one ``left right`` a line)."""
        n_regular = len(self.vocab) - len(self.special_tokens)
        table = {_as_chars(t): i for i, t in enumerate(self.vocab[:n_regular])}
        table.update(self._special_ids)
        encoder, merges = Path(encoder), Path(merges)
        encoder.write_text(json.dumps(table, ensure_ascii=False), encoding="utf-8")
        lines = [f"{_as_chars(self.vocab[a])} {_as_chars(self.vocab[b])}" for (a, b), _ in self.merges]
        merges.write_text("#version: 0.2\n" + "".join(line + "\n" for line in lines), encoding="utf-8")
        return encoder, merges

    @classmethod
    def load_gpt2(cls, encoder: str | Path, merges: str | Path) -> ByteBPE:
        """Read GPT-2's files (``encoder.json`` + ``vocab.bpe``, or ``tokenizers``' ``vocab.json`` +
        ``merges.txt``), keeping the files' ids. An entry of ``encoder.json`` that is neither a byte
        nor made by a merge is a special token (GPT-2's ``<|endoftext|>``); those need the last ids.

        GPT-2 numbers the bytes as :data:`BYTE_ORDER` does, so its ids are ours; a file that numbers
        them otherwise keeps its own (see :meth:`save`)."""
        encoder, merges = Path(encoder), Path(merges)
        try:
            table = json.loads(encoder.read_text(encoding="utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as bad:
            raise _bad_file(encoder, f"no es JSON ({bad})", f"it is not JSON ({bad})") from None
        if not isinstance(table, dict):
            raise _bad_file(encoder, "debe ser un objeto {token: id}", "it must be an object {token: id}")
        table = {token: _as_id(i) for token, i in table.items()}
        try:
            lines = merges.read_text(encoding="utf-8").splitlines()
        except UnicodeDecodeError as bad:
            raise _bad_file(merges, f"no es texto UTF-8 ({bad})", f"it is not UTF-8 text ({bad})") from None
        if lines and lines[0].startswith("#version"):
            lines = lines[1:]
        missing = [BYTE_CHAR[b] for b in range(256) if BYTE_CHAR[b] not in table]
        if missing:
            raise _bad_file(encoder, f"le falta el byte {missing[0]!r}", f"it lacks the byte {missing[0]!r}")
        pairs, made = [], set()
        for number, line in enumerate(lines, start=2):
            if not line.strip():
                continue
            parts = line.split(" ")
            if len(parts) != 2 or not all(parts) or any(p not in table for p in parts) or "".join(parts) not in table:
                raise _bad_file(
                    merges,
                    f"la línea {number} ({line!r}) no es una fusión de dos tokens de {encoder.name}",
                    f"line {number} ({line!r}) is not a merge of two tokens of {encoder.name}",
                )
            pairs.append(((table[parts[0]], table[parts[1]]), table["".join(parts)]))
            made.add("".join(parts))
        specials = sorted((i, t) for t, i in table.items() if t not in made and not (len(t) == 1 and t in CHAR_BYTE))
        n_regular = len(table) - len(specials)
        if [i for i, _ in specials] != list(range(n_regular, len(table))):
            raise _bad_file(
                encoder,
                "los tokens especiales (ni bytes ni hechos por una fusión) deben tener los últimos ids: "
                f"{[t for _, t in specials][:5]}",
                f"the special tokens (neither bytes nor made by a merge) must have the last ids: "
                f"{[t for _, t in specials][:5]}",
            )
        byte_ids = {CHAR_BYTE[c]: i for c, i in table.items() if len(c) == 1 and c in CHAR_BYTE}
        return _build(byte_ids, pairs, _check_specials(t for _, t in specials))


class StreamDecoder:
    """Decodes ids as they come, holding back the bytes of a character not yet complete.

    ``"".join(d.feed(ids) for ids in parts) + d.flush()`` equals ``tok.decode`` of all the ids.

    Args:
        tokenizer: the :class:`ByteBPE` whose ids come.
    """

    def __init__(self, tokenizer: ByteBPE):
        self.tokenizer = tokenizer
        self._utf8 = codecs.getincrementaldecoder("utf-8")(errors="replace")

    def feed(self, ids: Iterable[int] | int) -> str:
        """The text the ids complete (possibly ``""``)."""
        if hasattr(ids, "tolist") and not isinstance(ids, (list, tuple)):  # a tensor or an array
            ids = ids.tolist()
        if isinstance(ids, int):
            ids = [ids]
        return self._utf8.decode(b"".join(self.tokenizer.token_bytes(ids)))

    def flush(self) -> str:
        """What is held back, as U+FFFD if incomplete; the decoder starts afresh."""
        text = self._utf8.decode(b"", final=True)
        self._utf8.reset()
        return text


def _bad_file(path: Path, es: str, en: str) -> Exception:
    return error(
        f"{path.name} no es un tokenizador que se pueda leer: {es}.", f"{path.name} is not a readable tokenizer: {en}."
    )


def _as_chars(data: bytes) -> str:
    return "".join(BYTE_CHAR[b] for b in data)


def _readable(data: bytes) -> str:
    text = data.decode("utf-8", errors="backslashreplace")
    return "".join(c.encode("unicode_escape").decode() if unicodedata.category(c)[0] == "C" else c for c in text)


def _build(
    byte_ids: Mapping[int, int], merges: Sequence[tuple[tuple[int, int], int]], specials: tuple[str, ...] = ()
) -> ByteBPE:
    """A tokenizer from the ids of the 256 bytes and the merges by rank; each id made once, the ids
    0..n-1 without gaps, then the special tokens."""
    vocab: dict[int, bytes] = {}
    for b, i in byte_ids.items():
        if i in vocab:
            raise error(f"el id {i} es el de dos bytes.", f"the id {i} is given to two bytes.")
        vocab[i] = bytes([b])
    seen: set[tuple[int, int]] = set()
    owner = {t: i for i, t in vocab.items()}
    for (a, b), new in merges:
        if (a, b) in seen:
            raise error(
                f"la fusión {(a, b)} aparece dos veces: cada par se fusiona una sola vez.",
                f"the merge {(a, b)} is there twice: each pair is merged once.",
            )
        seen.add((a, b))
        if a not in vocab or b not in vocab:
            raise error(
                f"la fusión {(a, b)} -> {new} usa un id que aún no es un token ({a if a not in vocab else b}).",
                f"the merge {(a, b)} -> {new} uses an id that is not a token yet ({a if a not in vocab else b}).",
            )
        made = vocab[a] + vocab[b]
        if vocab.get(new, made) != made or owner.get(made, new) != new:
            raise error(
                f"la fusión {(a, b)} -> {new} no encaja con las anteriores.",
                f"the merge {(a, b)} -> {new} does not fit the earlier ones.",
            )
        vocab[new], owner[made] = made, new
    if sorted(vocab) != list(range(len(vocab))):
        gap = min(set(range(len(vocab))) - set(vocab))
        raise error(
            f"los ids deben ir de 0 a {len(vocab) - 1} sin huecos: falta el {gap}.",
            f"the ids must go from 0 to {len(vocab) - 1} without gaps: {gap} is missing.",
        )
    tokens = tuple(vocab[i] for i in range(len(vocab))) + tuple(s.encode("utf-8") for s in specials)
    return ByteBPE(tuple(merges), tokens, specials)


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


TIES = ("tokenizers", "first", "bytes")


def train_bpe(text: str, vocab_size: int, *, special_tokens: Iterable[str] = (), tie: str = "tokenizers") -> ByteBPE:
    """Learn byte-level BPE merges on ``text`` until the vocabulary has ``vocab_size`` tokens
    (or no pair is left).

    The most frequent pair is merged first. A merge whose bytes are already a token reuses its id
    (as ``tokenizers`` does).

    Args:
        vocab_size: any integer (numpy's and torch's too, as ``tokenizers`` takes them), at least 256 plus
            the special tokens.
        special_tokens: texts that get the last ids; the text is cut at them, so no merge crosses
            or enters them. They count in ``vocab_size``.
        tie: which of the pairs with the same count goes first: ``"tokenizers"`` the smallest ids
            ``(left, right)`` (``tokenizers``' rule); ``"first"`` the one found first reading the text
            (minbpe's); ``"bytes"`` the greatest pair of byte strings ``(left, right)`` (Stanford CS336's).
    """
    specials = _check_specials(special_tokens)
    _check_size(vocab_size, n_special=len(specials))
    if tie not in TIES:
        raise error(f"tie debe ser uno de {TIES}, no {tie!r}.", f"tie must be one of {TIES}, not {tie!r}.")
    parts = _split_specials(_text(text), _special_regex(specials))
    word_counts = Counter(piece for part, special in parts if not special for piece in pretokenize(part))
    words = [[BYTE_ID[b] for b in w.encode("utf-8")] for w in word_counts]
    counts = list(word_counts.values())
    vocab = [bytes([b]) for b in BYTE_ORDER]
    token_id = {t: i for i, t in enumerate(vocab)}
    regular = vocab_size - len(specials)

    # how ties are broken: part of each queue entry, after minus the count
    if tie == "bytes":
        flipped = [(255 - t[0], 256) for t in vocab]  # greatest bytes first: each byte flipped, the end last

        def tie_key(pair: tuple[int, int]) -> Any:
            return flipped[pair[0]], flipped[pair[1]]

    elif tie == "first":
        seen_in: dict[tuple[int, int], set[int]] = {}  # every word a pair was ever in
        width = [1] * 256

        def tie_key(pair: tuple[int, int]) -> Any:  # (word, byte offset) of the pair's first occurrence
            a, b = pair
            for w in sorted(seen_in[pair]):
                offset, word = 0, words[w]
                for x, y in zip(word, word[1:]):
                    if x == a and y == b:
                        return w, offset
                    offset += width[x]
            return len(words), 0

    else:

        def tie_key(pair: tuple[int, int]) -> Any:
            return pair

    pair_counts: dict[tuple[int, int], int] = {}
    where: dict[tuple[int, int], set[int]] = {}
    for w, (ids, n) in enumerate(zip(words, counts)):
        for pair in zip(ids, ids[1:]):
            pair_counts[pair] = pair_counts.get(pair, 0) + n
            where.setdefault(pair, set()).add(w)
    if tie == "first":
        seen_in = {p: set(ws) for p, ws in where.items()}
    order = itertools.count()  # only to break ties between two entries of the same pair
    heap = [(-pair_counts[p], tie_key(p), next(order), p, pos) for p, pos in where.items()]
    heapq.heapify(heap)

    merges: list[tuple[tuple[int, int], int]] = []
    while len(vocab) < regular and heap:
        count, key, _, pair, pos = heapq.heappop(heap)
        if -count != pair_counts[pair] or (tie == "first" and key != tie_key(pair)):
            # counted before earlier merges changed it: look again
            heapq.heappush(heap, (-pair_counts[pair], tie_key(pair), next(order), pair, pos))
            continue
        if -count < 1:
            break
        new_bytes = vocab[pair[0]] + vocab[pair[1]]
        new = token_id.get(new_bytes, len(vocab))
        if new == len(vocab):
            vocab.append(new_bytes)
            token_id[new_bytes] = new
            if tie == "bytes":
                flipped.append((*(255 - x for x in new_bytes), 256))
            elif tie == "first":
                width.append(len(new_bytes))
        merges.append((pair, new))
        grown: dict[tuple[int, int], set[int]] = {}
        for w in pos:
            for changed, sign in _merge_word(words[w], *pair, new):
                pair_counts[changed] = pair_counts.get(changed, 0) + sign * counts[w]
                if sign > 0:
                    grown.setdefault(changed, set()).add(w)
        if tie == "first":
            for changed, where_now in grown.items():
                seen_in.setdefault(changed, set()).update(where_now)
        for changed, where_now in grown.items():
            if pair_counts[changed] > 0:
                heapq.heappush(heap, (-pair_counts[changed], tie_key(changed), next(order), changed, where_now))
    vocab += [s.encode("utf-8") for s in specials]
    return ByteBPE(tuple(merges), tuple(vocab), specials)


# ------------------------------------------------------------------------- Unigram's split


def viterbi_split(text: str, log_prob: Mapping[str, float]) -> list[str]:
    """The most probable split of ``text`` under a Unigram model (Kudo, 2018): the pieces, keys of ``log_prob``
    (piece -> natural logarithm of its probability), that join to ``text`` with the greatest sum of ``log_prob``.

    Viterbi's dynamic programme over the positions: ``best[i]``, the score of the best split of ``text[:i]``, is
    the greatest ``best[j] + log_prob[text[j:i]]``; the split is read back from the ``j`` each ``i`` came from. It
    is how ``tokenizers``' ``Unigram`` model and SentencePiece encode; where two splits score the same, this one
    keeps the one whose last piece starts first. A text that no split covers is an error.
    """
    text = _text(text)
    if not isinstance(log_prob, Mapping):
        raise error(
            f"log_prob debe ser un diccionario trozo -> logaritmo de su probabilidad, no {type(log_prob).__name__}.",
            f"log_prob must be a dictionary piece -> logarithm of its probability, not {type(log_prob).__name__}.",
        )
    for piece, value in log_prob.items():
        if not isinstance(piece, str) or isinstance(value, bool) or not isinstance(value, numbers.Real):
            raise error(
                f"log_prob debe llevar textos a números; tiene {piece!r}: {value!r}.",
                f"log_prob must map strings to numbers; it has {piece!r}: {value!r}.",
            )
        if value != value or value == float("inf"):
            raise error(
                f"el logaritmo de una probabilidad es un número de −∞ a 0, no {value!r} (el de {piece!r}).",
                f"the logarithm of a probability is a number from −∞ to 0, not {value!r} ({piece!r}'s).",
            )
    longest = max(map(len, log_prob), default=0)
    best, back = [0.0] + [float("-inf")] * len(text), [0] * (len(text) + 1)
    reached = [True] + [False] * len(text)
    for i in range(1, len(text) + 1):
        for j in range(max(0, i - longest), i):
            piece = text[j:i]
            score = best[j] + log_prob.get(piece, float("-inf"))  # a piece of probability 0 is no piece
            if reached[j] and score > float("-inf") and (not reached[i] or score > best[i]):
                best[i], back[i], reached[i] = score, j, True
    if not reached[-1]:
        stuck = next(i for i in range(len(text), -1, -1) if reached[i])
        raise error(
            f"ningún trozo del vocabulario cubre el texto desde la posición {stuck} ({text[stuck : stuck + 10]!r}).",
            f"no piece of the vocabulary covers the text from position {stuck} on ({text[stuck : stuck + 10]!r}).",
        )
    pieces, i = [], len(text)
    while i > 0:
        pieces.append(text[back[i] : i])
        i = back[i]
    return pieces[::-1]


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
