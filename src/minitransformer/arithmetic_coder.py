"""An arithmetic coder: a list of symbols and their probabilities made into bytes, and back.

:func:`frequencies` turns probabilities into integer counts (every symbol at least one, the same integers on both
sides); :class:`ArithmeticEncoder` narrows an interval of 32-bit integers with each symbol (:func:`narrow`) and writes
the bits its ends agree on, :class:`ArithmeticDecoder` follows it; :func:`encode` and :func:`decode` code a list of
symbols with a table of counts or a model given as a function.

Bad arguments, and damaged data, raise :class:`~minitransformer.i18n.CourseError` (a ``ValueError``) in the language
of the package's messages.
"""

from __future__ import annotations

import numbers
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch
from torch import Tensor

from .compression import _as_bytes
from .i18n import error

__all__ = [
    "CODER_BITS",
    "FREQUENCY_TOTAL",
    "frequencies",
    "narrow",
    "ArithmeticEncoder",
    "ArithmeticDecoder",
    "encode",
    "decode",
]

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
