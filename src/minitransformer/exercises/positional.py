"""Checkers for the positional-encoding exercises (notebook 03).

Each checker runs the student's function on fixed cases, compares it with the package's
:func:`~minitransformer.positional.sinusoidal_encoding` or with the maths, and, when the
answer is wrong, compares it with the typical mistakes (sines and cosines concatenated or
swapped, one frequency per dimension instead of per pair, positions counted from 1, the
inverse permutation, the rotation turned the wrong way, ...) to name the one that was made.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor

from ..positional import sinusoidal_encoding
from ._core import COMMON_HINTS, Feedback, Unfinished, attempt, checker, correct, not_yet

__all__ = ["HINTS", "check_sinusoidal_encoding", "check_interleaved_to_concat", "check_shift_matrix_concat"]

# Every hint the checkers can give, (Spanish, English); the tests refer to them by key.
HINTS: dict[str, tuple[str, str]] = {
    **COMMON_HINTS,
    "wrong_shape": (
        "la forma es {got}, pero debería ser {want}.",
        "the shape is {got}, but it should be {want}.",
    ),
    # the table
    "transposed": (
        "la tabla está traspuesta: una fila por posición, una columna por dimensión, "
        "forma (max_len, d_model).",
        "the table is transposed: one row per position, one column per dimension, "
        "shape (max_len, d_model).",
    ),
    "concatenated": (
        "pusiste todos los senos primero y todos los cosenos después. Esa disposición también "
        "funciona, pero el artículo los intercala: seno en las dimensiones pares (`pe[:, 0::2]`) "
        "y coseno en las impares (`pe[:, 1::2]`).",
        "you put all the sines first and all the cosines after them. That layout works too, "
        "but the paper interleaves them: sine on the even dimensions (`pe[:, 0::2]`) and cosine "
        "on the odd ones (`pe[:, 1::2]`).",
    ),
    "swapped": (
        "seno y coseno están intercambiados: el seno va en las dimensiones pares 2i y el coseno "
        "en las impares 2i+1.",
        "sine and cosine are swapped: the sine goes on the even dimensions 2i and the cosine on "
        "the odd ones 2i+1.",
    ),
    "freq_per_dim": (
        "cada dimensión tiene su propia frecuencia; en el artículo las dos dimensiones de un par "
        "(2i, 2i+1) comparten la misma: 1 / 10000^(2i/d_model). Usa `torch.arange(0, d_model, 2)` "
        "para el exponente.",
        "each dimension has its own frequency; in the paper both dimensions of a pair "
        "(2i, 2i+1) share the same one: 1 / 10000^(2i/d_model). Use `torch.arange(0, d_model, 2)` "
        "for the exponent.",
    ),
    "double_exponent": (
        "el exponente es el doble de lo que debe: si `i` ya recorre 0, 2, 4, ... no lo "
        "multipliques otra vez por 2. El exponente del par (2i, 2i+1) es 2i/d_model.",
        "the exponent is twice what it should be: if `i` already runs over 0, 2, 4, ... do not "
        "multiply it by 2 again. The exponent of the pair (2i, 2i+1) is 2i/d_model.",
    ),
    "multiplied": (
        "multiplicas la posición por 10000^(2i/d_model) en lugar de dividirla: el ángulo es "
        "pos / 10000^(2i/d_model).",
        "you multiply the position by 10000^(2i/d_model) instead of dividing it: the angle is "
        "pos / 10000^(2i/d_model).",
    ),
    "from_one": (
        "las posiciones empiezan en 0, no en 1: la primera fila es sin(0) = 0 y cos(0) = 1.",
        "positions start at 0, not at 1: the first row is sin(0) = 0 and cos(0) = 1.",
    ),
    "table_wrong": (
        "los valores no coinciden con la fórmula (diferencia máxima {diff}). Revisa el ángulo "
        "pos / 10000^(2i/d_model) y qué dimensiones llevan seno y cuáles coseno.",
        "the values do not match the formula (largest difference {diff}). Check the angle "
        "pos / 10000^(2i/d_model) and which dimensions hold sine and which cosine.",
    ),
    # the permutation
    "not_permutation": (
        "eso no es una permutación de 0..d_model-1: cada columna debe aparecer exactamente una vez.",
        "that is not a permutation of 0..d_model-1: each column must appear exactly once.",
    ),
    "inverse_permutation": (
        "esa es la permutación inversa (la del cuaderno, que va de concatenada a intercalada). "
        "`interleaved[:, perm]` pone en la columna j la columna `perm[j]` de la intercalada: la "
        "columna j = i de la concatenada es el seno i, que en la intercalada está en la columna 2i.",
        "that is the inverse permutation (the notebook's, from concatenated to interleaved). "
        "`interleaved[:, perm]` puts column `perm[j]` of the interleaved table in column j: column "
        "j = i of the concatenated table is sine i, which sits at column 2i of the interleaved one.",
    ),
    "permutation_wrong": (
        "`interleaved[:, perm]` todavía no es la tabla concatenada: sus primeras d_model/2 columnas "
        "son los senos (columnas pares 0, 2, 4, ... de la intercalada) y las siguientes, los cosenos "
        "(columnas impares 1, 3, 5, ...).",
        "`interleaved[:, perm]` is not yet the concatenated table: its first d_model/2 columns are "
        "the sines (even columns 0, 2, 4, ... of the interleaved one) and the next ones the cosines "
        "(odd columns 1, 3, 5, ...).",
    ),
    # the shift matrix, concatenated layout
    "shift_interleaved": (
        "esa es la matriz M_k de la disposición intercalada, con bloques 2×2 en la diagonal. En la "
        "concatenada el seno i está en la columna i y su coseno en la columna d_model/2 + i: la "
        "matriz tiene cuatro bloques diagonales, [[C, S], [−S, C]] con C = diag(cos kω_i) y "
        "S = diag(sin kω_i).",
        "that is the matrix M_k of the interleaved layout, with 2×2 blocks on the diagonal. In the "
        "concatenated layout sine i sits at column i and its cosine at column d_model/2 + i: the "
        "matrix has four diagonal blocks, [[C, S], [−S, C]] with C = diag(cos kω_i) and "
        "S = diag(sin kω_i).",
    ),
    "shift_backwards": (
        "tu matriz lleva PE(p) a PE(p − k): gira hacia atrás. El seno positivo va en el bloque de "
        "arriba a la derecha: [[C, S], [−S, C]] (o traspón tu matriz).",
        "your matrix takes PE(p) to PE(p − k): it turns backwards. The positive sine goes in the "
        "top-right block: [[C, S], [−S, C]] (or transpose your matrix).",
    ),
    "shift_identity": (
        "tu matriz deja PE(p) igual; para k ≠ 0 cada par (seno i, coseno i) debe girar un ángulo k·ω_i.",
        "your matrix leaves PE(p) unchanged; for k ≠ 0 each pair (sine i, cosine i) must turn by an "
        "angle k·ω_i.",
    ),
    "shift_wrong": (
        "M_k · PE(p) no es PE(p + k) (diferencia máxima {diff}). Con C = diag(cos kω_i), "
        "S = diag(sin kω_i) y ω_i = 1 / 10000^(2i/d_model), la matriz es [[C, S], [−S, C]].",
        "M_k · PE(p) is not PE(p + k) (largest difference {diff}). With C = diag(cos kω_i), "
        "S = diag(sin kω_i) and ω_i = 1 / 10000^(2i/d_model), the matrix is [[C, S], [−S, C]].",
    ),
}


def hint(lang: str, key: str, **fields: Any) -> Feedback:
    """The "not yet" feedback for one of :data:`HINTS`."""
    es, en = HINTS[key]
    return not_yet(lang, es.format(**fields), en.format(**fields))


def _tensor(lang: str, x: Any) -> Tensor:
    if not isinstance(x, Tensor):
        raise Unfinished(hint(lang, "not_tensor"))
    x = x.detach().cpu()
    if x.is_floating_point() and not torch.isfinite(x).all():
        raise Unfinished(hint(lang, "nan"))
    return x


def _close(a: Tensor, b: Tensor, atol: float = 1e-4) -> bool:
    return a.shape == b.shape and torch.allclose(a.double(), b.double(), atol=atol, rtol=0.0)


def _table(max_len: int, d_model: int, exponent: Tensor, positions: Tensor, layout: str) -> Tensor:
    """A sinusoidal table with a chosen (possibly wrong) angle, in double precision."""
    angles = positions[:, None] * torch.pow(10000.0, -exponent)[None, :]  # (T, D/2) or (T, D)
    if layout == "per_dim":  # one frequency per dimension, sin on even, cos on odd
        pe = torch.empty(max_len, d_model, dtype=torch.float64)
        pe[:, 0::2] = torch.sin(angles[:, 0::2])
        pe[:, 1::2] = torch.cos(angles[:, 1::2])
        return pe
    pe = torch.empty(max_len, d_model, dtype=torch.float64)
    first, second = (torch.cos, torch.sin) if layout == "swapped" else (torch.sin, torch.cos)
    pe[:, 0::2] = first(angles)
    pe[:, 1::2] = second(angles)
    return pe


def _reference(max_len: int, d_model: int) -> Tensor:
    pos = torch.arange(max_len, dtype=torch.float64)
    return _table(max_len, d_model, torch.arange(0, d_model, 2, dtype=torch.float64) / d_model, pos, "paper")


def _table_mistakes(max_len: int, d_model: int) -> dict[str, Tensor]:
    pos = torch.arange(max_len, dtype=torch.float64)
    pair = torch.arange(0, d_model, 2, dtype=torch.float64) / d_model  # 2i / d_model
    right = _reference(max_len, d_model)
    return {
        "concatenated": torch.cat([right[:, 0::2], right[:, 1::2]], dim=1),
        "swapped": _table(max_len, d_model, pair, pos, "swapped"),
        "freq_per_dim": _table(max_len, d_model, torch.arange(d_model, dtype=torch.float64) / d_model, pos, "per_dim"),
        "double_exponent": _table(max_len, d_model, 2 * pair, pos, "paper"),
        "multiplied": _table(max_len, d_model, -pair, pos, "paper"),
        "from_one": _table(max_len, d_model, pair, pos + 1, "paper"),
    }


@checker
def check_sinusoidal_encoding(encoding: Callable[[int, int], Tensor], lang: str = "es") -> Feedback:
    """Exercise: the paper's sinusoidal table.

    ``encoding(max_len, d_model)`` returns a (max_len, d_model) tensor with
    PE[pos, 2i] = sin(pos / 10000^(2i/d_model)) and PE[pos, 2i+1] = cos(pos / 10000^(2i/d_model)).
    """
    for max_len, d_model in ((12, 8), (50, 32)):
        got = _tensor(lang, attempt(lang, encoding, max_len, d_model))
        want = _reference(max_len, d_model)
        if got.shape == (d_model, max_len) and max_len != d_model:
            return hint(lang, "transposed")
        if got.shape != want.shape:
            return hint(lang, "wrong_shape", got=tuple(got.shape), want=tuple(want.shape))
        if _close(got, want):
            continue
        for key, value in _table_mistakes(max_len, d_model).items():
            if _close(got, value):
                return hint(lang, key)
        diff = round(float((got.double() - want).abs().max()), 4)
        return hint(lang, "table_wrong", diff=diff)
    return correct(
        lang,
        "Tu tabla coincide con `sinusoidal_encoding` del paquete.",
        "Your table matches the package's `sinusoidal_encoding`.",
    )


@checker
def check_interleaved_to_concat(permutation: Callable[[int], Tensor], lang: str = "es") -> Feedback:
    """Exercise: the column order that turns the interleaved layout into the concatenated one.

    ``permutation(d_model)`` returns a (d_model,) tensor of indices ``perm`` such that
    ``interleaved[:, perm]`` equals the concatenated table (all sines, then all cosines).
    """
    for d_model in (4, 8, 64):
        got = _tensor(lang, attempt(lang, permutation, d_model))
        if got.shape != (d_model,):
            return hint(lang, "wrong_shape", got=tuple(got.shape), want=(d_model,))
        if got.is_floating_point():
            if not torch.equal(got, got.round()):
                return hint(lang, "not_permutation")
            got = got.long()
        if not torch.equal(torch.sort(got).values, torch.arange(d_model)):
            return hint(lang, "not_permutation")
        interleaved = sinusoidal_encoding(20, d_model, interleaved=True)
        concat = sinusoidal_encoding(20, d_model, interleaved=False)
        if torch.equal(interleaved[:, got], concat):
            continue
        if torch.equal(concat[:, got], interleaved):
            return hint(lang, "inverse_permutation")
        return hint(lang, "permutation_wrong")
    return correct(
        lang,
        "Las dos disposiciones guardan los mismos números en otro orden de columnas.",
        "The two layouts hold the same numbers in a different column order.",
    )


def _omega(d_model: int) -> Tensor:
    return torch.pow(10000.0, -torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)  # (D/2,)


def _interleaved_shift(k: int, d_model: int) -> Tensor:
    c, s = torch.cos(k * _omega(d_model)), torch.sin(k * _omega(d_model))
    m = torch.zeros(d_model, d_model, dtype=torch.float64)
    even = torch.arange(0, d_model, 2)
    m[even, even], m[even, even + 1], m[even + 1, even], m[even + 1, even + 1] = c, s, -s, c
    return m


@checker
def check_shift_matrix_concat(shift_matrix: Callable[[int, int], Tensor], lang: str = "es") -> Feedback:
    """Exercise: M_k with M_k · PE(p) = PE(p + k) for every p, in the concatenated layout.

    ``shift_matrix(k, d_model)`` returns a (d_model, d_model) tensor; it is checked on the
    concatenated table (all sines, then all cosines) for many positions p.
    """
    for k, d_model in ((1, 8), (7, 16), (3, 64)):
        got = _tensor(lang, attempt(lang, shift_matrix, k, d_model))
        if got.shape != (d_model, d_model):
            return hint(lang, "wrong_shape", got=tuple(got.shape), want=(d_model, d_model))
        ref = _reference(60, d_model)  # (T, D), double precision, interleaved
        pe = torch.cat([ref[:, 0::2], ref[:, 1::2]], dim=1)  # (T, D), concatenated
        got = got.double()
        moved = pe[:-k] @ got.T  # row p is M_k · PE(p)
        if _close(moved, pe[k:]):
            continue
        if _close(got, _interleaved_shift(k, d_model)):
            return hint(lang, "shift_interleaved")
        if _close(pe[k:] @ got.T, pe[:-k]):
            return hint(lang, "shift_backwards")
        if _close(moved, pe[:-k]):
            return hint(lang, "shift_identity")
        diff = round(float((moved - pe[k:]).abs().max()), 4)
        return hint(lang, "shift_wrong", diff=diff)
    return correct(
        lang,
        "Una sola matriz para todas las posiciones, también en la disposición concatenada: "
        "solo cambia el orden de filas y columnas.",
        "One matrix for every position, in the concatenated layout too: only the order of rows "
        "and columns changes.",
    )
