"""A language model is a compressor: its loss in bits per byte against gzip, bz2, xz and byte n-grams, and an
arithmetic coder that turns it into a file.

A model that gives the next symbol probability p can code it in -log2 p bits. So the model's cross-entropy on a
held-out text, in **bits per byte** (total bits / the text's UTF-8 bytes), is the size of the file it could compress
that text to; a byte costs 8 bits stored as it is. Measured this way, a model and a general-purpose compressor are
ranked on one scale:

* :data:`UNIFORM_BITS` (= :func:`uniform_bits_per_byte`): 8 bits, every byte equally likely;
* :func:`unigram_bits_per_byte`: each byte's frequency in the training text (add-one smoothing);
* :func:`compressed_bits_per_byte`: what gzip (LZ77 + Huffman), bz2 (Burrows-Wheeler) or xz
  (LZMA) add to the compressed size when the held-out text follows the training text, so the
  compressor may copy from what it has seen, as the model has learnt from it;
* :class:`ByteNGram`: a byte n-gram with interpolated Kneser-Ney smoothing, the strongest
  count-based baseline, its order (and discount) picked on training data only by :func:`choose_order`
  (:func:`choose_ngram`); :class:`NGramReader` reads a text with it byte by byte, and with ``adapt=True`` keeps
  counting what it reads;
* :func:`model_bits_per_byte`: a token model's loss over a text, scored with a sliding window,
  turned into bits per byte of that text (tokens differ between tokenizers, bytes do not).

:func:`bits_per_byte` turns nats (PyTorch's cross-entropy) into bits per byte: nats / ln 2 / bytes.

The coder makes the sum real. :func:`frequencies` turns probabilities into integer counts (every symbol at least one,
the same integers on both sides); :class:`ArithmeticEncoder` narrows an interval of 32-bit integers with each symbol
(:func:`narrow`) and writes the bits its ends agree on, :class:`ArithmeticDecoder` follows it; :func:`encode` and
:func:`decode` code a list of symbols with a table of counts or a model given as a function. On top,
:func:`compress_with_model` and :func:`decompress_with_model` write a text into a self-describing file with a token
model (or several, mixed), which may keep learning as it codes (:class:`CodingSettings`), the decoder taking the same
steps: one probability function for both sides (:func:`window_probabilities`), always the same shapes, on the CPU.

Text given as ``str`` is encoded as UTF-8. Bad arguments, and damaged files, raise
:class:`~minitransformer.i18n.CourseError` (a ``ValueError``) in the language of the package's messages.

Letters: B batch (windows), T window length (``context``), V vocabulary.
"""

from __future__ import annotations

import bz2
import contextlib
import copy
import gzip
import hashlib
import lzma
import math
import numbers
import random
import struct
import zlib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from torch import Tensor
from torch.nn import functional as F

from .i18n import error
from .runtime import cpu_threads, eval_mode

__all__ = [
    "COMPRESSORS",
    "UNIFORM_BITS",
    "MAX_ORDER",
    "bits_per_byte",
    "compress",
    "compressed_bits_per_byte",
    "uniform_bits_per_byte",
    "unigram_bits_per_byte",
    "ByteNGram",
    "choose_order",
    "model_bits_per_byte",
    "NGramReader",
    "choose_ngram",
    "DISCOUNTS",
    "CODER_BITS",
    "FREQUENCY_TOTAL",
    "frequencies",
    "narrow",
    "ArithmeticEncoder",
    "ArithmeticDecoder",
    "encode",
    "decode",
    "CodingSettings",
    "CodingReport",
    "window_probabilities",
    "compress_with_model",
    "decompress_with_model",
]

COMPRESSORS = ("gzip", "bz2", "xz")
UNIFORM_BITS = 8.0  # bits per byte when all 256 bytes are equally likely: log2 256
MAX_ORDER = 8  # the longest byte n-gram ByteNGram counts (one gram is packed into a 64-bit integer)


def _as_bytes(data: bytes | str, name: str) -> bytes:
    if isinstance(data, str):
        return data.encode("utf-8")
    if isinstance(data, (bytes, bytearray, memoryview)):
        return bytes(data)
    raise error(
        f"{name} debe ser un texto (str) o bytes, no {type(data).__name__}",
        f"{name} must be text (str) or bytes, got {type(data).__name__}",
    )


def _nonempty(data: bytes | str, name: str) -> bytes:
    data = _as_bytes(data, name)
    if not data:
        raise error(
            f"{name} está vacío: no hay ningún byte que medir",
            f"{name} is empty: there is no byte to measure",
        )
    return data


def bits_per_byte(nats: float, n_bytes: int) -> float:
    """A text's total loss in nats -> bits per byte of that text: ``nats / ln 2 / n_bytes``."""
    if isinstance(n_bytes, bool) or not isinstance(n_bytes, numbers.Integral) or n_bytes <= 0:
        raise error(
            f"n_bytes debe ser un entero ≥ 1 (los bytes UTF-8 del texto), no {n_bytes!r}",
            f"n_bytes must be an integer ≥ 1 (the text's UTF-8 bytes), got {n_bytes!r}",
        )
    if isinstance(nats, bool) or not isinstance(nats, numbers.Real) or math.isnan(nats) or nats < 0:
        raise error(
            f"nats es una pérdida total: debe ser un número ≥ 0, no {nats!r}",
            f"nats is a total loss: it must be a number ≥ 0, got {nats!r}",
        )
    return float(nats) / math.log(2) / int(n_bytes)


def compress(data: bytes, method: str) -> bytes:
    """``data`` compressed at the strongest setting of ``method`` (one of :data:`COMPRESSORS`):
    gzip level 9 (with a zero time stamp, so the output is reproducible), bz2 level 9, xz preset 9 extreme."""
    data = _as_bytes(data, "data")
    if method == "gzip":
        return gzip.compress(data, compresslevel=9, mtime=0)
    if method == "bz2":
        return bz2.compress(data, 9)
    if method == "xz":
        return lzma.compress(data, preset=9 | lzma.PRESET_EXTREME)
    raise error(
        f"método de compresión desconocido {method!r}: usa uno de {', '.join(COMPRESSORS)}",
        f"unknown compression method {method!r}: use one of {', '.join(COMPRESSORS)}",
    )


def compressed_bits_per_byte(held: str | bytes, context: str | bytes = b"", method: str = "gzip") -> float:
    """Bits per byte that ``method`` spends on ``held`` when it comes after ``context``:
    ``(len(compress(context + held)) - len(compress(context))) * 8 / len(held)``, lengths in bytes.

    The context plays the part of the training text: the compressor may refer back to it
    (gzip only to its last 32 KB, its window; bz2 only within its 900 KB block; xz to all of it)."""
    held = _nonempty(held, "held")
    context = _as_bytes(context, "context")
    extra = len(compress(context + held, method)) - len(compress(context, method))
    return extra * 8 / len(held)


def uniform_bits_per_byte() -> float:
    """The baseline that knows nothing: every byte has probability 1/256, so it costs 8 bits
    (:data:`UNIFORM_BITS`)."""
    return UNIFORM_BITS


def unigram_bits_per_byte(train: bytes | str, held: bytes | str) -> float:
    """Cross-entropy of ``held`` under the byte frequencies of ``train``, in bits per byte:
    p(b) = (count(b) + 1) / (len(train) + 256) (add-one smoothing, so no byte has probability 0)."""
    train = _as_bytes(train, "train")
    held = _nonempty(held, "held")
    counts = np.bincount(np.frombuffer(train, dtype=np.uint8), minlength=256).astype(np.float64)
    log2p = np.log2((counts + 1) / (len(train) + 256))  # (256,)
    return float(-log2p[np.frombuffer(held, dtype=np.uint8)].mean())


# --------------------------------------------------------------------------- byte n-grams


def _tail(data: bytes, n: int) -> bytes:
    """The last ``n`` bytes of ``data`` (all of it when shorter; none when n = 0)."""
    return data[max(len(data) - n, 0) :] if n > 0 else b""


def _gram_codes(data: np.ndarray, k: int) -> np.ndarray:
    """The k-grams of ``data`` (uint8, length L) as integers, first byte most significant: (L - k + 1,) uint64."""
    n = len(data) - k + 1
    codes = np.zeros(max(n, 0), dtype=np.uint64)
    for j in range(k):
        codes = (codes << np.uint64(8)) | data[j : j + n].astype(np.uint64)
    return codes


class _Level:
    """The counts of one level k of the model (grams of k bytes: a context of k - 1 bytes and the next byte),
    sorted by gram, with their running sum, so a context's grams are one slice."""

    def __init__(self, codes: np.ndarray, counts: np.ndarray):
        self.codes = codes  # (G,) uint64, sorted
        self.counts = counts.astype(np.float64)  # (G,) counts c(hw) (raw or continuation)
        self.cumulative = np.concatenate([[0.0], np.cumsum(self.counts)])  # (G + 1,)

    def context_slices(self, contexts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Where the grams of each context start and end: (N,) and (N,) indices into ``codes``."""
        low = contexts << np.uint64(8)
        return np.searchsorted(self.codes, low, "left"), np.searchsorted(self.codes, low | np.uint64(255), "right")

    def gram_counts(self, grams: np.ndarray) -> np.ndarray:
        """c(hw) of each gram, 0 for grams never seen: (N,) float64."""
        if len(self.codes) == 0:  # a text shorter than the grams: nothing counted at this level
            return np.zeros(len(grams))
        where = np.minimum(np.searchsorted(self.codes, grams), len(self.codes) - 1)
        found = self.codes[where] == grams
        return np.where(found, self.counts[where], 0.0)


class ByteNGram:
    """A byte n-gram language model with interpolated Kneser-Ney smoothing (one discount D).

    Kneser and Ney (1995) built the lower orders from the number of different contexts a gram follows
    instead of how often it occurs; Chen and Goodman (1998) compared the smoothing methods of n-gram
    models and found interpolated Kneser-Ney, and their modified variant with three discounts
    (for counts 1, 2 and 3 or more), the best. This is the plain interpolated form, with one fixed
    discount D (0.75 by default). The probability of byte w after the context h (the last
    ``order - 1`` bytes) is, with h' the context without its first byte::

        P(w | h) = max(c(hw) - D, 0) / c(h·) + D · N1+(h·) / c(h·) · P(w | h')

    where c(h·) = Σ_w c(hw) and N1+(h·) = the number of different bytes seen after h; when h was
    never seen, P(w | h) = P(w | h'). At the highest order c counts occurrences; at every lower
    order c(hw) is the continuation count N1+(·hw), the number of different bytes seen before hw
    (a byte that follows many contexts is a likely guess in a new one). Below the empty context
    comes the uniform distribution, 1/256, so every byte has a probability > 0. Order 1 is the
    byte counts interpolated with the uniform distribution. Near the start of a text, where fewer
    than ``order - 1`` bytes come before, the model uses the orders that fit.

    Args:
        order: n, the length of the grams counted (the context is n - 1 bytes), 1 to :data:`MAX_ORDER`.
        discount: D, in (0, 1].
    """

    def __init__(self, order: int, discount: float = 0.75):
        if isinstance(order, bool) or not isinstance(order, numbers.Integral) or not 1 <= order <= MAX_ORDER:
            raise error(
                f"order debe ser un entero entre 1 y {MAX_ORDER}, no {order!r}",
                f"order must be an integer from 1 to {MAX_ORDER}, got {order!r}",
            )
        if (
            isinstance(discount, bool)
            or not isinstance(discount, numbers.Real)
            or math.isnan(discount)
            or not 0 < discount <= 1
        ):
            raise error(
                f"discount (el descuento D) debe ser un número en (0, 1], no {discount!r}",
                f"discount (the discount D) must be a number in (0, 1], got {discount!r}",
            )
        self.order = int(order)
        self.discount = float(discount)
        self.levels: list[_Level] = []  # levels[k - 1]: grams of k bytes, k = 1 .. order
        self._seen: dict[int, np.ndarray] = {}
        self._dicts: list | None = None

    def fit(self, data: bytes | str) -> ByteNGram:
        """Count the grams of ``data`` (replacing any earlier counts); returns the model."""
        array = np.frombuffer(_nonempty(data, "data"), dtype=np.uint8)
        n = self.order
        self.levels = []
        self._seen = {}  # m -> the different grams of m bytes in the text, sorted (for NGramReader)
        for k in range(1, n + 1):
            if k == n:  # the highest order: how often each gram occurs
                codes, counts = np.unique(_gram_codes(array, k), return_counts=True)
                self._seen[k] = codes
            else:  # lower orders: how many different bytes come before each gram
                distinct = np.unique(_gram_codes(array, k + 1))
                self._seen[k + 1] = distinct
                mask = np.uint64((1 << (8 * k)) - 1)
                codes, counts = np.unique(distinct & mask, return_counts=True)
            self.levels.append(_Level(codes, counts))
        self._dicts = None
        return self

    def _tables(self) -> list:
        """The counts as dictionaries, for :class:`NGramReader`: ``[seen, level 1, ..., level n]``, where
        ``seen[m]`` is the set of grams of m bytes in the text and level k is (c(hw) by gram, c(h·) by context,
        N1+(h·) by context). Built once per fit."""
        if self._dicts is None:
            tables: list = [[set() for _ in range(self.order + 1)]]
            for m, grams in self._seen.items():
                if m >= 2:
                    tables[0][m] = set(grams.tolist())
            for level in self.levels:
                contexts = level.codes >> np.uint64(8)  # sorted, as the grams are
                starts = (
                    np.flatnonzero(np.r_[True, contexts[1:] != contexts[:-1]]) if len(contexts) else np.zeros(0, int)
                )
                counts = level.counts.astype(np.int64)
                totals = np.add.reduceat(counts, starts) if len(starts) else counts
                distinct = np.diff(np.r_[starts, len(contexts)])
                keys = contexts[starts].tolist()
                tables.append(
                    (
                        dict(zip(level.codes.tolist(), counts.tolist())),
                        dict(zip(keys, totals.tolist())),
                        dict(zip(keys, distinct.tolist())),
                    )
                )
            self._dicts = tables
        return self._dicts

    def _check_fitted(self) -> None:
        if not self.levels:
            raise error(
                "el modelo aún no ha contado nada: llama antes a fit(texto)",
                "the model has counted nothing yet: call fit(text) first",
            )

    def probs(self, context: bytes | str = b"") -> np.ndarray:
        """The distribution of the next byte after ``context`` (only its last ``order - 1`` bytes
        matter): (256,) float64, every entry > 0, summing to 1."""
        self._check_fitted()
        context = _as_bytes(context, "context")
        history = _tail(context, self.order - 1)
        p = np.full(256, 1 / 256)
        for k in range(1, len(history) + 2):
            level = self.levels[k - 1]
            h = int.from_bytes(_tail(history, k - 1), "big")
            low, high = (int(i[0]) for i in level.context_slices(np.array([h], dtype=np.uint64)))
            total = level.cumulative[high] - level.cumulative[low]
            if total == 0:
                continue
            direct = np.zeros(256)
            bytes_seen = (level.codes[low:high] & np.uint64(255)).astype(np.intp)
            direct[bytes_seen] = np.maximum(level.counts[low:high] - self.discount, 0)
            p = (direct + self.discount * (high - low) * p) / total
        return p

    def bits(self, data: bytes | str, context: bytes | str = b"", adapt: bool = False) -> float:
        """Total bits of ``data``: Σ -log2 P(byte | the bytes before it), ``context`` coming first. With
        ``adapt=True`` the model keeps counting as it reads (:class:`NGramReader`): each byte is predicted with the
        counts of the training text and of every byte of ``data`` before it."""
        self._check_fitted()
        data = _as_bytes(data, "data")
        context = _as_bytes(context, "context")
        if not data:
            return 0.0
        if adapt:
            reader, total = NGramReader(self, context, adapt=True), 0.0
            for byte in data:
                total -= math.log2(reader.probability(byte))
                reader.read(byte)
            return total
        context = _tail(context, self.order - 1)
        text = np.frombuffer(context + data, dtype=np.uint8)
        first = len(context)  # index in text of the first byte to score
        positions = np.arange(first, len(text))  # (N,)
        p = np.full(len(positions), 1 / 256)
        for k in range(1, self.order + 1):
            level = self.levels[k - 1]
            usable = positions >= k - 1  # enough bytes before for a context of k - 1
            if not usable.any():
                break
            at = positions[usable]
            grams = _gram_codes(text, k)[at - (k - 1)]  # (n,) the gram ending at each position
            low, high = level.context_slices(grams >> np.uint64(8))
            total = level.cumulative[high] - level.cumulative[low]
            seen = total > 0
            count = level.gram_counts(grams)
            mixed = (np.maximum(count - self.discount, 0) + self.discount * (high - low) * p[usable]) / np.where(
                seen, total, 1
            )
            p[usable] = np.where(seen, mixed, p[usable])
        return float(-np.log2(p).sum())

    def bits_per_byte(self, data: bytes | str, context: bytes | str = b"", adapt: bool = False) -> float:
        """:meth:`bits` divided by the bytes of ``data``."""
        data = _nonempty(data, "data")
        return self.bits(data, context, adapt) / len(data)

    def sample(self, n: int, rng: random.Random, prompt: bytes | str = b"") -> bytes:
        """``n`` bytes drawn one at a time, each from :meth:`probs` of the prompt and the bytes drawn so far."""
        if isinstance(n, bool) or not isinstance(n, numbers.Integral) or n < 0:
            raise error(f"n debe ser un entero ≥ 0, no {n!r}", f"n must be an integer ≥ 0, got {n!r}")
        if not isinstance(rng, random.Random):
            raise error(
                f"rng debe ser un random.Random, no {type(rng).__name__}",
                f"rng must be a random.Random, got {type(rng).__name__}",
            )
        self._check_fitted()
        text = bytearray(_as_bytes(prompt, "prompt"))
        start = len(text)
        for _ in range(int(n)):
            cumulative = np.cumsum(self.probs(_tail(bytes(text), self.order - 1)))
            drawn = int(np.searchsorted(cumulative, rng.random() * cumulative[-1], "right"))
            text.append(min(drawn, 255))
        return bytes(text[start:])


class NGramReader:
    """A :class:`ByteNGram` reading a text one byte at a time: :meth:`probs` is the next byte's distribution
    given what it has read (with the context it started from), :meth:`read` moves on by one byte. With
    ``adapt=True`` it also keeps counting: each byte read adds its grams to the counts, as if the model had been
    fitted on the training text followed by everything read so far (the counts the coder's decoder has too,
    since it has decoded the same bytes). The fitted model itself is never changed.
    """

    def __init__(self, model: ByteNGram, context: bytes | str = b"", adapt: bool = False):
        model._check_fitted()
        self.model, self.adapt = model, bool(adapt)
        self.n, self.discount = model.order, model.discount
        self.base = model._tables()
        # What was read since: counts by level, then context, then byte; the totals and distinct bytes by context;
        # the grams of each length seen for the first time.
        self.extra: list[dict[int, dict[int, int]]] = [{} for _ in range(self.n + 1)]
        self.extra_total: list[dict[int, int]] = [{} for _ in range(self.n + 1)]
        self.extra_distinct: list[dict[int, int]] = [{} for _ in range(self.n + 1)]
        self.extra_seen: list[set[int]] = [set() for _ in range(self.n + 1)]
        self.code, self.available = 0, 0  # the last bytes read, packed; how many (at most n)
        for b in _tail(_as_bytes(context, "context"), self.n - 1):
            self._push(b)

    def _push(self, byte: int) -> None:
        self.code = ((self.code << 8) | byte) & ((1 << (8 * self.n)) - 1)
        self.available = min(self.available + 1, self.n)

    def _count(self, k: int, h: int, w: int) -> tuple[int, int, int]:
        """c(hw), c(h·) and N1+(h·) at level k."""
        counts, totals, distinct = self.base[k]
        extra = self.extra[k].get(h)
        g = (h << 8) | w
        c = counts.get(g, 0) + (extra.get(w, 0) if extra else 0)
        return (
            c,
            totals.get(h, 0) + self.extra_total[k].get(h, 0),
            distinct.get(h, 0) + self.extra_distinct[k].get(h, 0),
        )

    def probability(self, w: int) -> float:
        """P(w | the bytes read): Kneser-Ney's interpolation, level by level, from the uniform 1/256 up."""
        p = 1 / 256
        for k in range(1, min(self.n, self.available + 1) + 1):
            h = self.code & ((1 << (8 * (k - 1))) - 1)
            c, total, distinct = self._count(k, h, w)
            if total:
                p = (max(c - self.discount, 0) + self.discount * distinct * p) / total
        return p

    def probs(self) -> np.ndarray:
        """The next byte's distribution: (256,) float64, every entry > 0."""
        p = np.full(256, 1 / 256)
        for k in range(1, min(self.n, self.available + 1) + 1):
            h = self.code & ((1 << (8 * (k - 1))) - 1)
            counts, totals, distinct = self.base[k]
            total = totals.get(h, 0) + self.extra_total[k].get(h, 0)
            if not total:
                continue
            level = self.model.levels[k - 1]
            low, high = (int(i[0]) for i in level.context_slices(np.array([h], dtype=np.uint64)))
            direct = np.zeros(256)
            direct[(level.codes[low:high] & np.uint64(255)).astype(np.intp)] = level.counts[low:high]
            for w, c in self.extra[k].get(h, {}).items():
                direct[w] += c
            d = distinct.get(h, 0) + self.extra_distinct[k].get(h, 0)
            p = (np.maximum(direct - self.discount, 0) + self.discount * d * p) / total
        return p

    def _add(self, k: int, g: int) -> None:
        """One more count of the gram g at level k."""
        h, w = g >> 8, g & 255
        before = self._count(k, h, w)[0]
        extra = self.extra[k].setdefault(h, {})
        extra[w] = extra.get(w, 0) + 1
        self.extra_total[k][h] = self.extra_total[k].get(h, 0) + 1
        if before == 0:
            self.extra_distinct[k][h] = self.extra_distinct[k].get(h, 0) + 1

    def read(self, byte: int) -> None:
        """Move on by one byte; with ``adapt``, count its grams first."""
        self._push(byte)
        if not self.adapt:
            return
        seen = self.base[0]
        if self.available >= self.n:  # the highest level counts every gram
            self._add(self.n, self.code)
        for m in range(min(self.n, self.available), 1, -1):  # a gram of m bytes seen for the first time
            g = self.code & ((1 << (8 * m)) - 1)
            if g in seen[m] or g in self.extra_seen[m]:
                continue
            self.extra_seen[m].add(g)
            self._add(m - 1, g & ((1 << (8 * (m - 1))) - 1))  # one more byte seen before its last m − 1


def choose_order(train: bytes | str, orders: Iterable[int] = range(1, MAX_ORDER + 1), validation: float = 0.1) -> int:
    """The n-gram order to use for ``train``, chosen on training data only: fit a :class:`ByteNGram` of each
    order on the first ``1 - validation`` of the bytes, return the order with the lowest bits per byte on the
    rest, scored after the first part (the smallest order on a tie). The held-out text never takes part."""
    train = _nonempty(train, "train")
    if isinstance(validation, bool) or not isinstance(validation, numbers.Real) or not 0 < validation < 1:
        raise error(
            f"validation es la fracción que se reserva para validar: debe estar en (0, 1), no {validation!r}",
            f"validation is the fraction kept for validation: it must lie in (0, 1), got {validation!r}",
        )
    cut = round(len(train) * (1 - validation))
    if not 0 < cut < len(train):
        raise error(
            f"train es demasiado corto ({len(train)} bytes) para separar una parte de validación",
            f"train is too short ({len(train)} bytes) to keep a validation part",
        )
    return choose_ngram(train[:cut], [(train[:cut], train[cut:])], orders, (0.75,))[0]


DISCOUNTS = (0.5, 0.6, 0.7, 0.75, 0.8, 0.85, 0.9, 0.95)  # the discounts choose_ngram tries by default


def choose_ngram(
    fit: bytes | str,
    validation: Sequence[tuple[bytes | str, bytes | str]],
    orders: Iterable[int] = range(1, MAX_ORDER + 1),
    discounts: Iterable[float] = DISCOUNTS,
    adapt: bool = False,
) -> tuple[int, float]:
    """The order and discount of a :class:`ByteNGram`, chosen on training data only: fit on ``fit``, score every
    (context, text) pair of ``validation`` (counting as it reads when ``adapt``), return the (order, discount)
    with the fewest bits in all (the smallest on a tie). The held-out text never takes part."""
    fit = _nonempty(fit, "fit")
    validation = [(_as_bytes(context, "context"), _nonempty(text, "validation")) for context, text in validation]
    orders, discounts = list(orders), [float(d) for d in discounts]
    if not orders:
        raise error("orders está vacío: no hay ningún orden entre el que elegir", "orders is empty: no order to choose")
    if not discounts or not validation:
        raise error("discounts y validation no pueden estar vacíos", "discounts and validation cannot be empty")
    for d in discounts:
        ByteNGram(1, d)  # a discount out of (0, 1] says so
    scores = {}
    for order in orders:
        model = ByteNGram(order).fit(fit)
        for d in discounts:
            model.discount = d  # the counts do not depend on the discount: one fit per order
            scores[(order, d)] = sum(model.bits(text, context, adapt) for context, text in validation)
    return min(scores, key=lambda key: (scores[key], key))


# --------------------------------------------------------------------------- arithmetic coding

CODER_BITS = 32  # the coder's interval [low, high] is a range of 32-bit integers
FREQUENCY_TOTAL = 1 << 24  # a distribution becomes integer counts that sum to this, every symbol at least 1
_WHOLE = 1 << CODER_BITS
_HALF = _WHOLE // 2
_QUARTER = _WHOLE // 4


def frequencies(probs: Tensor, total: int = FREQUENCY_TOTAL) -> Tensor:
    """Probabilities -> the integer counts an arithmetic coder narrows its interval with.

    Each count is ``floor(p · (total − V)) + 1``: at least 1, so that every symbol can still be coded, however
    unlikely the model thinks it is; what the floors leave (or, when the probabilities add up to a hair over 1,
    take) is given to the most likely symbol (the first one on a tie), so each row sums to ``total`` exactly.
    Only elementwise float operations and integer sums: the same probabilities give the same counts, whatever
    the batch, the machine or the thread count, which is what lets a decoder rebuild the encoder's counts.

    Shapes: probs (..., V), any float dtype -> (..., V) int64.
    """
    if not isinstance(probs, Tensor) or not probs.is_floating_point() or probs.dim() < 1:
        raise error(
            "probs deben ser un tensor de probabilidades (float) con los símbolos en el último eje",
            "probs must be a tensor of probabilities (float) with the symbols on the last axis",
        )
    V = probs.size(-1)
    if isinstance(total, bool) or not isinstance(total, numbers.Integral) or not V <= total <= _QUARTER:
        raise error(
            f"total debe ser un entero entre V = {V} y 2^{CODER_BITS - 2} (para que cada símbolo quepa en el "
            f"intervalo del codificador), no {total!r}",
            f"total must be an integer between V = {V} and 2^{CODER_BITS - 2} (so that every symbol fits in the "
            f"coder's interval), got {total!r}",
        )
    counts = _quantize(probs.detach().to("cpu", torch.float64).numpy(), total)
    return torch.from_numpy(counts)


def _quantize(probs: np.ndarray, total: int = FREQUENCY_TOTAL) -> np.ndarray:
    """:func:`frequencies` in NumPy (what the coders call for each token): (..., V) float64 -> (..., V) int64."""
    if not np.isfinite(probs).all() or (probs < 0).any():
        raise error(
            "probs tienen valores negativos, NaN o infinitos: no son probabilidades",
            "probs hold negative, NaN or infinite values: they are not probabilities",
        )
    counts = np.floor(probs * (total - probs.shape[-1])).astype(np.int64) + 1  # (..., V) every symbol ≥ 1
    rest = total - counts.sum(-1, keepdims=True)  # (..., 1) what the floors left, an integer
    np.put_along_axis(
        counts, probs.argmax(-1)[..., None], np.take_along_axis(counts, probs.argmax(-1)[..., None], -1) + rest, -1
    )
    if (counts < 1).any():
        raise error(
            "probs no suman 1 (ni casi): no son una distribución",
            "probs do not add up to 1 (not even nearly): they are not a distribution",
        )
    return counts


def narrow(low: int, high: int, start: int, stop: int, total: int) -> tuple[int, int]:
    """The interval [low, high] (integers, both ends included) narrowed to the share of a symbol that owns the
    counts [start, stop) of ``total``: of its ``high − low + 1`` integers, the symbol gets those from
    ``low + ⌊width · start / total⌋`` to ``low + ⌊width · stop / total⌋ − 1``. Integer arithmetic only, so that
    the encoder and the decoder get the very same ends."""
    width = high - low + 1
    return low + width * start // total, low + width * stop // total - 1


class ArithmeticEncoder:
    """An arithmetic coder in integers (Witten, Neal and Cleary, 1987): every symbol narrows the interval
    [low, high] to its share of it, and each bit on which low and high agree is written out.

    ``encode(start, stop, total)`` codes a symbol that owns the counts [start, stop) of ``total``;
    :meth:`finish` writes what the decoder still needs and returns the bytes. A symbol of probability p costs
    -log2 p bits, give or take the integers' rounding; the whole message, at most 2 bits more, and its last byte's
    padding.
    """

    narrow = staticmethod(narrow)  # the interval narrowing (a subclass may put another in its place)

    def __init__(self) -> None:
        self.low, self.high = 0, _WHOLE - 1  # the interval, both ends included
        self.pending = 0  # bits decided later: the interval straddled the middle, [1/4, 3/4)
        self.bits: list[int] = []

    def encode(self, start: int, stop: int, total: int) -> None:
        self.low, self.high = self.narrow(self.low, self.high, start, stop, total)  # the symbol's share of it
        while True:
            if self.high < _HALF:  # inside the lower half: the next bit is 0
                self._write(0)
            elif self.low >= _HALF:  # inside the upper half: the next bit is 1
                self._write(1)
                self.low, self.high = self.low - _HALF, self.high - _HALF
            elif self.low >= _QUARTER and self.high < 3 * _QUARTER:  # around the middle: the bit waits
                self.pending += 1
                self.low, self.high = self.low - _QUARTER, self.high - _QUARTER
            else:
                break
            self.low, self.high = 2 * self.low, 2 * self.high + 1  # zoom in: the interval doubles

    def _write(self, bit: int) -> None:
        self.bits.append(bit)
        self.bits.extend([1 - bit] * self.pending)  # the waiting bits are the opposite of the one that decided
        self.pending = 0

    def finish(self) -> bytes:
        """Two more bits (and the waiting ones) pick a point that stays inside the interval whatever follows;
        the bits packed into bytes, the last one padded with zeros."""
        self.pending += 1
        self._write(0 if self.low < _QUARTER else 1)
        bits = self.bits + [0] * (-len(self.bits) % 8)
        return int("1" + "".join(map(str, bits)), 2).to_bytes(len(bits) // 8 + 1, "big")[1:]


class ArithmeticDecoder:
    """Reads what :class:`ArithmeticEncoder` wrote: it keeps the same interval as the encoder and ``value``, the
    number the bits written so far spell; the symbol is the one whose share of the interval holds ``value``.

    For each symbol: ``target(total)`` says where ``value`` falls, in counts out of ``total``; the caller finds
    the symbol whose counts [start, stop) hold it and calls ``decode(start, stop, total)``, which narrows the
    interval as the encoder did. Past the end of the data it reads zeros, as the encoder assumed, but no more
    than a coder's width of them: a decoder that needs more has been given damaged or cut data, and says so.
    """

    def __init__(self, data: bytes):
        self.data = bytes(data)
        self.position = 0  # the next bit to read
        self.low, self.high = 0, _WHOLE - 1
        self.value = 0
        for _ in range(CODER_BITS):
            self.value = 2 * self.value + self._bit()

    def _bit(self) -> int:
        i = self.position
        self.position += 1
        if i < 8 * len(self.data):
            return (self.data[i // 8] >> (7 - i % 8)) & 1
        if i >= 8 * len(self.data) + CODER_BITS:
            raise error(
                "los datos se acaban antes que los símbolos: están cortados o dañados",
                "the data run out before the symbols do: they are cut short or damaged",
            )
        return 0

    def target(self, total: int) -> int:
        """Where ``value`` falls in the interval, in counts out of ``total``: 0 ≤ target < total."""
        width = self.high - self.low + 1
        return ((self.value - self.low + 1) * total - 1) // width

    def decode(self, start: int, stop: int, total: int) -> None:
        self.low, self.high = narrow(self.low, self.high, start, stop, total)  # the encoder's narrowing
        while True:
            if self.high < _HALF:
                pass
            elif self.low >= _HALF:
                self.low, self.high, self.value = self.low - _HALF, self.high - _HALF, self.value - _HALF
            elif self.low >= _QUARTER and self.high < 3 * _QUARTER:
                self.low, self.high, self.value = self.low - _QUARTER, self.high - _QUARTER, self.value - _QUARTER
            else:
                break
            self.low, self.high = 2 * self.low, 2 * self.high + 1
            self.value = 2 * self.value + self._bit()


def _check_counts(counts: Tensor) -> Tensor:
    """An integer row (V,) of counts ≥ 1 whose sum fits the coder, as int64 on the CPU."""
    if not isinstance(counts, Tensor) or counts.dim() != 1 or counts.is_floating_point() or counts.is_complex():
        raise error(
            "cada fila de cuentas debe ser un tensor de enteros de forma (V,) (usa frequencies(probs))",
            "each row of counts must be an integer tensor of shape (V,) (use frequencies(probs))",
        )
    counts = counts.to("cpu", torch.int64)
    if len(counts) == 0 or (counts < 1).any() or counts.sum() > _QUARTER:
        raise error(
            f"las cuentas deben ser ≥ 1 y sumar como mucho 2^{CODER_BITS - 2}",
            f"the counts must be ≥ 1 and add up to at most 2^{CODER_BITS - 2}",
        )
    return counts


CountsOf = Callable[[list[int]], Tensor]  # the symbols so far -> the counts (V,) of the next one


def _row(counts_of: Tensor | CountsOf, i: int, previous: list[int]) -> Tensor:
    """The counts of symbol i: row i of a table, or what the model says after the symbols so far."""
    return _check_counts(counts_of[i] if isinstance(counts_of, Tensor) else counts_of(previous))


def encode(symbols: Sequence[int], counts_of: Tensor | CountsOf) -> bytes:
    """Arithmetic-code ``symbols``: symbol i with the counts ``counts_of[i]`` (a table (N, V)) or
    ``counts_of(symbols[:i])`` (a model: the same function the decoder will call). Returns the bytes."""
    symbols = [_symbol(s) for s in symbols]
    if isinstance(counts_of, Tensor) and (counts_of.dim() != 2 or len(counts_of) != len(symbols)):
        raise error(
            f"la tabla de cuentas debe tener forma (N, V) con N = {len(symbols)} símbolos, no {tuple(counts_of.shape)}",
            f"the table of counts must have shape (N, V) with N = {len(symbols)} symbols, got {tuple(counts_of.shape)}",
        )
    coder = ArithmeticEncoder()
    for i, symbol in enumerate(symbols):
        counts = _row(counts_of, i, symbols[:i])
        if not 0 <= symbol < len(counts):
            raise error(
                f"el símbolo {symbol} no está entre los {len(counts)} del modelo",
                f"symbol {symbol} is not among the model's {len(counts)}",
            )
        start = int(counts[:symbol].sum())
        coder.encode(start, start + int(counts[symbol]), int(counts.sum()))
    return coder.finish()


def decode(data: bytes, n: int, counts_of: Tensor | CountsOf) -> list[int]:
    """The ``n`` symbols that :func:`encode` wrote into ``data`` with the same ``counts_of``."""
    if isinstance(n, bool) or not isinstance(n, numbers.Integral) or n < 0:
        raise error(f"n debe ser un entero ≥ 0, no {n!r}", f"n must be an integer ≥ 0, got {n!r}")
    coder = ArithmeticDecoder(_as_bytes(data, "data"))
    symbols: list[int] = []
    for i in range(int(n)):
        counts = _row(counts_of, i, symbols)
        cumulative = counts.cumsum(0)  # (V,) where each symbol's counts end
        total = int(cumulative[-1])
        symbol = int(torch.searchsorted(cumulative, coder.target(total), right=True))
        stop = int(cumulative[symbol])
        coder.decode(stop - int(counts[symbol]), stop, total)
        symbols.append(symbol)
    return symbols


def _symbol(s: Any) -> int:
    if isinstance(s, Tensor) and s.numel() == 1 and not s.is_floating_point():
        s = s.item()
    if isinstance(s, bool) or not isinstance(s, numbers.Integral):
        raise error(f"los símbolos deben ser enteros, no {s!r}", f"the symbols must be integers, got {s!r}")
    return int(s)


# --------------------------------------------------------------------------- a token model


def _check_positive(value: int, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
        raise error(f"{name} debe ser un entero ≥ 1, no {value!r}", f"{name} must be an integer ≥ 1, got {value!r}")
    return int(value)


@torch.no_grad()
def model_bits_per_byte(
    model: torch.nn.Module | Sequence[torch.nn.Module],
    ids: Sequence[int] | Tensor,
    n_bytes: int,
    *,
    context: int,
    stride: int,
    start: int = 0,
    batch_size: int = 64,
    weights: Sequence[float] | None = None,
) -> float:
    """A language model's loss on a text in bits per byte, scored with a sliding window.

    Every token of ``ids[start:]`` is predicted from the tokens before it (``ids[:start]`` is only
    context; the first token, having nothing before it, is never scored). Windows of ``context``
    input tokens move by ``stride``: the window starting at token b reads ``ids[b : b + context]`` and
    predicts ``ids[b + 1 : b + context + 1]``; it scores only the targets after those of the window before,
    so each token is scored exactly once, with at least ``context - stride + 1`` tokens before it in its
    window (all there are near the start). This is Hugging Face's perplexity loop (``for begin in
    range(0, N, stride)``) run over (input, target) pairs, so that with ``stride = context`` the first
    token of each window is scored too. ``stride = 1`` predicts every token from the ``context`` tokens before
    it; a larger stride is faster and sees less context.

    Args:
        model: maps (B, T) ids to logits (B, T, V); run in eval mode on its own device. Or several models (on
            one device), whose probabilities are mixed, ``Σ weights[i] · p_i``, as :func:`compress_with_model`
            mixes them: then the ideal size of its static file (without the counts' rounding).
        ids: the text's token ids, (N,).
        n_bytes: the UTF-8 bytes of the scored tokens' text.
        context: T, the window length (at most the model's ``max_len``).
        stride: how far a window moves, 1 ≤ stride ≤ context.
        start: the index of the first token to score.
        batch_size: windows per forward pass.
        weights: the mixture's, one per model, adding up to 1 (equal weights by default).

    Returns:
        the total loss of the scored tokens (log_softmax in float32, or the log of the mixed softmaxes, summed in
        float64) / ln 2 / ``n_bytes``.
    """
    models = _as_models(model)
    weights = _mixture_weights(weights, len(models))
    context = _check_positive(context, "context")
    stride = _check_positive(stride, "stride")
    batch_size = _check_positive(batch_size, "batch_size")
    if stride > context:
        raise error(
            f"stride debe estar entre 1 y context ({context}): una ventana que avanza más de lo que mide "
            f"dejaría tokens sin puntuar; no {stride}",
            f"stride must lie between 1 and context ({context}): a window moving further than its length "
            f"would leave tokens unscored; got {stride}",
        )
    if isinstance(start, bool) or not isinstance(start, numbers.Integral) or start < 0:
        raise error(f"start debe ser un entero ≥ 0, no {start!r}", f"start must be an integer ≥ 0, got {start!r}")
    ids = torch.as_tensor(ids).reshape(-1)  # (N,)
    if ids.is_floating_point() or ids.is_complex() or ids.dtype == torch.bool:
        raise error("ids deben ser enteros (ids de tokens)", "ids must be integers (token ids)")
    first = max(int(start), 1) - 1  # pairs (ids[q], ids[q + 1]): the first scored target is ids[first + 1]
    pairs = len(ids) - 1
    if first >= pairs:
        raise error(
            f"no hay ningún token que puntuar: {len(ids)} ids y start = {start}",
            f"there is no token to score: {len(ids)} ids and start = {start}",
        )
    try:
        device = next(models[0].parameters()).device
    except StopIteration:
        device = torch.device("cpu")
    ids = ids.long().to(device)

    windows = _sliding_windows(pairs, first, context, stride)  # (begin, end, the first pair it scores)

    total = torch.zeros((), dtype=torch.float64, device=device)
    with contextlib.ExitStack() as modes:
        for m in models:
            modes.enter_context(eval_mode(m))
        full = [w for w in windows if w[1] - w[0] == context]
        short = [w for w in windows if w[1] - w[0] < context]  # the last window only, if any
        groups = [full[i : i + batch_size] for i in range(0, len(full), batch_size)] + [[w] for w in short]
        for group in groups:
            length = group[0][1] - group[0][0]
            offsets = torch.arange(length, device=device)  # (T,)
            begins = torch.tensor([w[0] for w in group], device=device)  # (B,)
            scored_from = torch.tensor([w[2] for w in group], device=device)  # (B,)
            where = begins[:, None] + offsets  # (B, T) pair indices
            keep = where >= scored_from[:, None]  # (B, T) the positions this window scores
            target = ids[where + 1][keep]  # (K,)
            if len(models) == 1:
                scored = models[0](ids[where])[keep].float()  # (K, V) only those: log_softmax where it counts
                log_probs = scored.gather(-1, target[:, None])[:, 0] - torch.logsumexp(scored, dim=-1)  # (K,)
            else:
                mixed = sum(w * torch.softmax(m(ids[where])[keep].float(), -1) for m, w in zip(models, weights))
                log_probs = mixed.gather(-1, target[:, None])[:, 0].log()  # (K,)
            total -= log_probs.double().sum()
    return bits_per_byte(total.item(), n_bytes)


# --------------------------------------------------------------------------- a token model as a compressor


_PARAMETERS = {"all": "", "blocks": "blocks.", "output": "lm_head."}  # which parameters learn: their names' start


@dataclass(frozen=True)
class CodingSettings:
    """How a token model codes a text with :func:`compress_with_model` and :func:`decompress_with_model`.

    The windows are :func:`model_bits_per_byte`'s: ``context`` tokens that move by ``stride``, each coding the
    tokens after the window before it, so that, past the start, every token is predicted with at least
    ``context − stride`` tokens before it. With ``lr > 0`` the model keeps learning as it codes (dynamic
    evaluation; Krause et al., 2018): once a window is coded, ``steps`` steps of plain gradient descent with rate
    ``lr`` on the cross-entropy of that whole window, for the ``parameters`` chosen; the decoder, having just
    decoded the same window, takes the same steps.
    """

    context: int  # T, the window length (at most the model's max_len)
    stride: int  # tokens coded per window, 1 ≤ stride ≤ context
    lr: float = 0.0  # the rate of the steps after each window; 0: the model does not change
    steps: int = 1  # steps after each window
    parameters: str = "all"  # which learn: "all", "blocks" (the blocks only) or "output" (the output layer only)

    def __post_init__(self):
        _check_positive(self.context, "context")
        _check_positive(self.stride, "stride")
        _check_positive(self.steps, "steps")
        if self.stride > self.context:
            raise error(
                f"stride debe estar entre 1 y context ({self.context}), no {self.stride}",
                f"stride must lie between 1 and context ({self.context}), got {self.stride}",
            )
        if isinstance(self.lr, bool) or not isinstance(self.lr, numbers.Real) or not 0 <= self.lr < math.inf:
            raise error(f"lr debe ser un número ≥ 0, no {self.lr!r}", f"lr must be a number ≥ 0, got {self.lr!r}")
        if self.parameters not in _PARAMETERS:
            raise error(
                f"parameters debe ser uno de {tuple(_PARAMETERS)}, no {self.parameters!r}",
                f"parameters must be one of {tuple(_PARAMETERS)}, got {self.parameters!r}",
            )


@dataclass
class CodingReport:
    """What :func:`compress_with_model` or :func:`decompress_with_model` used, filled as they code: a hash of every probability row
    (one per coded token, in order), and the ideal sizes of the coded tokens, in bits: under the model's
    probabilities (its cross-entropy) and under the integer counts the coder narrowed with."""

    row_hashes: list[str] = field(default_factory=list)
    model_bits: float = 0.0
    count_bits: float = 0.0
    updates: int = 0  # steps the model took


def _sliding_windows(pairs: int, first: int, context: int, stride: int) -> list[tuple[int, int, int]]:
    """Hugging Face's perplexity loop over (input, target) pairs: (begin, end, scored_from) of each window, pair
    indices; the window reads ids[begin:end] and scores the pairs scored_from .. end − 1 (targets one further)."""
    windows, previous_end = [], 0
    for begin in range(0, pairs, stride):
        end = min(begin + context, pairs)
        if end > first:
            windows.append((begin, end, max(previous_end, first)))
        previous_end = end
        if end == pairs:
            break
    return windows


def _as_models(models: torch.nn.Module | Sequence[torch.nn.Module]) -> list[torch.nn.Module]:
    models = [models] if isinstance(models, torch.nn.Module) else list(models)
    if not models or not all(isinstance(m, torch.nn.Module) for m in models):
        raise error(
            "models debe ser un modelo de PyTorch o una lista de ellos",
            "models must be a PyTorch model or a list of them",
        )
    return models


def _mixture_weights(weights: Sequence[float] | None, n: int) -> list[float]:
    if weights is None:
        return [1 / n] * n
    weights = [float(w) for w in weights]
    if len(weights) != n or any(not w > 0 for w in weights) or abs(sum(weights) - 1) > 1e-9:
        raise error(
            f"weights deben ser {n} números > 0 que sumen 1, uno por modelo",
            f"weights must be {n} numbers > 0 adding up to 1, one per model",
        )
    return weights


@torch.no_grad()
def window_probabilities(
    models: torch.nn.Module | Sequence[torch.nn.Module],
    window: Sequence[int] | Tensor,
    context: int,
    weights: Sequence[float] | None = None,
) -> Tensor:
    """The one probability function of :func:`compress_with_model` and :func:`decompress_with_model`: the next-token distribution at
    every position of ``window``, the window always padded to ``context`` tokens.

    Always the same shape, because the same positions computed in inputs of other shapes (a shorter prefix,
    the key-value cache) can differ in their last bits, and a decoder that differs from its encoder by one bit
    of one probability can decode another symbol. Padding after the window changes nothing before it (the mask
    is causal and gives the padded keys a weight of exactly 0), so the encoder may compute a whole window at once
    and the decoder the same window one known token at a time. Several models: their probabilities mixed,
    ``Σ weights[i] · p_i`` (equal weights by default).

    Shapes: window (L,), L ≤ context -> (L, V) float32.
    """
    models = _as_models(models)
    weights = _mixture_weights(weights, len(models))
    window = torch.as_tensor(window, dtype=torch.long).reshape(-1)
    if not 0 < len(window) <= context:
        raise error(
            f"la ventana debe tener entre 1 y context = {context} tokens, no {len(window)}",
            f"the window must hold between 1 and context = {context} tokens, got {len(window)}",
        )
    padded = torch.zeros(1, context, dtype=torch.long)  # (1, T) the padding's id is never read
    padded[0, : len(window)] = window
    mixed = None
    for model, w in zip(models, weights):
        with eval_mode(model) if model.training else contextlib.nullcontext():
            logits = model(padded.to(next(model.parameters()).device))  # (1, T, V)
        probs = torch.softmax(logits.float(), -1)[0].cpu()  # (T, V)
        mixed = probs if len(models) == 1 else w * probs if mixed is None else mixed + w * probs
    return mixed[: len(window)]


def _take_steps(models: list[torch.nn.Module], window: Tensor, settings: CodingSettings) -> int:
    """Dynamic evaluation: ``settings.steps`` steps of gradient descent on the cross-entropy of ``window``
    (L + 1 tokens: inputs and targets), for every model. Returns the number of steps taken."""
    if settings.lr == 0:
        return 0
    inputs, targets = window[None, :-1], window[1:]  # (1, L), (L,)
    for model in models:
        start = _PARAMETERS[settings.parameters]
        params = [p for name, p in model.named_parameters() if p.requires_grad and name.startswith(start)]
        # no dropout: nothing random, the decoder takes the very same steps (the coding copies are in eval mode)
        with eval_mode(model) if model.training else contextlib.nullcontext():
            for _ in range(settings.steps):
                loss = F.cross_entropy(model(inputs)[0].float(), targets)
                grads = torch.autograd.grad(loss, params)
                with torch.no_grad():
                    for p, g in zip(params, grads):
                        p.add_(g, alpha=-settings.lr)
    return settings.steps * len(models)


def _row_hash(row: Tensor) -> str:
    return hashlib.blake2b(row.numpy().tobytes(), digest_size=8).hexdigest()


def _lockstep(
    models: list[torch.nn.Module],
    settings: CodingSettings,
    weights: list[float],
    ids: list[int],
    n_prefix: int,
    n_tokens: int,
    code: Callable[[np.ndarray, int], int],
    report: CodingReport | None,
) -> None:
    """The walk both sides make: the windows in order, each token's probability row from
    :func:`window_probabilities` and its integer counts (:func:`frequencies`), the coding (``code(counts,
    position)`` codes or decodes the token at ``position`` of ``ids``, returning it), then the steps on the finished
    window. The encoder's ``ids`` hold the whole text, the decoder's grow as it decodes; everything else is the same
    code (the encoder turns a window's rows into counts at once, the decoder one row at a time: the same counts, as
    each row's counts depend on that row only)."""
    pairs = n_prefix + n_tokens - 1
    for begin, end, scored_from in _sliding_windows(pairs, n_prefix - 1, settings.context, settings.stride):
        known = None  # the encoder computes a window once: every token of it is already known
        for q in range(scored_from, end):  # pair q: ids[q] -> ids[q + 1]
            if q + 1 >= len(ids):  # the decoder: only the tokens up to q are known
                row = window_probabilities(models, ids[begin : q + 1], settings.context, weights)[q - begin]
                counts = _quantize(row.numpy().astype(np.float64))  # (V,)
            else:
                if known is None:
                    known = window_probabilities(models, ids[begin:end], settings.context, weights)[
                        scored_from - begin :
                    ]
                    known_counts = _quantize(known.numpy().astype(np.float64))  # (end − scored_from, V)
                row, counts = known[q - scored_from], known_counts[q - scored_from]
            # row (V,): the distribution of token q + 1; counts (V,): what the coder narrows with
            token = code(counts, q + 1)
            if report is not None:
                report.row_hashes.append(_row_hash(row))
                report.model_bits -= math.log2(row[token].item())
        steps = _take_steps(models, torch.tensor(ids[begin : end + 1]), settings)
        if report is not None:
            report.updates += steps


_MAGIC = b"LM\x01"  # what the file is, and the version of its layout
_HEADER = struct.Struct(">3sIII")  # magic, the model's fingerprint, the number of tokens, the text's CRC-32
_CHECK = struct.Struct(">H")  # the header's own check: a damaged header is caught before any decoding


def _fingerprint(models: list[torch.nn.Module], settings: CodingSettings, weights: list[float], prefix: str) -> int:
    """A CRC-32 of everything the decoder must share with the encoder: every weight, bit for bit, the settings,
    the mixture's weights and the prefix."""
    crc = zlib.crc32(repr((settings, weights, prefix)).encode())
    for model in models:
        for name, tensor in model.state_dict().items():
            crc = zlib.crc32(name.encode(), crc)
            crc = zlib.crc32(tensor.detach().cpu().contiguous().reshape(-1).view(torch.uint8).numpy().tobytes(), crc)
    return crc


def _coding_copies(models: torch.nn.Module | Sequence[torch.nn.Module]) -> list[torch.nn.Module]:
    """Copies on the CPU, whatever device the models are on: the caller's models are left as they were, and the
    steps a model takes as it codes must be repeated bit for bit by the decoder, which CUDA's backward passes,
    summed with atomic additions in no fixed order, do not promise."""
    return [copy.deepcopy(model).cpu().eval() for model in _as_models(models)]


def _prefix_ids(tokenizer: Any, prefix: str) -> list[int]:
    ids = list(tokenizer.encode(prefix))
    if not ids:
        raise error(
            "prefix no puede estar vacío: el primer token se predice a partir de él",
            "prefix cannot be empty: the first token is predicted from it",
        )
    return ids


def compress_with_model(
    text: str,
    models: torch.nn.Module | Sequence[torch.nn.Module],
    tokenizer: Any,
    settings: CodingSettings,
    *,
    prefix: str = "\n\n",
    weights: Sequence[float] | None = None,
    report: CodingReport | None = None,
) -> bytes:
    """``text`` compressed with a language model: its tokens arithmetic-coded with the model's probabilities.

    The file is a header of 17 bytes (what it is, the model's fingerprint, the number of tokens and the text's
    CRC-32, then a check of the header itself) and the coder's bytes. The model codes on one CPU thread, on a copy
    (see :func:`window_probabilities`; with ``settings.lr > 0`` the copy learns as it codes). ``prefix`` is
    context both sides know: the first token is predicted after it. ``models``: one model, or several whose
    probabilities are mixed with ``weights``. ``report``: filled with what was used (:class:`CodingReport`).

    Decode with :func:`decompress_with_model` and the same models, tokenizer, settings, prefix and weights.
    """
    if not isinstance(text, str):
        raise error(f"text debe ser un str, no {type(text).__name__}", f"text must be a str, got {type(text).__name__}")
    ids = list(tokenizer.encode(text))
    if tokenizer.decode(ids) != text:
        raise error(
            "el tokenizador no devuelve este texto tal cual al decodificarlo: no se puede comprimir sin pérdida",
            "the tokenizer does not give this text back as it was when decoding it: it cannot be compressed losslessly",
        )
    models = _coding_copies(models)
    weights = _mixture_weights(weights, len(models))
    start = _prefix_ids(tokenizer, prefix)
    header = _HEADER.pack(
        _MAGIC, _fingerprint(models, settings, weights, prefix), len(ids), zlib.crc32(text.encode("utf-8"))
    )
    header += _CHECK.pack(zlib.crc32(header) & 0xFFFF)
    if not ids:
        return header
    coder = ArithmeticEncoder()
    everything = start + ids

    def code(counts: np.ndarray, position: int) -> int:
        token = everything[position]
        if not 0 <= token < len(counts):
            raise error(
                f"el token {token} no está en el vocabulario del modelo",
                f"token {token} is not in the model's vocabulary",
            )
        stop = int(counts[: token + 1].sum())
        coder.encode(stop - int(counts[token]), stop, FREQUENCY_TOTAL)
        if report is not None:
            report.count_bits -= math.log2(int(counts[token]) / FREQUENCY_TOTAL)
        return token

    # one thread: the bits must not depend on how many threads the machine has (nor do short windows gain from more)
    with cpu_threads(1):
        _lockstep(models, settings, weights, everything, len(start), len(ids), code, report)
    return header + coder.finish()


def _read_header(blob: bytes) -> tuple[int, int, int]:
    size = _HEADER.size + _CHECK.size
    if len(blob) < size or blob[:3] != _MAGIC:
        raise error(
            "estos bytes no son un archivo escrito por compress_with_model (la cabecera no empieza por «LM»)",
            "these bytes are not a file written by compress_with_model (the header does not start with “LM”)",
        )
    if _CHECK.unpack(blob[_HEADER.size : size])[0] != zlib.crc32(blob[: _HEADER.size]) & 0xFFFF:
        raise error("la cabecera del archivo está dañada", "the file's header is damaged")
    _, fingerprint, n_tokens, crc = _HEADER.unpack(blob[: _HEADER.size])
    return fingerprint, n_tokens, crc


def decompress_with_model(
    blob: bytes,
    models: torch.nn.Module | Sequence[torch.nn.Module],
    tokenizer: Any,
    settings: CodingSettings,
    *,
    prefix: str = "\n\n",
    weights: Sequence[float] | None = None,
    tokens: int | None = None,
    report: CodingReport | None = None,
) -> str:
    """The text :func:`compress_with_model` wrote into ``blob``, decoded with the same models (from the same weights: they
    learn again, step for step, as they decode), tokenizer, settings, prefix and weights.

    ``tokens``: decode only the first ``tokens`` tokens and return their text (nothing to check it against: the
    CRC-32 is the whole text's). A file that is not one, damaged, cut short or written with another model or
    other settings raises an error that says which; the decoder never runs past the tokens the header counts.
    """
    blob = _as_bytes(blob, "blob")
    fingerprint, n_tokens, crc = _read_header(blob)
    models = _coding_copies(models)
    weights = _mixture_weights(weights, len(models))
    start = _prefix_ids(tokenizer, prefix)
    if fingerprint != _fingerprint(models, settings, weights, prefix):
        raise error(
            "este archivo se escribió con otro modelo u otros ajustes (o con los mismos pesos entrenados en otra "
            "máquina, donde los últimos bits de los números cambian): el decodificador necesita los mismos pesos, "
            "bit a bit",
            "this file was written with another model or other settings (or with the same weights trained on another "
            "machine, where the numbers' last bits change): the decoder needs the same weights, bit for bit",
        )
    if tokens is not None:
        if isinstance(tokens, bool) or not isinstance(tokens, numbers.Integral) or tokens < 0:
            raise error(
                f"tokens debe ser un entero ≥ 0, no {tokens!r}", f"tokens must be an integer ≥ 0, got {tokens!r}"
            )
        n_tokens = min(n_tokens, int(tokens))
    ids = list(start)
    if n_tokens:
        coder = ArithmeticDecoder(blob[_HEADER.size + _CHECK.size :])

        def code(counts: np.ndarray, position: int) -> int:  # counts (V,): the encoder's, from the same row
            cumulative = np.cumsum(counts)  # (V,) where each token's counts end
            token = int(np.searchsorted(cumulative, coder.target(FREQUENCY_TOTAL), side="right"))
            stop = int(cumulative[token])
            coder.decode(stop - int(counts[token]), stop, FREQUENCY_TOTAL)
            ids.append(token)
            if report is not None:
                report.count_bits -= math.log2(int(counts[token]) / FREQUENCY_TOTAL)
            return token

        with cpu_threads(1):  # as the encoder
            _lockstep(models, settings, weights, ids, len(start), n_tokens, code, report)
    text = tokenizer.decode(ids[len(start) :])
    if tokens is None and zlib.crc32(text.encode("utf-8")) != crc:
        raise error(
            "el texto decodificado no coincide con su suma de comprobación (CRC-32): el archivo está dañado, o el "
            "decodificador no ha repetido exactamente los pasos del codificador",
            "the decoded text does not match its checksum (CRC-32): the file is damaged, or the decoder did not repeat "
            "the encoder's steps exactly",
        )
    return text
