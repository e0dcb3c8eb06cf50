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
from ._core import (
    COMMON_HINTS,
    Feedback,
    Hints,
    attempt,
    by_key,
    close,
    correct,
    diagnose,
    dtype_name,
    exercise,
    loops_in,
    stop,
    tensor,
    wrong_shape,
)

__all__ = ["HINTS", "check_sinusoidal_encoding", "check_interleaved_to_concat", "check_shift_matrix_concat"]

# Every hint the checkers can give, (Spanish, English); the tests refer to them by key.
HINTS = Hints(
    {
        **COMMON_HINTS,
        # the table
        "transposed": (
            "la tabla está traspuesta: una fila por posición, una columna por dimensión, forma (max_len, d_model).",
            "the table is transposed: one row per position, one column per dimension, shape (max_len, d_model).",
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
            "sine and cosine are swapped: the sine goes on the even dimensions 2i and the cosine on the odd ones 2i+1.",
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
        "loops": (
            "el enunciado pide no usar bucles de Python (hay uno en la línea {line} de tu función): la idea es "
            "calcular todos los ángulos de una vez, por difusión (broadcasting), que es como se escribe en PyTorch "
            "y mucho más rápido.",
            "the statement asks for no Python loops (there is one at line {line} of your function): the idea is to "
            "compute every angle at once, by broadcasting, which is how PyTorch code is written and much faster.",
        ),
        # the permutation
        "perm_not_integer": (
            "los índices deben ser enteros (`torch.long`), no {dtype}: `interleaved[:, perm]` con un tensor de "
            "decimales lanza IndexError.",
            "the indices must be integers (`torch.long`), not {dtype}: `interleaved[:, perm]` with a float tensor "
            "raises IndexError.",
        ),
        "not_permutation": (
            "eso no es una permutación de 0..d_model-1: cada columna debe aparecer exactamente una vez.",
            "that is not a permutation of 0..d_model-1: each column must appear exactly once.",
        ),
        "inverse_permutation": (
            "esa es la permutación inversa (la del cuaderno, que va de concatenada a intercalada). Piensa en la "
            "dirección de `interleaved[:, perm]`: la columna j del resultado es la columna `perm[j]` de la "
            "intercalada.",
            "that is the inverse permutation (the notebook's, from concatenated to interleaved). Think of the "
            "direction of `interleaved[:, perm]`: column j of the result is column `perm[j]` of the interleaved "
            "table.",
        ),
        "permutation_wrong": (
            "`interleaved[:, perm]` todavía no es la tabla concatenada. Para cada columna j de la concatenada, "
            "busca en qué columna de la intercalada está el mismo seno o coseno (pruébalo a mano con d_model = 4).",
            "`interleaved[:, perm]` is not yet the concatenated table. For each column j of the concatenated table,"
            " find which column of the interleaved one holds the same sine or cosine (try it by hand with d_model ="
            " 4).",
        ),
        # the shift matrix, concatenated layout
        "shift_interleaved": (
            "esa es la matriz M_k de la disposición intercalada, con bloques 2×2 en la diagonal. En la concatenada "
            "el seno i y su coseno no están en columnas vecinas: el giro de cada par mezcla la columna i con la "
            "d_model/2 + i.",
            "that is the matrix M_k of the interleaved layout, with 2×2 blocks on the diagonal. In the concatenated"
            " layout sine i and its cosine are not in neighbouring columns: the turn of each pair mixes column i "
            "with column d_model/2 + i.",
        ),
        "shift_backwards": (
            "tu matriz lleva PE(p) a PE(p − k): gira hacia atrás. Revisa el signo de los senos (sin(a + b) = sin a "
            "cos b + cos a sin b).",
            "your matrix takes PE(p) to PE(p − k): it turns backwards. Check the sign of the sines (sin(a + b) = "
            "sin a cos b + cos a sin b).",
        ),
        "shift_identity": (
            "tu matriz deja PE(p) igual; para k ≠ 0 cada par (seno i, coseno i) debe girar un ángulo k·ω_i.",
            "your matrix leaves PE(p) unchanged; for k ≠ 0 each pair (sine i, cosine i) must turn by an angle k·ω_i.",
        ),
        "shift_wrong": (
            "M_k · PE(p) no es PE(p + k) (diferencia máxima {diff}). Escribe sin(p ω_i + k ω_i) y cos(p ω_i + k "
            "ω_i) con las fórmulas de la suma: cada nuevo valor mezcla el seno i y el coseno i de PE(p).",
            "M_k · PE(p) is not PE(p + k) (largest difference {diff}). Write sin(p ω_i + k ω_i) and cos(p ω_i + k "
            "ω_i) with the sum formulas: each new value mixes sine i and cosine i of PE(p).",
        ),
    }
)


# ---- shared by the exercises below ---------------------------------------------------------------


def _tensor(lang: str, x: Any) -> Tensor:
    x = tensor(lang, x)
    if x.is_floating_point() and not torch.isfinite(x).all():
        raise stop(HINTS(lang, "nan"))
    return x


def _close(a: Tensor, b: Tensor, atol: float = 1e-4) -> bool:
    return close(a, b, atol=atol, rtol=0.0)


# ---- 03.sinusoidal -------------------------------------------------------------------------------


_TABLE_CASES = ((12, 8), (50, 32))  # (max_len, d_model)


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


@exercise("03.sinusoidal")
def check_sinusoidal_encoding(encoding: Callable[[int, int], Tensor], lang: str | None = None) -> Feedback:
    """Exercise: the paper's sinusoidal table.

    ``encoding(max_len, d_model)`` returns a (max_len, d_model) tensor with
    PE[pos, 2i] = sin(pos / 10000^(2i/d_model)) and PE[pos, 2i+1] = cos(pos / 10000^(2i/d_model)).
    """
    for max_len, d_model in _TABLE_CASES:
        got = _tensor(lang, attempt(lang, encoding, max_len, d_model))
        line = loops_in(encoding)
        if line:
            return HINTS(lang, "loops", line=line)
        want = _reference(max_len, d_model)
        if got.shape == (d_model, max_len) and max_len != d_model:
            return HINTS(lang, "transposed")
        if got.shape != want.shape:
            return wrong_shape(lang, got, tuple(want.shape))
        if _close(got, want):
            continue
        key = diagnose([got], by_key([_table_mistakes(max_len, d_model)]), same=_close)
        if key is not None:
            return HINTS(lang, key)
        diff = round(float((got.double() - want).abs().max()), 4)
        return HINTS(lang, "table_wrong", diff=diff)
    return correct(
        lang,
        "Tu tabla coincide con `sinusoidal_encoding` del paquete.",
        "Your table matches the package's `sinusoidal_encoding`.",
    )


# ---- 03.interleaved_to_concat --------------------------------------------------------------------


_PERMUTATION_CASES = (4, 8, 64)  # d_model


@exercise("03.interleaved_to_concat")
def check_interleaved_to_concat(permutation: Callable[[int], Tensor], lang: str | None = None) -> Feedback:
    """Exercise: the column order that turns the interleaved layout into the concatenated one.

    ``permutation(d_model)`` returns a (d_model,) tensor of indices ``perm`` such that
    ``interleaved[:, perm]`` equals the concatenated table (all sines, then all cosines).
    """
    for d_model in _PERMUTATION_CASES:
        got = _tensor(lang, attempt(lang, permutation, d_model))
        if got.shape != (d_model,):
            return wrong_shape(lang, got, (d_model,))
        if got.is_floating_point() or got.is_complex() or got.dtype == torch.bool:
            return HINTS(lang, "perm_not_integer", dtype=dtype_name(got))
        got = got.long()
        if not torch.equal(torch.sort(got).values, torch.arange(d_model)):
            return HINTS(lang, "not_permutation")
        interleaved = sinusoidal_encoding(20, d_model, interleaved=True)
        concat = sinusoidal_encoding(20, d_model, interleaved=False)
        if torch.equal(interleaved[:, got], concat):
            continue
        if torch.equal(concat[:, got], interleaved):
            return HINTS(lang, "inverse_permutation")
        return HINTS(lang, "permutation_wrong")
    return correct(
        lang,
        "Las dos disposiciones guardan los mismos números en otro orden de columnas.",
        "The two layouts hold the same numbers in a different column order.",
    )


# ---- 03.shift_matrix_concat ----------------------------------------------------------------------


_SHIFT_MATRIX_CASES = ((1, 8), (7, 16), (3, 64))  # (k, d_model)


def _omega(d_model: int) -> Tensor:
    return torch.pow(10000.0, -torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)  # (D/2,)


def _interleaved_shift(k: int, d_model: int) -> Tensor:
    c, s = torch.cos(k * _omega(d_model)), torch.sin(k * _omega(d_model))
    m = torch.zeros(d_model, d_model, dtype=torch.float64)
    even = torch.arange(0, d_model, 2)
    m[even, even], m[even, even + 1], m[even + 1, even], m[even + 1, even + 1] = c, s, -s, c
    return m


@exercise("03.shift_matrix_concat")
def check_shift_matrix_concat(shift_matrix: Callable[[int, int], Tensor], lang: str | None = None) -> Feedback:
    """Exercise: M_k with M_k · PE(p) = PE(p + k) for every p, in the concatenated layout.

    ``shift_matrix(k, d_model)`` returns a (d_model, d_model) tensor; it is checked on the
    concatenated table (all sines, then all cosines) for many positions p.
    """
    for k, d_model in _SHIFT_MATRIX_CASES:
        got = _tensor(lang, attempt(lang, shift_matrix, k, d_model))
        if got.shape != (d_model, d_model):
            return wrong_shape(lang, got, (d_model, d_model))
        ref = _reference(60, d_model)  # (T, D), double precision, interleaved
        pe = torch.cat([ref[:, 0::2], ref[:, 1::2]], dim=1)  # (T, D), concatenated
        got = got.double()
        moved = pe[:-k] @ got.T  # row p is M_k · PE(p)
        if _close(moved, pe[k:]):
            continue
        if _close(got, _interleaved_shift(k, d_model)):
            return HINTS(lang, "shift_interleaved")
        if _close(pe[k:] @ got.T, pe[:-k]):
            return HINTS(lang, "shift_backwards")
        if _close(moved, pe[:-k]):
            return HINTS(lang, "shift_identity")
        diff = round(float((moved - pe[k:]).abs().max()), 4)
        return HINTS(lang, "shift_wrong", diff=diff)
    return correct(
        lang,
        "Una sola matriz para todas las posiciones, también en la disposición concatenada: "
        "solo cambia el orden de filas y columnas.",
        "One matrix for every position, in the concatenated layout too: only the order of rows and columns changes.",
    )
