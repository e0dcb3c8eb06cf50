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
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np
import torch
from torch import Tensor

from .i18n import decimal, error

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


SUM_TOLERANCE = 1e-3  # how far from 1 a row of probabilities may add up (float32 softmax rows are within 1e-5)


def _quantize(probs: np.ndarray, total: int = FREQUENCY_TOTAL) -> np.ndarray:
    """:func:`frequencies` in NumPy (what the coders call for each token): (..., V) float64 -> (..., V) int64."""
    if not np.isfinite(probs).all() or (probs < 0).any():
        raise error(
            "probs tienen valores negativos, NaN o infinitos: no son probabilidades",
            "probs hold negative, NaN or infinite values: they are not probabilities",
        )
    sums = probs.sum(-1)  # only to refuse what is not a distribution: the counts use no float sum
    if (np.abs(sums - 1) > SUM_TOLERANCE).any():
        worst = float(sums.flat[np.abs(sums - 1).argmax()])
        raise error(
            f"cada fila de probs debe ser una distribución, sumar 1 (± {decimal(SUM_TOLERANCE, 3)}): una suma "
            f"{decimal(worst, 4)}",
            f"each row of probs must be a distribution, adding up to 1 (± {SUM_TOLERANCE}): one adds up to {worst:.4f}",
        )
    base = np.floor(probs * (total - probs.shape[-1])).astype(np.int64) + 1  # (..., V) every symbol ≥ 1
    rest = total - base.sum(-1, keepdims=True)  # (..., 1) what the floors left, an integer
    likeliest = probs.argmax(-1)[..., None]  # (..., 1) the first on a tie
    counts = base.copy()
    np.put_along_axis(counts, likeliest, np.take_along_axis(base, likeliest, -1) + rest, -1)
    short = (counts < 1).any(-1).reshape(-1)  # rows a hair over 1 whose likeliest count cannot pay what they take
    if short.any():
        flat, flat_base, flat_rest = (
            counts.reshape(-1, probs.shape[-1]),
            base.reshape(-1, probs.shape[-1]),
            rest.reshape(-1),
        )
        for i in np.flatnonzero(short):
            flat[i] = _take_from_largest(flat_base[i], int(-flat_rest[i]))
    return counts


def _take_from_largest(counts: np.ndarray, owed: int) -> np.ndarray:
    """``owed`` counts taken back, in integers only: from every count in proportion to what it can give (each is
    left at 1 at least), what the floors leave from the largest (the first on a tie)."""
    spare = counts - 1  # (V,) what each can give
    take = spare * owed // spare.sum()  # (V,) ≤ spare, adding up to at most owed
    remaining = spare - take
    order = np.argsort(-remaining, kind="stable")
    ranked = remaining[order]
    before = np.cumsum(ranked) - ranked  # (V,) what the larger ones gave
    take[order] += np.minimum(ranked, np.maximum(owed - take.sum() - before, 0))
    return counts - take


def narrow(low: int, high: int, start: int, stop: int, total: int) -> tuple[int, int]:
    """The interval [low, high] (integers, both ends included) narrowed to the share of a symbol that owns the
    counts [start, stop) of ``total``: of its ``high − low + 1`` integers, the symbol gets those from
    ``low + ⌊width · start / total⌋`` to ``low + ⌊width · stop / total⌋ − 1``. Integer arithmetic only, so that
    the encoder and the decoder get the very same ends.

    Needs ``0 ≤ low ≤ high < 2^32``, ``0 ≤ start < stop ≤ total ≤ 2^30`` and ``total ≤ high − low + 1`` (every
    symbol keeps at least one integer, as in the coder, whose interval is always wider than 2^30)."""
    _check_share(start, stop, total)
    if not all(_is_int(x) for x in (low, high)) or not 0 <= low <= high < _WHOLE:
        raise error(
            f"low y high deben ser enteros con 0 ≤ low ≤ high < 2^{CODER_BITS}, no {low!r} y {high!r}",
            f"low and high must be integers with 0 ≤ low ≤ high < 2^{CODER_BITS}, got {low!r} and {high!r}",
        )
    width = high - low + 1
    if total > width:
        raise error(
            f"total = {total} es mayor que la anchura del intervalo ({width}): algún símbolo se quedaría sin enteros",
            f"total = {total} is larger than the interval's width ({width}): some symbol would get no integer",
        )
    return low + width * start // total, low + width * stop // total - 1


def _is_int(x: Any) -> bool:
    return isinstance(x, numbers.Integral) and not isinstance(x, bool)


def _check_share(start: int, stop: int, total: int) -> None:
    """A symbol's counts [start, stop) of ``total``: ``0 ≤ start < stop ≤ total ≤ 2^30``, integers."""
    if not all(_is_int(x) for x in (start, stop, total)) or not 0 <= start < stop <= total <= _QUARTER:
        raise error(
            f"un símbolo ocupa las cuentas [start, stop) de total: hacen falta enteros con "
            f"0 ≤ start < stop ≤ total ≤ 2^{CODER_BITS - 2}, no start = {start!r}, stop = {stop!r}, total = {total!r}",
            f"a symbol owns the counts [start, stop) of total: integers with 0 ≤ start < stop ≤ total ≤ "
            f"2^{CODER_BITS - 2} are needed, got start = {start!r}, stop = {stop!r}, total = {total!r}",
        )


class ArithmeticEncoder:
    """An arithmetic coder in integers (Witten, Neal and Cleary, 1987): every symbol narrows the interval
    [low, high] to its share of it, and each bit on which low and high agree is written out.

    ``encode(start, stop, total)`` codes a symbol that owns the counts [start, stop) of ``total``
    (``0 ≤ start < stop ≤ total ≤ 2^30``); :meth:`finish` writes what the decoder still needs and returns the
    bytes. Each time the interval doubles (it is always kept wider than 2^30), one bit is decided: a message whose
    symbols leave an interval of width w out of 2^32 decides k ≤ −log2(w / 2^32) bits, and the bytes are exactly
    ⌈(k + 2) / 8⌉: the decided bits, 2 to end, and the last byte's padding. So a message costs at most its ideal
    size, −log2 of its symbols' shares of the interval, plus 2 bits, rounded up to whole bytes: at most 9 bits
    over. The shares differ from ``count / total`` only by the integers' rounding: a symbol of count c costs at
    most −log2(c / total − 2^-30) bits.
    """

    narrow = staticmethod(narrow)  # the interval narrowing (a subclass may put another in its place)

    def __init__(self) -> None:
        self.low, self.high = 0, _WHOLE - 1  # the interval, both ends included
        self.pending = 0  # bits decided later: the interval straddled the middle, [1/4, 3/4)
        self.bits: list[int] = []
        self.finished = False

    def encode(self, start: int, stop: int, total: int) -> None:
        _check_share(start, stop, total)
        self._check_open()
        low, high = self.narrow(self.low, self.high, start, stop, total)  # the symbol's share of it
        if not 0 <= low <= high < _WHOLE or not self.low <= low <= high <= self.high:
            raise error(
                f"narrow devolvió [{low}, {high}], que no está dentro de [{self.low}, {self.high}]",
                f"narrow returned [{low}, {high}], which is not inside [{self.low}, {self.high}]",
            )
        self.low, self.high = low, high
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

    def _check_open(self) -> None:
        if self.finished:
            raise error(
                "este codificador ya terminó (finish): empieza otro ArithmeticEncoder",
                "this encoder has already finished: start another ArithmeticEncoder",
            )

    def _write(self, bit: int) -> None:
        self.bits.append(bit)
        self.bits.extend([1 - bit] * self.pending)  # the waiting bits are the opposite of the one that decided
        self.pending = 0

    def finish(self) -> bytes:
        """Two more bits (and the waiting ones) pick a point that stays inside the interval whatever follows;
        the bits packed into bytes, the last one padded with zeros."""
        self._check_open()
        self.finished = True
        self.pending += 1
        self._write(_ending_bit(self.low))
        bits = self.bits + [0] * (-len(self.bits) % 8)
        return int("1" + "".join(map(str, bits)), 2).to_bytes(len(bits) // 8 + 1, "big")[1:]


def _ending_bit(low: int) -> int:
    """The first of the encoder's two ending bits: 01 (a point in [1/4, 1/2]) or 10 (in [1/2, 3/4])."""
    return 0 if low < _QUARTER else 1


class ArithmeticDecoder:
    """Reads what :class:`ArithmeticEncoder` wrote: it keeps the same interval as the encoder and ``value``, the
    number the bits written so far spell; the symbol is the one whose share of the interval holds ``value``.

    For each symbol: ``target(total)`` says where ``value`` falls, in counts out of ``total``; the caller finds
    the symbol whose counts [start, stop) hold it and calls ``decode(start, stop, total)``, which narrows the
    interval as the encoder did. Past the end of the data it reads zeros, as the encoder assumed, but no more
    than a coder's width of them: a decoder that needs more has been given damaged or cut data, and says so.
    After the last symbol, :meth:`finish` checks that the data end exactly as the encoder ends: its 2 ending bits,
    the padding, and not one byte more.
    """

    def __init__(self, data: bytes):
        if not isinstance(data, (bytes, bytearray, memoryview)):
            raise error(
                f"data deben ser bytes, no {type(data).__name__}", f"data must be bytes, got {type(data).__name__}"
            )
        self.data = bytes(data)
        self.position = 0  # the next bit to read
        self.low, self.high = 0, _WHOLE - 1
        self.pending = 0  # as the encoder's: the zooms around the middle since the last decided bit
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
        _check_share(0, 1, total)
        width = self.high - self.low + 1
        return ((self.value - self.low + 1) * total - 1) // width

    def decode(self, start: int, stop: int, total: int) -> None:
        _check_share(start, stop, total)
        if not start <= self.target(total) < stop:
            raise error(
                f"el valor leído no cae en las cuentas [{start}, {stop}) de {total}: ese no es el símbolo que "
                "toca (busca el que contiene target(total))",
                f"the value read does not fall in the counts [{start}, {stop}) of {total}: that is not the symbol "
                "here (find the one that holds target(total))",
            )
        self.low, self.high = narrow(self.low, self.high, start, stop, total)  # the encoder's narrowing
        while True:
            if self.high < _HALF:
                self.pending = 0
            elif self.low >= _HALF:
                self.low, self.high, self.value = self.low - _HALF, self.high - _HALF, self.value - _HALF
                self.pending = 0
            elif self.low >= _QUARTER and self.high < 3 * _QUARTER:
                self.low, self.high, self.value = self.low - _QUARTER, self.high - _QUARTER, self.value - _QUARTER
                self.pending += 1
            else:
                break
            self.low, self.high = 2 * self.low, 2 * self.high + 1
            self.value = 2 * self.value + self._bit()

    def finish(self) -> None:
        """Check that the data end where the encoder's end, after the symbols decoded so far: the k bits their
        zooms decided, the encoder's 2 ending bits (with the waiting ones before them), zeros to the end of the
        byte, and nothing after, ⌈(k + 2) / 8⌉ bytes in all. Anything else (bytes left over, such as a second file
        after this one, or a damaged ending) raises."""
        k = self.position - CODER_BITS  # the bits the zooms decided: the encoder wrote k + 2
        bit = _ending_bit(self.low)
        ending = [bit] + [1 - bit] * (self.pending + 1)  # bits k − pending … k + 1
        read = [self._peek(i) for i in range(k - self.pending, 8 * len(self.data))]
        expected = ending + [0] * (-(k + 2) % 8)
        if len(self.data) != -(-(k + 2) // 8) or read != expected:
            raise error(
                f"los datos no terminan donde termina el codificador: tras estos símbolos caben {-(-(k + 2) // 8)} "
                f"bytes y hay {len(self.data)} (bytes de más, como otro archivo detrás, o un final dañado)",
                f"the data do not end where the encoder ends: after these symbols there is room for "
                f"{-(-(k + 2) // 8)} bytes and there are {len(self.data)} (bytes left over, such as another file "
                "after this one, or a damaged ending)",
            )

    def _peek(self, i: int) -> int:
        return (self.data[i // 8] >> (7 - i % 8)) & 1 if 0 <= i < 8 * len(self.data) else -1


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


def _counts_of(counts_of: Any, n: int) -> Tensor | CountsOf:
    """A table (n, V) of counts, or a function of the symbols so far."""
    if isinstance(counts_of, Tensor):
        if counts_of.dim() != 2 or len(counts_of) != n:
            raise error(
                f"la tabla de cuentas debe tener forma (N, V) con N = {n} símbolos, no {tuple(counts_of.shape)}",
                f"the table of counts must have shape (N, V) with N = {n} symbols, got {tuple(counts_of.shape)}",
            )
        return counts_of
    if not callable(counts_of):
        raise error(
            f"counts_of debe ser una tabla de cuentas (N, V) o una función de los símbolos anteriores, no "
            f"{type(counts_of).__name__}",
            f"counts_of must be a table of counts (N, V) or a function of the symbols so far, got "
            f"{type(counts_of).__name__}",
        )
    return counts_of


def _row(counts_of: Tensor | CountsOf, i: int, previous: list[int]) -> Tensor:
    """The counts of symbol i: row i of a table, or what the model says after the symbols so far."""
    return _check_counts(counts_of[i] if isinstance(counts_of, Tensor) else counts_of(previous))


def encode(symbols: Sequence[int], counts_of: Tensor | CountsOf) -> bytes:
    """Arithmetic-code ``symbols``: symbol i with the counts ``counts_of[i]`` (a table (N, V)) or
    ``counts_of(so_far)`` (a model: the same function the decoder will call), where ``so_far`` is the list of
    the symbols before it, one list that grows as they are coded, as the decoder's does (copy it to keep it).
    Returns the bytes: at most the symbols' ideal size plus 2 bits, rounded up to whole bytes
    (:class:`ArithmeticEncoder`)."""
    if isinstance(symbols, (str, bytes)) or not isinstance(symbols, Iterable):
        raise error(
            f"symbols debe ser una lista de enteros, no {type(symbols).__name__}",
            f"symbols must be a list of integers, got {type(symbols).__name__}",
        )
    symbols = [_symbol(s) for s in symbols]
    counts_of = _counts_of(counts_of, len(symbols))
    coder = ArithmeticEncoder()
    so_far: list[int] = []  # what the model is asked with: a view of the symbols coded, never a copy
    for i, symbol in enumerate(symbols):
        counts = _row(counts_of, i, so_far)
        if not 0 <= symbol < len(counts):
            raise error(
                f"el símbolo {symbol} no está entre los {len(counts)} del modelo",
                f"symbol {symbol} is not among the model's {len(counts)}",
            )
        start = int(counts[:symbol].sum())
        coder.encode(start, start + int(counts[symbol]), int(counts.sum()))
        so_far.append(symbol)
    return coder.finish()


def decode(data: bytes, n: int, counts_of: Tensor | CountsOf) -> list[int]:
    """The ``n`` symbols that :func:`encode` wrote into ``data`` with the same ``counts_of``. Data that end
    anywhere else than where the encoder's end after n symbols (damaged, cut short, or with bytes after them)
    raise."""
    if isinstance(n, bool) or not isinstance(n, numbers.Integral) or n < 0:
        raise error(f"n debe ser un entero ≥ 0, no {n!r}", f"n must be an integer ≥ 0, got {n!r}")
    counts_of = _counts_of(counts_of, int(n))
    coder = ArithmeticDecoder(data)
    symbols: list[int] = []
    for i in range(int(n)):
        counts = _row(counts_of, i, symbols)
        cumulative = counts.cumsum(0)  # (V,) where each symbol's counts end
        total = int(cumulative[-1])
        symbol = int(torch.searchsorted(cumulative, coder.target(total), right=True))
        stop = int(cumulative[symbol])
        coder.decode(stop - int(counts[symbol]), stop, total)
        symbols.append(symbol)
    coder.finish()
    return symbols


def _symbol(s: Any) -> int:
    if isinstance(s, Tensor) and s.numel() == 1 and not s.is_floating_point():
        s = s.item()
    if isinstance(s, bool) or not isinstance(s, numbers.Integral):
        raise error(f"los símbolos deben ser enteros, no {s!r}", f"the symbols must be integers, got {s!r}")
    return int(s)
