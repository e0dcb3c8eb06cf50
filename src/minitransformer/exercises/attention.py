"""Checkers for the attention exercises (notebooks 01 and 02).

Every checker runs the student's function on cases whose shapes are all different
(T ≠ S ≠ d_k ≠ d_model), compares it with the package or with the maths, and, when the answer
is wrong, compares it with the typical mistakes (missing scale, √d_model or √T instead of
√d_k, softmax over the wrong axis, an inverted mask, a −1e9 fill, ...) to name the one made.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor

from ..attention import scaled_dot_product_attention
from ..i18n import tr
from ..model import target_mask
from ._core import (
    COMMON_HINTS,
    Feedback,
    Hints,
    Unfinished,
    attempt,
    by_key,
    close,
    correct,
    diagnose,
    dtype_name,
    exercise,
    forbid,
    sentence,
    stop,
    tensor,
    wrong_shape,
)

__all__ = [
    "HINTS",
    "check_softmax",
    "check_attention_weights",
    "check_self_attention",
    "check_split_heads",
    "check_masked_attention",
    "check_decoder_mask",
]

# Every hint the checkers can give, (Spanish, English); the tests refer to them by key.
HINTS = Hints(
    {
        **COMMON_HINTS,
        "wrong_values": (
            "los números no coinciden con softmax(QKᵀ/√d_k)V; revisa cada paso con el ejemplo del cuaderno.",
            "the numbers do not match softmax(QKᵀ/√d_k)V; check each step against the notebook's example.",
        ),
        # softmax
        "softmax_not_float": (
            "tu función devuelve enteros ({dtype}); los pesos de la softmax son números entre 0 y 1 que suman 1 "
            "en cada fila, no la posición del máximo.",
            "your function returns integers ({dtype}); softmax weights are numbers between 0 and 1 that add up to "
            "1 in each row, not the position of the maximum.",
        ),
        "softmax_overflow": (
            "con entradas grandes (p. ej. 1000) obtienes NaN: `exp(1000)` es infinito. Usa que "
            "softmax(x) = softmax(x − c) con una c que haga pequeños los exponentes.",
            "with large inputs (e.g. 1000) you get NaN: `exp(1000)` is infinite. Use softmax(x) = softmax(x − c) "
            "with a c that makes the exponents small.",
        ),
        "softmax_shift_not_max": (
            "funciona cuando los números de una fila están cerca, pero con una fila muy dispersa, como "
            "[1000, 0, −5], da NaN: lo que restas (¿el mínimo, la media?) deja exponentes enormes. Solo el "
            "máximo de cada fila garantiza que todos los exponentes sean ≤ 0.",
            "it works when a row's numbers are close together, but a widely spread row such as [1000, 0, −5] "
            "gives NaN: what you subtract (the minimum, the mean?) leaves huge exponents. Only each row's "
            "maximum makes every exponent ≤ 0.",
        ),
        "softmax_global_max": (
            "una fila de números muy negativos, como [−1000, −1000, −999], da NaN (0/0): restas el máximo de todo "
            "el tensor, y esa fila queda en exp(−2000) = 0. Resta el máximo de cada fila.",
            "a row of very negative numbers such as [−1000, −1000, −999] gives NaN (0/0): you subtract the "
            "maximum of the whole tensor, and that row becomes exp(−2000) = 0. Subtract each row's maximum.",
        ),
        "softmax_global_sum": (
            "divides entre la suma de todo el tensor; cada fila debe sumar 1 por separado.",
            "you divide by the sum of the whole tensor; each row must sum to 1 on its own.",
        ),
        "softmax_no_normalise": (
            "las filas no suman 1: falta dividir `exp(x)` entre su suma a lo largo del último eje.",
            "the rows do not sum to 1: `exp(x)` must be divided by its sum along the last axis.",
        ),
        "softmax_batched": (
            "funciona con (T, S) pero no con un lote (B, T, S): la suma y el máximo van sobre el último eje, "
            "que en un lote ya no es el eje 1.",
            "it works for (T, S) but not for a batch (B, T, S): the sum and the maximum run over the last axis, "
            "which in a batch is no longer axis 1.",
        ),
        "wrong_axis": (
            "la softmax va sobre el eje equivocado: cada consulta (fila) reparte 1 entre las claves, es decir, "
            "sobre el último eje, no sobre el penúltimo.",
            "the softmax runs over the wrong axis: each query (row) shares 1 among the keys, that is over the "
            "last axis, not the one before it.",
        ),
        # scaling
        "no_scale": (
            "falta dividir las puntuaciones entre √d_k.",
            "the scores are not divided by √d_k.",
        ),
        "scale_d_k": (
            "divides entre d_k; la escala es la raíz cuadrada: √d_k.",
            "you divide by d_k; the scale is its square root: √d_k.",
        ),
        "scale_length": (
            "escalas por la raíz de una longitud (T o S, el número de tokens); la escala es √d_k, el ancho de "
            "las consultas y las claves.",
            "you scale by the root of a length (T or S, the number of tokens); the scale is √d_k, the width of "
            "the queries and keys.",
        ),
        "scale_shape_index": (
            "con un lote (B, T, d_k), `q.shape[1]` es T, no d_k: el ancho de las consultas es el tamaño del "
            "último eje.",
            "with a batch (B, T, d_k), `q.shape[1]` is T, not d_k: the width of the queries is the size of the "
            "last axis.",
        ),
        "scale_d_model": (
            "escalas por √d_model (el ancho de la entrada), pero la escala es √d_k, el ancho de las consultas y "
            "claves tras la proyección.",
            "you scale by √d_model (the width of the input), but the scale is √d_k, the width of the queries and "
            "keys after the projection.",
        ),
        "scale_d_v": (
            "escalas por √d_v, el ancho de los valores; la escala es √d_k, el de las consultas y las claves.",
            "you scale by √d_v, the width of the values; the scale is √d_k, that of the queries and keys.",
        ),
        "scale_d_model_heads": (
            "escalas por √d_model = √(H·d_head); cada cabeza tiene consultas de ancho d_head, así que la escala "
            "es √d_head.",
            "you scale by √d_model = √(H·d_head); each head has queries of width d_head, so the scale is √d_head.",
        ),
        # attention
        "weights_transposed": (
            "la forma está traspuesta: las filas son consultas (T) y las columnas claves (S).",
            "the shape is transposed: rows are queries (T) and columns are keys (S).",
        ),
        "batched": (
            "funciona con (T, d_k) pero no con un lote (B, T, d_k): en un lote `.T` invierte todos los ejes y "
            "`dim=1` ya no es el último; trabaja con los dos últimos ejes.",
            "it works for (T, d_k) but not for a batch (B, T, d_k): in a batch `.T` reverses every axis and "
            "`dim=1` is no longer the last one; work on the last two axes.",
        ),
        "returns_weights": (
            "devuelves los pesos de atención (T, T); la salida combina los valores con esos pesos.",
            "you return the attention weights (T, T); the output combines the values with those weights.",
        ),
        "values_are_x": (
            "combinas `x` con los pesos; hay que combinar los valores V = x W_V.",
            "you combine `x` with the weights; combine the values V = x W_V.",
        ),
        "no_projection": (
            "las consultas y las claves deben ser las proyecciones Q = x W_Q y K = x W_K, no `x`.",
            "the queries and keys must be the projections Q = x W_Q and K = x W_K, not `x`.",
        ),
        "swapped_qk": (
            "has intercambiado W_Q y W_K: las filas de los pesos son las consultas Q = x W_Q.",
            "you swapped W_Q and W_K: the rows of the weights are the queries Q = x W_Q.",
        ),
        # heads
        "heads_no_transpose": (
            "la forma es (B, T, H, d_head): falta llevar el eje de las cabezas delante del de las posiciones.",
            "the shape is (B, T, H, d_head): the heads' axis must move in front of the positions' axis.",
        ),
        "heads_direct_view": (
            "la forma es correcta pero mezclas posiciones y cabezas: ver `x` directamente como (B, H, T, d_head) "
            "no separa las columnas de cada cabeza; primero separa el último eje, luego reordena los ejes.",
            "the shape is right but positions and heads get mixed: viewing `x` directly as (B, H, T, d_head) does "
            "not split each head's columns; first split the last axis, then reorder the axes.",
        ),
        "heads_interleaved": (
            "la cabeza h debe recibir columnas contiguas, h·d_head … (h+1)·d_head − 1: divide el último eje como "
            "(H, d_head), no como (d_head, H).",
            "head h must get contiguous columns, h·d_head … (h+1)·d_head − 1: split the last axis as (H, d_head), "
            "not as (d_head, H).",
        ),
        # masks
        "not_tuple": (
            "devuelve una tupla `(output, weights)`.",
            "return a tuple `(output, weights)`.",
        ),
        "swapped_outputs": (
            "devuelves `(weights, output)`: el orden es `(output, weights)`.",
            "you return `(weights, output)`: the order is `(output, weights)`.",
        ),
        "mask_inverted": (
            "la máscara está invertida: True significa «puede atender», así que los −∞ van donde la máscara es False.",
            'the mask is inverted: True means "may attend", so the −∞ go where the mask is False.',
        ),
        "mask_ignored": (
            "la máscara no se aplica: las claves bloqueadas reciben peso.",
            "the mask is not applied: blocked keys get weight.",
        ),
        "output_wrong": (
            "los pesos son correctos pero la salida no: combina los valores `v` con esos pesos.",
            "the weights are right but the output is not: combine the values `v` with those weights.",
        ),
        "empty_row_nan": (
            "una fila sin ninguna clave permitida da NaN: la softmax de una fila entera de −∞ es 0/0. Esas filas "
            "deben tener pesos cero (y salida cero).",
            "a row with no allowed key gives NaN: the softmax of a row that is all −∞ is 0/0. Those rows must get "
            "zero weights (and zero output).",
        ),
        "empty_row_uniform": (
            "una fila sin ninguna clave permitida reparte el peso por igual entre claves bloqueadas (lo que ocurre "
            "al rellenar con −1e9): usa −∞ y pon a cero esas filas.",
            "a row with no allowed key spreads its weight evenly over blocked keys (what a −1e9 fill does): use −∞ "
            "and set those rows to zero.",
        ),
        "empty_row_other": (
            "una fila sin ninguna clave permitida debe tener pesos cero y salida cero.",
            "a row with no allowed key must get zero weights and zero output.",
        ),
        "mask_not_bool": (
            "la máscara debe ser booleana (True = puede atender), no de tipo {dtype}.",
            "the mask must be boolean (True = may attend), not of dtype {dtype}.",
        ),
        "mask_3d": (
            "una máscara de 3 ejes, {got}, se alinea mal con las puntuaciones (B, H, T, T): su eje B cae sobre el "
            "eje de las cabezas. Le falta el eje de las cabezas: (B, 1, T, T).",
            "a mask with 3 axes, {got}, lines up wrongly with the scores (B, H, T, T): its B axis falls on the "
            "heads' axis. It needs the heads' axis: (B, 1, T, T).",
        ),
        "mask_shape": (
            "la máscara tiene forma {got}; debe poder extenderse (broadcast) a (B, H, T, T), p. ej. (B, 1, T, T).",
            "the mask has shape {got}; it must broadcast to (B, H, T, T), e.g. (B, 1, T, T).",
        ),
        "mask_future": (
            "la parte causal deja ver el futuro: cada posición puede atender a sí misma y a las anteriores, es "
            "decir, en la diagonal y por debajo, no por encima.",
            "the causal part lets positions see the future: each position may attend to itself and to earlier "
            "ones, on and below the diagonal, not above it.",
        ),
        "mask_no_diagonal": (
            "la parte causal quita la diagonal: cada posición también puede atender a sí misma (si no, la "
            "primera fila queda sin ninguna clave).",
            "the causal part removes the diagonal: each position may also attend to itself (otherwise the first "
            "row has no key at all).",
        ),
        "mask_sees_next": (
            "la parte causal deja ver una posición de más: la posición t ve la t + 1. Solo la diagonal y lo que "
            "queda por debajo.",
            "the causal part lets one position too many through: position t sees t + 1. Only the diagonal and "
            "below it.",
        ),
        "mask_no_padding": (
            "falta la parte de relleno: las claves que son `pad_id` no deben recibir atención.",
            "the padding part is missing: keys that are `pad_id` must not be attended to.",
        ),
        "mask_no_causal": (
            "falta la parte causal: una posición no puede ver las posteriores.",
            "the causal part is missing: a position must not see later ones.",
        ),
        "mask_padding_rows": (
            "el relleno bloquea filas (consultas) en lugar de columnas (claves): la máscara de relleno tiene forma "
            "(B, 1, 1, T) y va sobre el último eje.",
            "padding blocks rows (queries) instead of columns (keys): the padding mask has shape (B, 1, 1, T) and "
            "acts on the last axis.",
        ),
        "mask_pad_zero": (
            "parece que tomas el relleno como el id 0: usa el argumento `pad_id`.",
            "it looks like you take padding to be id 0: use the `pad_id` argument.",
        ),
        "mask_wrong": (
            "la máscara no es la combinación (AND) de la causal y la de relleno. Mírala en una frase sin relleno "
            "(debe ser el triángulo inferior con la diagonal) y en una con relleno (sus columnas, todas False).",
            "the mask is not the combination (AND) of the causal and the padding masks. Look at it for a sentence "
            "without padding (the lower triangle with the diagonal) and for one with padding (its columns all "
            "False).",
        ),
    }
)


# ---- shared by the exercises below ---------------------------------------------------------------


def _cases(seed: int, *shapes: tuple[int, ...]) -> list[Tensor]:
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(*s, generator=g) for s in shapes]


def _on_batch(lang: str, fn: Callable[..., Any], *args: Any) -> Tensor:
    """The answer on a batched case; a crash there also says that a batch is what broke it."""
    try:
        return tensor(lang, attempt(lang, fn, *args))
    except Unfinished as stopped:
        es, en = HINTS["batched"]
        said = f"{stopped.feedback.message}\n{sentence(tr(lang, es, en))}"
        raise stop(Feedback(False, said, "batched")) from None


# ---- 01.softmax ----------------------------------------------------------------------------------


_SOFTMAX = (
    "torch.softmax",
    "torch.Tensor.softmax",
    "torch.nn.functional.softmax",
    "torch.special.softmax",
    "torch.nn.Softmax.forward",
    "torch._softmax",
    "torch.log_softmax",
    "torch.Tensor.log_softmax",
    "torch.nn.functional.log_softmax",
    "torch.special.log_softmax",
    "torch.nn.LogSoftmax.forward",
)


def _softmax_cases() -> dict[str, Tensor]:
    """Scores (T, S) with a wide spread, rows near ±1000 spanning 2 units, rows spanning 1000s, and a
    batch (B, T, S): in that order, each tells apart what the one before could not."""
    (x,) = _cases(1, (3, 5))
    (x3,) = _cases(2, (2, 4, 6))
    return {
        "scores": 3 * x,
        "near": torch.tensor([[1000.0, 1001.0, 1002.0], [-1000.0, -1000.0, -999.0]]),
        "spread": torch.tensor([[1000.0, 0.0, -5.0], [-1000.0, 5.0, 0.0], [3.0, 800.0, -800.0]]),
        "batched": x3,
    }


def _softmax_mistakes(x: Tensor) -> dict[str, list[Tensor]]:
    """What each typical mistake gives on the scores ``x`` (T, S)."""
    e = x.exp()
    return {
        "wrong_axis": [torch.softmax(x, dim=-2)],
        "softmax_global_sum": [e / e.sum()],
        "softmax_no_normalise": [e],
    }


@exercise("01.softmax")
def check_softmax(softmax: Callable[[Tensor], Tensor], lang: str | None = None) -> Feedback:
    """Exercise: softmax over the last axis with ``torch.exp``, numerically stable.

    ``softmax(x)`` takes scores (..., S) and returns weights of the same shape whose last axis
    sums to 1. The statement forbids ``torch.softmax``: it is switched off while the answer runs.
    """

    def run(x: Tensor) -> Tensor:
        """The answer as a float tensor of ``x``'s shape, or the check stops with a hint."""
        with forbid(
            _SOFTMAX,
            "el ejercicio es escribir la softmax tú, con `torch.exp`.",
            "the exercise is to write the softmax yourself, with `torch.exp`.",
        ):
            got = tensor(lang, attempt(lang, softmax, x.clone()), x.shape)
        if not got.is_floating_point():
            raise stop(HINTS(lang, "softmax_not_float", dtype=dtype_name(got)))
        return got

    cases = _softmax_cases()
    x = cases["scores"]
    got = run(x)
    if not close(got, torch.softmax(x, dim=-1)):
        key = diagnose([got], _softmax_mistakes(x))
        if key is None and not close(got.double().sum(-1), torch.ones(3), atol=1e-4):
            key = "softmax_no_normalise"
        return HINTS(lang, key or "wrong_values")
    near = cases["near"]
    got = run(near)
    if not close(got, torch.softmax(near, dim=-1)):
        return HINTS(lang, "softmax_global_max" if bool(torch.isfinite(got[0]).all()) else "softmax_overflow")
    spread = cases["spread"]
    if not close(run(spread), torch.softmax(spread, dim=-1)):
        return HINTS(lang, "softmax_shift_not_max")
    x3 = cases["batched"]
    if not close(run(x3), torch.softmax(x3, dim=-1)):
        return HINTS(lang, "softmax_batched")
    return correct(
        lang,
        "Restar el máximo no cambia el resultado y evita el desbordamiento (overflow).",
        "Subtracting the maximum does not change the result and avoids overflow.",
    )


# ---- 01.attention_weights ------------------------------------------------------------------------


def _weights_cases() -> tuple[tuple[Tensor, Tensor], tuple[Tensor, Tensor]]:
    """(q, k) with T = 3, S = 5, d_k = 8, then a batch with B = 2, T = 4, S = 7, d_k = 6."""
    q, k = _cases(3, (3, 8), (5, 8))
    return (2 * q, 2 * k), tuple(_cases(4, (2, 4, 6), (2, 7, 6)))


def _weights_mistakes(raw: Tensor, d_k: int) -> list[tuple[str, list[Tensor]]]:
    """What each typical mistake gives from the unscaled scores ``raw`` (T, S); two lengths to scale by
    (T or S) are one mistake."""
    T, S = raw.shape
    return [
        ("no_scale", [torch.softmax(raw, dim=-1)]),
        ("scale_d_k", [torch.softmax(raw / d_k, dim=-1)]),
        ("scale_length", [torch.softmax(raw / math.sqrt(T), dim=-1)]),
        ("wrong_axis", [torch.softmax(raw / math.sqrt(d_k), dim=-2)]),
        ("scale_length", [torch.softmax(raw / math.sqrt(S), dim=-1)]),
    ]


@exercise("01.attention_weights")
def check_attention_weights(attention_weights: Callable[[Tensor, Tensor], Tensor], lang: str | None = None) -> Feedback:
    """Exercise: the attention weights softmax(q kᵀ / √d_k).

    ``attention_weights(q, k)`` takes q (..., T, d_k) and k (..., S, d_k) and returns (..., T, S).
    """
    (q, k), (qb, kb) = _weights_cases()
    raw = q @ k.T  # (T, S)
    want = torch.softmax(raw / math.sqrt(8), dim=-1)
    got = tensor(lang, attempt(lang, attention_weights, q.clone(), k.clone()))
    if got.shape == (5, 3):
        return HINTS(lang, "weights_transposed")
    if got.shape != want.shape:
        return wrong_shape(lang, got, tuple(want.shape))
    if not close(got, want):
        key = diagnose([got], _weights_mistakes(raw, d_k=8))
        return HINTS(lang, key or "wrong_values")
    rawb = qb @ kb.transpose(-2, -1)  # (B, T, S)
    got = _on_batch(lang, attention_weights, qb.clone(), kb.clone())
    if not close(got, torch.softmax(rawb / math.sqrt(6), dim=-1)):
        key = diagnose([got], {"scale_shape_index": [torch.softmax(rawb / math.sqrt(4), dim=-1)]})
        return HINTS(lang, key or "batched")
    return correct(lang, "Cada fila reparte 1 entre las claves.", "Each row shares 1 among the keys.")


# ---- 01.self_attention ---------------------------------------------------------------------------


def _self_attention_case() -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """x (T, d_model), W_q and W_k (d_model, d_k), W_v (d_model, d_v): T = 5, d_model = 7, d_k = 3, d_v = 2."""
    x, W_q, W_k, W_v = _cases(5, (5, 7), (7, 3), (7, 3), (7, 2))
    return 1.5 * x, W_q, W_k, W_v


def _self_attention_mistakes(x: Tensor, raw: Tensor, V: Tensor) -> list[tuple[str, list[Tensor]]]:
    """What each typical mistake gives, from x (T, d_model), the unscaled scores Q Kᵀ ``raw`` (T, T)
    and the values V (T, d_v); T = 5, d_model = 7, d_k = 3, d_v = 2."""

    def attn(scores: Tensor, values: Tensor = V, dim: int = -1) -> Tensor:
        return torch.softmax(scores, dim=dim) @ values

    xx = x @ x.T  # (T, T): the scores without projections
    return [
        ("scale_d_model", [attn(raw / math.sqrt(7))]),
        ("scale_length", [attn(raw / math.sqrt(5))]),
        ("scale_d_v", [attn(raw / math.sqrt(2))]),
        ("no_scale", [attn(raw)]),
        ("scale_d_k", [attn(raw / 3)]),
        ("wrong_axis", [attn(raw / math.sqrt(3), dim=-2)]),
        ("swapped_qk", [attn(raw.T / math.sqrt(3))]),
        ("no_projection", [attn(xx / math.sqrt(3))]),
        ("no_projection", [attn(xx / math.sqrt(7))]),
    ]


@exercise("01.self_attention")
def check_self_attention(
    self_attention: Callable[[Tensor, Tensor, Tensor, Tensor], Tensor], lang: str | None = None
) -> Feedback:
    """Exercise: self-attention of x with projection matrices.

    ``self_attention(x, W_q, W_k, W_v)`` takes x (T, d_model), W_q and W_k (d_model, d_k),
    W_v (d_model, d_v) and returns softmax(Q Kᵀ / √d_k) V, shape (T, d_v). The case has
    T = 5, d_model = 7, d_k = 3, d_v = 2, so that every width is told apart.
    """
    x, W_q, W_k, W_v = _self_attention_case()
    Q, K, V = x @ W_q, x @ W_k, x @ W_v
    raw = Q @ K.T  # (T, T)

    def attn(scores: Tensor, values: Tensor = V, dim: int = -1) -> Tensor:
        return torch.softmax(scores, dim=dim) @ values

    want = attn(raw / math.sqrt(3))
    got = tensor(lang, attempt(lang, self_attention, x.clone(), W_q.clone(), W_k.clone(), W_v.clone()))
    if close(got, torch.softmax(raw / math.sqrt(3), dim=-1)):
        return HINTS(lang, "returns_weights")
    if close(got, attn(raw / math.sqrt(3), x)):
        return HINTS(lang, "values_are_x")
    if got.shape != want.shape:
        return wrong_shape(lang, got, tuple(want.shape))
    if not close(got, want):
        # the bank holds two ways to skip the projections, scaled by √d_k or by √d_model: either one names it
        key = diagnose([got], _self_attention_mistakes(x, raw, V))
        return HINTS(lang, key or "wrong_values")
    return correct(
        lang,
        "Esto es una cabeza de autoatención (self-attention).",
        "This is one head of self-attention.",
    )


# ---- 02.split_heads ------------------------------------------------------------------------------


def _heads_cases() -> list[tuple[Tensor, int]]:
    """(x, H): x (B, T, D) and a number of heads, with B ≠ T ≠ H ≠ d_head."""
    return [(_cases(seed, (B, T, D))[0], H) for seed, (B, T, D, H) in ((6, (2, 5, 12, 3)), (7, (3, 2, 8, 4)))]


def _heads_mistakes(x: Tensor, H: int) -> dict[str, list[Tensor]]:
    """What each typical mistake gives from x (B, T, D), as (B, H, T, Dh)."""
    B, T, D = x.shape
    Dh = D // H
    return {
        "heads_direct_view": [x.reshape(B, H, T, Dh)],
        "heads_interleaved": [x.view(B, T, Dh, H).permute(0, 3, 1, 2)],
    }


@exercise("02.split_heads")
def check_split_heads(split_heads: Callable[[Tensor, int], Tensor], lang: str | None = None) -> Feedback:
    """Exercise: (B, T, D) -> (B, H, T, d_head), head h taking columns h·d_head … (h+1)·d_head − 1."""
    for x, H in _heads_cases():
        B, T, D = x.shape
        Dh = D // H
        want = x.view(B, T, H, Dh).transpose(1, 2)  # (B, H, T, Dh)
        got = tensor(lang, attempt(lang, split_heads, x.clone(), H))
        if got.shape == (B, T, H, Dh):
            return HINTS(lang, "heads_no_transpose")
        if got.shape != want.shape:
            return wrong_shape(lang, got, tuple(want.shape))
        if not close(got, want, atol=0.0, rtol=0.0):
            key = diagnose([got], _heads_mistakes(x, H))
            return HINTS(lang, key or "wrong_values")
    return correct(
        lang,
        "Las cabezas son solo otra forma de mirar las mismas columnas: no hay copia de datos.",
        "Heads are just another way of looking at the same columns: no data is copied.",
    )


# ---- 02.masked_attention -------------------------------------------------------------------------


def _naive(q: Tensor, k: Tensor, mask: Tensor | None, scale: float, dim: int = -1) -> Tensor:
    scores = q @ k.transpose(-2, -1) / scale
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    return torch.nan_to_num(torch.softmax(scores, dim=dim))  # NaN counts as 0: a mistake may lack the guard


def _masked_case() -> tuple[Tensor, Tensor, Tensor, Tensor, Tensor]:
    """q (B, H, T, Dh), k and v (B, H, S, Dh) with B = 2, H = 4, T = 3, S = 5, Dh = 6; a mask (B, 1, T, S)
    with padding and a shifted causal part; and a mask (B, 1, 1, S) whose second row allows no key."""
    B, H, T, S, Dh = 2, 4, 3, 5, 6
    q, k, v = _cases(8, (B, H, T, Dh), (B, H, S, Dh), (B, H, S, Dh))
    lengths = torch.tensor([5, 3])
    keys_ok = torch.arange(S)[None, :] < lengths[:, None]  # (B, S)
    mask = keys_ok[:, None, None, :] & torch.ones(T, S, dtype=torch.bool).tril(diagonal=2)  # (B, 1, T, S)
    empty = torch.tensor([[True, True, False, False, False], [False] * S])[:, None, None, :]  # (B, 1, 1, S)
    return 1.5 * q, 1.5 * k, v, mask, empty


def _masked_mistakes(q: Tensor, k: Tensor, mask: Tensor) -> dict[str, list[Tensor]]:
    """The weights (B, H, T, S) each typical mistake gives."""
    H, Dh = q.size(1), q.size(-1)
    sq = math.sqrt(Dh)
    return {
        "mask_inverted": [_naive(q, k, ~mask, sq)],
        "mask_ignored": [_naive(q, k, None, sq)],
        "scale_d_model_heads": [_naive(q, k, mask, math.sqrt(H * Dh))],
        "no_scale": [_naive(q, k, mask, 1.0)],
        "scale_d_k": [_naive(q, k, mask, float(Dh))],
        "wrong_axis": [_naive(q, k, mask, sq, dim=-2)],
    }


def _pair(lang: str, result: Any, want_out: Tensor, want_w: Tensor) -> tuple[Tensor, Tensor]:
    """The student's ``(output, weights)``, checked for type, order and shapes."""
    if not isinstance(result, (tuple, list)) or len(result) != 2:
        raise stop(HINTS(lang, "not_tuple"))
    out, w = (tensor(lang, r) for r in result)
    if out.shape == want_w.shape and w.shape == want_out.shape and want_w.shape != want_out.shape:
        raise stop(HINTS(lang, "swapped_outputs"))
    for got, want in ((w, want_w), (out, want_out)):
        if got.shape != want.shape:
            raise stop(wrong_shape(lang, got, tuple(want.shape)))
    return out, w


@exercise("02.masked_attention")
def check_masked_attention(
    masked_attention: Callable[[Tensor, Tensor, Tensor, Tensor], tuple[Tensor, Tensor]], lang: str | None = None
) -> Feedback:
    """Exercise: attention of every head at once with a boolean mask (True = may attend).

    ``masked_attention(q, k, v, mask)`` takes q (B, H, T, d_head), k and v (B, H, S, d_head) and
    a mask broadcastable to (B, H, T, S); returns ``(output, weights)``, (B, H, T, d_head) and
    (B, H, T, S). A row with no allowed key gets zero weights and zero output.
    """
    q, k, v, mask, empty = _masked_case()
    want_out, want_w = scaled_dot_product_attention(q, k, v, mask)

    result = attempt(lang, masked_attention, q.clone(), k.clone(), v.clone(), mask.clone())
    out, w = _pair(lang, result, want_out, want_w)
    if not close(w, want_w):
        key = diagnose([torch.nan_to_num(w)], _masked_mistakes(q, k, mask))
        if key is None and not torch.isfinite(w).all():
            key = "nan"
        return HINTS(lang, key or "wrong_values")
    if not close(out, want_out):
        return HINTS(lang, "output_wrong")

    # A batch whose second sequence is all padding: its rows have no allowed key.
    S = k.size(2)
    want_out, want_w = scaled_dot_product_attention(q, k, v, empty)
    out, w = _pair(
        lang, attempt(lang, masked_attention, q.clone(), k.clone(), v.clone(), empty.clone()), want_out, want_w
    )
    if not (torch.isfinite(w).all() and torch.isfinite(out).all()):
        return HINTS(lang, "empty_row_nan")
    if close(w[1], torch.full_like(w[1], 1.0 / S), atol=1e-4):
        return HINTS(lang, "empty_row_uniform")
    if not (close(w, want_w) and close(out, want_out)):
        return HINTS(lang, "empty_row_other")
    return correct(
        lang,
        "Las filas sin claves permitidas dan ceros, sin NaN.",
        "Rows with no allowed key give zeros, no NaN.",
    )


# ---- 02.decoder_mask -----------------------------------------------------------------------------


def _decoder_mask_cases() -> list[tuple[Tensor, int]]:
    """(tokens (B, T), pad_id): right and left padding; then pad_id 3, where 0 is a word."""
    return [
        (torch.tensor([[5, 6, 7, 8, 0, 0], [0, 0, 9, 4, 5, 6]]), 0),
        (torch.tensor([[3, 3, 1, 2, 0], [4, 1, 0, 3, 3], [2, 2, 2, 2, 2]]), 3),
    ]


def _decoder_mask_mistakes(tokens: Tensor, pad_id: int) -> dict[str, Tensor]:
    """What each typical mistake gives for token ids (B, T): a mask that broadcasts to (B, H, T, T)."""
    T = tokens.size(1)
    ones = torch.ones(T, T, dtype=torch.bool)
    tril = ones.tril()
    keys = (tokens != pad_id)[:, None, None, :]  # (B, 1, 1, T)
    rows = (tokens != pad_id)[:, None, :, None]  # (B, 1, T, 1)
    return {
        "mask_inverted": ~(keys & tril),
        "mask_future": keys & ones.triu(),
        "mask_no_diagonal": keys & ones.tril(-1),
        "mask_sees_next": keys & ones.tril(1),
        "mask_no_padding": tril.expand(tokens.size(0), 1, T, T),
        "mask_no_causal": keys.expand(-1, 1, T, T),
        "mask_padding_rows": rows & tril,
        "mask_pad_zero": (tokens != 0)[:, None, None, :] & tril,
    }


@exercise("02.decoder_mask")
def check_decoder_mask(decoder_mask: Callable[[Tensor, int], Tensor], lang: str | None = None) -> Feedback:
    """Exercise: the decoder's self-attention mask, causal AND padding (True = may attend).

    ``decoder_mask(tokens, pad_id)`` takes token ids (B, T) and returns a boolean mask that
    broadcasts to (B, H, T, T), e.g. of shape (B, 1, T, T).
    """
    H = 4
    for tokens, pad_id in _decoder_mask_cases():
        B, T = tokens.shape
        want = target_mask(tokens, pad_id)  # (B, 1, T, T)
        got = tensor(lang, attempt(lang, decoder_mask, tokens.clone(), pad_id))
        if got.dtype != torch.bool:
            return HINTS(lang, "mask_not_bool", dtype=dtype_name(got))
        if got.dim() == 3:
            return HINTS(lang, "mask_3d", got=tuple(got.shape))
        try:
            full = got.expand(B, H, T, T)
        except RuntimeError:
            return HINTS(lang, "mask_shape", got=tuple(got.shape))
        if not torch.equal(full, want.expand(B, H, T, T)):
            mistakes = by_key(
                [{key: m.expand(B, H, T, T) for key, m in _decoder_mask_mistakes(tokens, pad_id).items()}]
            )
            return HINTS(lang, diagnose([full], mistakes, same=torch.equal) or "mask_wrong")
    return correct(
        lang,
        "Así es la máscara de la autoatención del decodificador (decoder).",
        "This is the mask of the decoder's self-attention.",
    )
