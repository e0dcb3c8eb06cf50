"""A language model is a compressor: its loss in bits per byte against gzip, bz2, xz and byte n-grams.

A model that gives the next byte probability p can code it in -log2 p bits (an arithmetic coder
gets within a couple of bits of the total for a whole text). So the model's cross-entropy on a
held-out text, in **bits per byte** (total bits / the text's UTF-8 bytes), is the size of the
file it could compress that text to; a byte costs 8 bits stored as it is. Measured this way, a
model and a general-purpose compressor are ranked on one scale:

* :data:`UNIFORM_BITS` (= :func:`uniform_bits_per_byte`): 8 bits, every byte equally likely;
* :func:`unigram_bits_per_byte`: each byte's frequency in the training text (add-one smoothing);
* :func:`compressed_bits_per_byte`: what gzip (LZ77 + Huffman), bz2 (Burrows-Wheeler) or xz
  (LZMA) add to the compressed size when the held-out text follows the training text, so the
  compressor may copy from what it has seen, as the model has learnt from it;
* :class:`ByteNGram`: a byte n-gram with interpolated Kneser-Ney smoothing, the strongest
  count-based baseline, its order picked on training data only by :func:`choose_order`;
* :func:`model_bits_per_byte`: a token model's loss over a text, scored with a sliding window,
  turned into bits per byte of that text (tokens differ between tokenizers, bytes do not).

:func:`bits_per_byte` turns nats (PyTorch's cross-entropy) into bits per byte: nats / ln 2 / bytes.

Text given as ``str`` is encoded as UTF-8. Bad arguments raise
:class:`~minitransformer.i18n.CourseError` (a ``ValueError``) in the language of the package's messages.

Letters: B batch (windows), T window length (``context``), V vocabulary.
"""

from __future__ import annotations

import bz2
import gzip
import lzma
import math
import numbers
import random
from collections.abc import Iterable, Sequence

import numpy as np
import torch
from torch import Tensor

from .i18n import error
from .runtime import eval_mode

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

    def fit(self, data: bytes | str) -> ByteNGram:
        """Count the grams of ``data`` (replacing any earlier counts); returns the model."""
        array = np.frombuffer(_nonempty(data, "data"), dtype=np.uint8)
        n = self.order
        self.levels = []
        for k in range(1, n + 1):
            if k == n:  # the highest order: how often each gram occurs
                codes, counts = np.unique(_gram_codes(array, k), return_counts=True)
            else:  # lower orders: how many different bytes come before each gram
                distinct = np.unique(_gram_codes(array, k + 1))
                mask = np.uint64((1 << (8 * k)) - 1)
                codes, counts = np.unique(distinct & mask, return_counts=True)
            self.levels.append(_Level(codes, counts))
        return self

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

    def bits(self, data: bytes | str, context: bytes | str = b"") -> float:
        """Total bits of ``data``: Σ -log2 P(byte | the bytes before it), ``context`` coming first."""
        self._check_fitted()
        data = _as_bytes(data, "data")
        context = _as_bytes(context, "context")
        if not data:
            return 0.0
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

    def bits_per_byte(self, data: bytes | str, context: bytes | str = b"") -> float:
        """:meth:`bits` divided by the bytes of ``data``."""
        data = _nonempty(data, "data")
        return self.bits(data, context) / len(data)

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


def choose_order(train: bytes | str, orders: Iterable[int] = range(1, MAX_ORDER + 1), validation: float = 0.1) -> int:
    """The n-gram order to use for ``train``, chosen on training data only: fit a :class:`ByteNGram` of each
    order on the first ``1 - validation`` of the bytes, return the order with the lowest bits per byte on the
    rest, scored after the first part (the smallest order on a tie). The held-out text never takes part."""
    train = _nonempty(train, "train")
    orders = list(orders)
    if not orders:
        raise error("orders está vacío: no hay ningún orden entre el que elegir", "orders is empty: no order to choose")
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
    fit, held = train[:cut], train[cut:]
    scores = {order: ByteNGram(order).fit(fit).bits_per_byte(held, context=fit) for order in orders}
    return min(orders, key=lambda order: (scores[order], order))


# --------------------------------------------------------------------------- a token model


def _check_positive(value: int, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
        raise error(f"{name} debe ser un entero ≥ 1, no {value!r}", f"{name} must be an integer ≥ 1, got {value!r}")
    return int(value)


@torch.no_grad()
def model_bits_per_byte(
    model: torch.nn.Module,
    ids: Sequence[int] | Tensor,
    n_bytes: int,
    *,
    context: int,
    stride: int,
    start: int = 0,
    batch_size: int = 64,
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
        model: maps (B, T) ids to logits (B, T, V); run in eval mode on its own device.
        ids: the text's token ids, (N,).
        n_bytes: the UTF-8 bytes of the scored tokens' text.
        context: T, the window length (at most the model's ``max_len``).
        stride: how far a window moves, 1 ≤ stride ≤ context.
        start: the index of the first token to score.
        batch_size: windows per forward pass.

    Returns:
        the total loss of the scored tokens (log_softmax in float32, summed in float64) / ln 2 / ``n_bytes``.
    """
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
        device = next(model.parameters()).device
    except StopIteration:
        device = torch.device("cpu")
    ids = ids.long().to(device)

    # The windows as in Hugging Face's loop: begin, end (pair indices), and the first pair each one scores.
    windows: list[tuple[int, int, int]] = []
    previous_end = 0
    for begin in range(0, pairs, stride):
        end = min(begin + context, pairs)
        if end > first:
            windows.append((begin, end, max(previous_end, first)))
        previous_end = end
        if end == pairs:
            break

    total = torch.zeros((), dtype=torch.float64, device=device)
    with eval_mode(model):
        full = [w for w in windows if w[1] - w[0] == context]
        short = [w for w in windows if w[1] - w[0] < context]  # the last window only, if any
        groups = [full[i : i + batch_size] for i in range(0, len(full), batch_size)] + [[w] for w in short]
        for group in groups:
            length = group[0][1] - group[0][0]
            offsets = torch.arange(length, device=device)  # (T,)
            begins = torch.tensor([w[0] for w in group], device=device)  # (B,)
            scored_from = torch.tensor([w[2] for w in group], device=device)  # (B,)
            where = begins[:, None] + offsets  # (B, T) pair indices
            logits = model(ids[where])  # (B, T, V)
            keep = where >= scored_from[:, None]  # (B, T) the positions this window scores
            scored = logits[keep].float()  # (K, V) only those: log_softmax where it counts
            target = ids[where + 1][keep]  # (K,)
            log_probs = scored.gather(-1, target[:, None])[:, 0] - torch.logsumexp(scored, dim=-1)  # (K,)
            total -= log_probs.double().sum()
    return bits_per_byte(total.item(), n_bytes)
