"""Byte n-grams: the strongest count-based baseline of a language model as a compressor, in bits per byte.

* :class:`ByteNGram`: a byte n-gram with interpolated Kneser-Ney smoothing, its order (and discount) picked on
  training data only by :func:`choose_order` (:func:`choose_ngram`);
* :class:`NGramReader` reads a text with it byte by byte, and with ``adapt=True`` keeps counting what it reads (the
  counts the arithmetic coder's decoder has too, having decoded the same bytes).

Text given as ``str`` is encoded as UTF-8. Bad arguments raise :class:`~minitransformer.i18n.CourseError` (a
``ValueError``) in the language of the package's messages.
"""

from __future__ import annotations

import math
import numbers
import random
from collections.abc import Iterable, Sequence

import numpy as np

from .compression import _as_bytes, _nonempty
from .i18n import error

__all__ = ["MAX_ORDER", "DISCOUNTS", "ByteNGram", "NGramReader", "choose_order", "choose_ngram"]

MAX_ORDER = 8  # the longest byte n-gram ByteNGram counts (one gram is packed into a 64-bit integer)


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
