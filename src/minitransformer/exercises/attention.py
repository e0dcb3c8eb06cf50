"""Checkers for the attention exercises (notebooks 01 and 02).

Every checker runs the student's function on fixed cases, compares it with the package or
with the maths, and, when the answer is wrong, compares it with the typical mistakes
(missing scale, √d_model instead of √d_head, softmax over the wrong axis, an inverted mask,
a -1e9 fill, ...) to name the one that was made.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor

from ..attention import causal_mask, combine_masks, padding_mask, scaled_dot_product_attention
from ._core import COMMON_HINTS, Feedback, attempt, checker, correct, not_yet

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
HINTS: dict[str, tuple[str, str]] = {
    **COMMON_HINTS,
    # softmax
    "softmax_overflow": (
        "con entradas grandes (p. ej. 1000) obtienes NaN: `exp(1000)` es infinito. Resta el máximo de "
        "cada fila antes de `exp` (softmax(x) = softmax(x − c)).",
        "with large inputs (e.g. 1000) you get NaN: `exp(1000)` is infinite. Subtract each row's "
        "maximum before `exp` (softmax(x) = softmax(x − c)).",
    ),
    "softmax_global_sum": (
        "divides entre la suma de todo el tensor; cada fila debe sumar 1: "
        "`.sum(dim=-1, keepdim=True)`.",
        "you divide by the sum of the whole tensor; each row must sum to 1: "
        "`.sum(dim=-1, keepdim=True)`.",
    ),
    "softmax_no_normalise": (
        "las filas no suman 1: divide `exp(x)` entre su suma a lo largo del último eje.",
        "the rows do not sum to 1: divide `exp(x)` by its sum along the last axis.",
    ),
    "wrong_axis": (
        "la softmax va sobre el eje equivocado: cada consulta (fila) reparte 1 entre las claves, "
        "es decir, sobre el último eje (`dim=-1`), no sobre `dim=-2`.",
        "the softmax runs over the wrong axis: each query (row) shares 1 among the keys, that is "
        "over the last axis (`dim=-1`), not over `dim=-2`.",
    ),
    # scaling
    "no_scale": (
        "falta dividir las puntuaciones entre √d_k (`q.size(-1) ** 0.5`).",
        "the scores are not divided by √d_k (`q.size(-1) ** 0.5`).",
    ),
    "scale_d_k": (
        "divides entre d_k; la escala es la raíz cuadrada: √d_k.",
        "you divide by d_k; the scale is its square root: √d_k.",
    ),
    "scale_d_model": (
        "escalas por √d_model (el ancho de la entrada), pero la escala es √d_k, el ancho de las "
        "consultas y claves tras la proyección.",
        "you scale by √d_model (the width of the input), but the scale is √d_k, the width of the "
        "queries and keys after the projection.",
    ),
    "scale_d_model_heads": (
        "escalas por √d_model = √(H·d_head); cada cabeza tiene consultas de ancho d_head, así que "
        "la escala es √d_head (`q.size(-1) ** 0.5`).",
        "you scale by √d_model = √(H·d_head); each head has queries of width d_head, so the scale "
        "is √d_head (`q.size(-1) ** 0.5`).",
    ),
    # attention
    "weights_transposed": (
        "la forma está traspuesta: las filas son consultas (T) y las columnas claves (S); "
        "calcula `q @ k.transpose(-2, -1)`.",
        "the shape is transposed: rows are queries (T) and columns are keys (S); compute "
        "`q @ k.transpose(-2, -1)`.",
    ),
    "batched": (
        "funciona con (T, d_k) pero no con lotes (..., T, d_k): usa `k.transpose(-2, -1)` en lugar "
        "de `k.T` y la softmax con `dim=-1`.",
        "it works for (T, d_k) but not for batches (..., T, d_k): use `k.transpose(-2, -1)` instead "
        "of `k.T`, and the softmax with `dim=-1`.",
    ),
    "returns_weights": (
        "devuelves los pesos de atención (T, T); la salida es esos pesos por los valores: "
        "`weights @ V`.",
        "you return the attention weights (T, T); the output is those weights times the values: "
        "`weights @ V`.",
    ),
    "values_are_x": (
        "multiplicas los pesos por `x`; hay que multiplicarlos por los valores V = x W_V.",
        "you multiply the weights by `x`; multiply them by the values V = x W_V.",
    ),
    "no_projection": (
        "las consultas y las claves deben ser las proyecciones Q = x W_Q y K = x W_K, no `x`.",
        "the queries and keys must be the projections Q = x W_Q and K = x W_K, not `x`.",
    ),
    "swapped_qk": (
        "has intercambiado W_Q y W_K: las filas de los pesos son las consultas Q = x W_Q.",
        "you swapped W_Q and W_K: the rows of the weights are the queries Q = x W_Q.",
    ),
    "wrong_values": (
        "los números no coinciden con softmax(QKᵀ/√d_k)V; revisa cada paso con el ejemplo del "
        "cuaderno.",
        "the numbers do not match softmax(QKᵀ/√d_k)V; check each step against the notebook's "
        "example.",
    ),
    "wrong_shape": (
        "la forma del resultado es {got}, se esperaba {want}.",
        "the result has shape {got}, expected {want}.",
    ),
    # heads
    "heads_no_transpose": (
        "la forma es (B, T, H, d_head): falta `.transpose(1, 2)` para llegar a (B, H, T, d_head).",
        "the shape is (B, T, H, d_head): add `.transpose(1, 2)` to get (B, H, T, d_head).",
    ),
    "heads_direct_view": (
        "la forma es correcta pero mezclas posiciones y cabezas: `x.view(B, H, T, d_head)` no separa "
        "las columnas de cada cabeza. Primero `view(B, T, H, d_head)`, luego `transpose(1, 2)`.",
        "the shape is right but positions and heads get mixed: `x.view(B, H, T, d_head)` does not "
        "split each head's columns. First `view(B, T, H, d_head)`, then `transpose(1, 2)`.",
    ),
    "heads_interleaved": (
        "la cabeza h debe recibir columnas contiguas, h·d_head … (h+1)·d_head − 1: divide el último "
        "eje como (H, d_head), no como (d_head, H).",
        "head h must get contiguous columns, h·d_head … (h+1)·d_head − 1: split the last axis as "
        "(H, d_head), not as (d_head, H).",
    ),
    # masks
    "not_tuple": (
        "devuelve una tupla `(output, weights)`.",
        "return a tuple `(output, weights)`.",
    ),
    "mask_inverted": (
        "la máscara está invertida: True significa «puede atender». Rellena con −∞ donde la máscara "
        "es False: `scores.masked_fill(~mask, float('-inf'))`.",
        "the mask is inverted: True means \"may attend\". Fill with −∞ where the mask is False: "
        "`scores.masked_fill(~mask, float('-inf'))`.",
    ),
    "mask_ignored": (
        "la máscara no se aplica: las claves bloqueadas reciben peso.",
        "the mask is not applied: blocked keys get weight.",
    ),
    "output_wrong": (
        "los pesos son correctos pero la salida no: es `weights @ v`.",
        "the weights are right but the output is not: it is `weights @ v`.",
    ),
    "empty_row_nan": (
        "una fila sin ninguna clave permitida da NaN: la softmax de una fila entera de −∞ es 0/0. "
        "Esas filas deben tener pesos cero (y salida cero).",
        "a row with no allowed key gives NaN: the softmax of a row that is all −∞ is 0/0. Those rows "
        "must get zero weights (and zero output).",
    ),
    "empty_row_uniform": (
        "una fila sin ninguna clave permitida reparte el peso por igual entre claves bloqueadas "
        "(lo que ocurre al rellenar con −1e9): usa −∞ y pon a cero esas filas.",
        "a row with no allowed key spreads its weight evenly over blocked keys (what a −1e9 fill "
        "does): use −∞ and set those rows to zero.",
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
        "una máscara de 3 ejes, {got}, se alinea mal con las puntuaciones (B, H, T, T): "
        "su eje B cae sobre el eje de las cabezas. Añade el eje de las cabezas: (B, 1, T, T).",
        "a mask with 3 axes, {got}, lines up wrongly with the scores (B, H, T, T): its B axis "
        "falls on the heads' axis. Add the heads' axis: (B, 1, T, T).",
    ),
    "mask_shape": (
        "la máscara tiene forma {got}; debe poder extenderse (broadcast) a (B, H, T, T), "
        "p. ej. (B, 1, T, T).",
        "the mask has shape {got}; it must broadcast to (B, H, T, T), e.g. (B, 1, T, T).",
    ),
    "mask_future": (
        "la parte causal deja ver el futuro: cada posición puede atender a sí misma y a las "
        "anteriores, es decir, en la diagonal y por debajo (`tril`), no por encima (`triu`).",
        "the causal part lets positions see the future: each position may attend to itself and to "
        "earlier ones, on and below the diagonal (`tril`), not above it (`triu`).",
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
        "el relleno bloquea filas (consultas) en lugar de columnas (claves): la máscara de relleno "
        "tiene forma (B, 1, 1, T) y va sobre el último eje.",
        "padding blocks rows (queries) instead of columns (keys): the padding mask has shape "
        "(B, 1, 1, T) and acts on the last axis.",
    ),
    "mask_pad_zero": (
        "parece que tomas el relleno como el id 0: usa el argumento `pad_id`.",
        "it looks like you take padding to be id 0: use the `pad_id` argument.",
    ),
    "mask_wrong": (
        "la máscara no es la combinación (AND) de la causal y la de relleno.",
        "the mask is not the combination (AND) of the causal and the padding masks.",
    ),
}


def hint(lang: str, key: str, **fields: Any) -> Feedback:
    """The "not yet" feedback for one of :data:`HINTS`."""
    es, en = HINTS[key]
    return not_yet(lang, es.format(**fields), en.format(**fields))


def _close(a: Tensor, b: Tensor) -> bool:
    return a.shape == b.shape and torch.allclose(a.double(), b.double(), atol=1e-5, rtol=1e-4)


def _tensor(lang: str, x: Any) -> Tensor:
    """The student's result as a float tensor, or a "not yet" (raised as Unfinished)."""
    from ._core import Unfinished

    if not isinstance(x, Tensor):
        raise Unfinished(hint(lang, "not_tensor"))
    return x.detach()


def _first_match(got: Tensor, candidates: dict[str, Tensor]) -> str | None:
    for key, value in candidates.items():
        if _close(got, value):
            return key
    return None


def _quietly(fn: Callable[..., Any], *args: Any) -> Any:
    """Call ``fn`` once more on a harder case; a crash there is a hint, not a traceback."""
    import warnings

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return fn(*args)
    except Exception:
        return None


def _cases(seed: int, *shapes: tuple[int, ...]) -> list[Tensor]:
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(*s, generator=g) for s in shapes]


# --------------------------------------------------------------------------- notebook 01


@checker
def check_softmax(softmax: Callable[[Tensor], Tensor], lang: str = "es") -> Feedback:
    """Exercise: softmax over the last axis, numerically stable.

    ``softmax(x)`` takes scores (..., S) and returns weights of the same shape whose last
    axis sums to 1.
    """
    (x,) = _cases(1, (3, 5))
    x = x * 3
    got = _tensor(lang, attempt(lang, softmax, x.clone()))
    if got.shape != x.shape:
        return hint(lang, "wrong_shape", got=tuple(got.shape), want=tuple(x.shape))
    if not _close(got, torch.softmax(x, dim=-1)):
        e = x.exp()
        key = _first_match(got, {
            "wrong_axis": torch.softmax(x, dim=-2),
            "softmax_global_sum": e / e.sum(),
            "softmax_no_normalise": e,
        })
        if key is None and not torch.allclose(got.sum(-1), torch.ones(3), atol=1e-4):
            key = "softmax_no_normalise"
        return hint(lang, key or "wrong_values")
    big = torch.tensor([[1000.0, 1001.0, 1002.0], [-1000.0, -1000.0, -999.0]])
    got = _tensor(lang, attempt(lang, softmax, big.clone()))
    if not torch.isfinite(got).all():
        return hint(lang, "softmax_overflow")
    if not _close(got, torch.softmax(big, dim=-1)):
        return hint(lang, "softmax_overflow")
    (x3,) = _cases(2, (2, 4, 6))
    got = _quietly(softmax, x3.clone())
    if not isinstance(got, Tensor) or not _close(got.detach(), torch.softmax(x3, dim=-1)):
        return hint(lang, "batched")
    return correct(
        lang,
        "Restar el máximo no cambia el resultado y evita el desbordamiento (overflow).",
        "Subtracting the maximum does not change the result and avoids overflow.",
    )


def _weights_candidates(q: Tensor, k: Tensor) -> dict[str, Tensor]:
    raw = q @ k.transpose(-2, -1)
    d_k = q.size(-1)
    return {
        "no_scale": torch.softmax(raw, dim=-1),
        "scale_d_k": torch.softmax(raw / d_k, dim=-1),
        "wrong_axis": torch.softmax(raw / math.sqrt(d_k), dim=-2),
    }


@checker
def check_attention_weights(attention_weights: Callable[[Tensor, Tensor], Tensor], lang: str = "es") -> Feedback:
    """Exercise: the attention weights softmax(q kᵀ / √d_k).

    ``attention_weights(q, k)`` takes q (..., T, d_k) and k (..., S, d_k) and returns (..., T, S).
    """
    q, k = _cases(3, (3, 8), (5, 8))
    q, k = 2 * q, 2 * k
    want = torch.softmax(q @ k.T / math.sqrt(8), dim=-1)
    got = _tensor(lang, attempt(lang, attention_weights, q.clone(), k.clone()))
    if got.shape == (5, 3):
        return hint(lang, "weights_transposed")
    if got.shape != want.shape:
        return hint(lang, "wrong_shape", got=tuple(got.shape), want=tuple(want.shape))
    if not _close(got, want):
        return hint(lang, _first_match(got, _weights_candidates(q, k)) or "wrong_values")
    qb, kb = _cases(4, (2, 4, 6), (2, 7, 6))
    wb = torch.softmax(qb @ kb.transpose(-2, -1) / math.sqrt(6), dim=-1)
    got = _quietly(attention_weights, qb.clone(), kb.clone())
    if not isinstance(got, Tensor) or not _close(got.detach(), wb):
        return hint(lang, "batched")
    return correct(lang, "Cada fila reparte 1 entre las claves.", "Each row shares 1 among the keys.")


@checker
def check_self_attention(
    self_attention: Callable[[Tensor, Tensor, Tensor, Tensor], Tensor], lang: str = "es"
) -> Feedback:
    """Exercise: self-attention of x with projection matrices.

    ``self_attention(x, W_q, W_k, W_v)`` takes x (T, d_model), W_q and W_k (d_model, d_k),
    W_v (d_model, d_v) and returns softmax(Q Kᵀ / √d_k) V, shape (T, d_v).
    """
    x, W_q, W_k, W_v = _cases(5, (4, 9), (9, 4), (9, 4), (9, 3))
    Q, K, V = x @ W_q, x @ W_k, x @ W_v
    d_k, d_model = Q.size(-1), x.size(-1)
    raw = Q @ K.T

    def attn(scores: Tensor, values: Tensor = V, dim: int = -1) -> Tensor:
        return torch.softmax(scores, dim=dim) @ values

    want = attn(raw / math.sqrt(d_k))
    got = _tensor(lang, attempt(lang, self_attention, x.clone(), W_q.clone(), W_k.clone(), W_v.clone()))
    if _close(got, torch.softmax(raw / math.sqrt(d_k), dim=-1)):
        return hint(lang, "returns_weights")
    if _close(got, attn(raw / math.sqrt(d_k), x)):
        return hint(lang, "values_are_x")
    if got.shape != want.shape:
        return hint(lang, "wrong_shape", got=tuple(got.shape), want=tuple(want.shape))
    if not _close(got, want):
        key = _first_match(got, {
            "scale_d_model": attn(raw / math.sqrt(d_model)),
            "no_scale": attn(raw),
            "scale_d_k": attn(raw / d_k),
            "wrong_axis": torch.softmax(raw / math.sqrt(d_k), dim=-2) @ V,
            "swapped_qk": attn(raw.T / math.sqrt(d_k)),
            "no_projection": attn(x @ x.T / math.sqrt(d_k)),
        })
        if key is None and _close(got, attn(x @ x.T / math.sqrt(d_model))):
            key = "no_projection"
        return hint(lang, key or "wrong_values")
    return correct(
        lang,
        "Esto es una cabeza de autoatención (self-attention).",
        "This is one head of self-attention.",
    )


# --------------------------------------------------------------------------- notebook 02


@checker
def check_split_heads(split_heads: Callable[[Tensor, int], Tensor], lang: str = "es") -> Feedback:
    """Exercise: (B, T, D) -> (B, H, T, d_head), head h taking columns h·d_head … (h+1)·d_head − 1."""
    for seed, (B, T, D, H) in ((6, (2, 5, 12, 3)), (7, (3, 2, 8, 4))):
        (x,) = _cases(seed, (B, T, D))
        Dh = D // H
        want = x.view(B, T, H, Dh).transpose(1, 2)  # (B, H, T, Dh)
        got = _tensor(lang, attempt(lang, split_heads, x.clone(), H))
        if got.shape == (B, T, H, Dh):
            return hint(lang, "heads_no_transpose")
        if got.shape != want.shape:
            return hint(lang, "wrong_shape", got=tuple(got.shape), want=tuple(want.shape))
        if not torch.equal(got, want):
            key = _first_match(got, {
                "heads_direct_view": x.reshape(B, H, T, Dh),
                "heads_interleaved": x.view(B, T, Dh, H).permute(0, 3, 1, 2),
            })
            return hint(lang, key or "wrong_values")
    return correct(
        lang,
        "Las cabezas son solo otra forma de mirar las mismas columnas: no hay copia de datos.",
        "Heads are just another way of looking at the same columns: no data is copied.",
    )


def _masked_reference(q: Tensor, k: Tensor, v: Tensor, mask: Tensor) -> tuple[Tensor, Tensor]:
    return scaled_dot_product_attention(q, k, v, mask)


def _naive(q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None, scale: float, dim: int = -1) -> Tensor:
    scores = q @ k.transpose(-2, -1) / scale
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    return torch.softmax(scores, dim=dim)


@checker
def check_masked_attention(
    masked_attention: Callable[[Tensor, Tensor, Tensor, Tensor], tuple[Tensor, Tensor]], lang: str = "es"
) -> Feedback:
    """Exercise: attention of every head at once with a boolean mask (True = may attend).

    ``masked_attention(q, k, v, mask)`` takes q (B, H, T, d_head), k and v (B, H, S, d_head) and
    a mask broadcastable to (B, H, T, S); returns ``(output, weights)``, (B, H, T, d_head) and
    (B, H, T, S). A row with no allowed key gets zero weights and zero output.
    """
    B, H, T, S, Dh = 2, 4, 3, 5, 6
    q, k, v = _cases(8, (B, H, T, Dh), (B, H, S, Dh), (B, H, S, Dh))
    q, k = 1.5 * q, 1.5 * k
    lengths = torch.tensor([5, 3])
    keys_ok = torch.arange(S)[None, :] < lengths[:, None]  # (B, S)
    mask = keys_ok[:, None, None, :] & torch.ones(T, S, dtype=torch.bool).tril(diagonal=2)  # (B, 1, T, S)
    want_out, want_w = _masked_reference(q, k, v, mask)

    result = attempt(lang, masked_attention, q.clone(), k.clone(), v.clone(), mask.clone())
    if not isinstance(result, tuple) or len(result) != 2:
        return hint(lang, "not_tuple")
    out, w = (_tensor(lang, r) for r in result)
    if w.shape != want_w.shape:
        return hint(lang, "wrong_shape", got=tuple(w.shape), want=tuple(want_w.shape))
    if not _close(w, want_w):
        sq = math.sqrt(Dh)
        # NaN counts as 0 here: a mistake may or may not come with the empty-row guard.
        candidates = {
            "mask_inverted": _naive(q, k, v, ~mask, sq),
            "mask_ignored": _naive(q, k, v, None, sq),
            "scale_d_model_heads": _naive(q, k, v, mask, math.sqrt(H * Dh)),
            "no_scale": _naive(q, k, v, mask, 1.0),
            "scale_d_k": _naive(q, k, v, mask, float(Dh)),
            "wrong_axis": _naive(q, k, v, mask, sq, dim=-2),
        }
        key = _first_match(torch.nan_to_num(w), {k_: torch.nan_to_num(c) for k_, c in candidates.items()})
        if key is None and not torch.isfinite(w).all():
            key = "nan"
        return hint(lang, key or "wrong_values")
    if not _close(out, want_out):
        return hint(lang, "output_wrong")

    # A batch whose second sequence is all padding: its rows have no allowed key.
    empty = torch.tensor([[True, True, False, False, False], [False] * S])[:, None, None, :]  # (B, 1, 1, S)
    want_out, want_w = _masked_reference(q, k, v, empty)
    result = attempt(lang, masked_attention, q.clone(), k.clone(), v.clone(), empty.clone())
    if not isinstance(result, tuple) or len(result) != 2:
        return hint(lang, "not_tuple")
    out, w = (_tensor(lang, r) for r in result)
    if out.shape != want_out.shape or w.shape != want_w.shape:
        return hint(lang, "wrong_shape", got=tuple(w.shape), want=tuple(want_w.shape))
    if not (torch.isfinite(w).all() and torch.isfinite(out).all()):
        return hint(lang, "empty_row_nan")
    if torch.allclose(w[1], torch.full_like(w[1], 1.0 / S), atol=1e-4):
        return hint(lang, "empty_row_uniform")
    if not (_close(w, want_w) and _close(out, want_out)):
        return hint(lang, "empty_row_other")
    return correct(
        lang,
        "Las filas sin claves permitidas dan ceros, sin NaN.",
        "Rows with no allowed key give zeros, no NaN.",
    )


def _decoder_candidates(tokens: Tensor, pad_id: int) -> dict[str, Tensor]:
    T = tokens.size(1)
    tril = torch.ones(T, T, dtype=torch.bool).tril()
    triu = torch.ones(T, T, dtype=torch.bool).triu()
    keys = (tokens != pad_id)[:, None, None, :]  # (B, 1, 1, T)
    rows = (tokens != pad_id)[:, None, :, None]  # (B, 1, T, 1)
    return {
        "mask_inverted": ~(keys & tril),
        "mask_future": keys & triu,
        "mask_no_padding": tril.expand(tokens.size(0), 1, T, T),
        "mask_no_causal": keys.expand(-1, 1, T, T),
        "mask_padding_rows": rows & tril,
        "mask_pad_zero": (tokens != 0)[:, None, None, :] & tril,
    }


@checker
def check_decoder_mask(decoder_mask: Callable[[Tensor, int], Tensor], lang: str = "es") -> Feedback:
    """Exercise: the decoder's self-attention mask, causal AND padding (True = may attend).

    ``decoder_mask(tokens, pad_id)`` takes token ids (B, T) and returns a boolean mask that
    broadcasts to (B, H, T, T), e.g. of shape (B, 1, T, T).
    """
    cases = (
        (torch.tensor([[5, 6, 7, 8, 0, 0], [0, 0, 9, 4, 5, 6]]), 0),  # right and left padding
        (torch.tensor([[3, 3, 1, 2, 0], [4, 1, 0, 3, 3], [2, 2, 2, 2, 2]]), 3),  # pad_id 3; 0 is a word
    )
    H = 4
    for tokens, pad_id in cases:
        B, T = tokens.shape
        want = combine_masks(padding_mask(tokens, pad_id), causal_mask(T))  # (B, 1, T, T)
        got = _tensor(lang, attempt(lang, decoder_mask, tokens.clone(), pad_id))
        if got.dtype != torch.bool:
            return hint(lang, "mask_not_bool", dtype=str(got.dtype).removeprefix("torch."))
        if got.dim() == 3:
            return hint(lang, "mask_3d", got=tuple(got.shape))
        try:
            full = got.expand(B, H, T, T)
        except RuntimeError:
            return hint(lang, "mask_shape", got=tuple(got.shape))
        if not torch.equal(full, want.expand(B, H, T, T)):
            for key, value in _decoder_candidates(tokens, pad_id).items():
                if torch.equal(full, value.expand(B, H, T, T)):
                    return hint(lang, key)
            return hint(lang, "mask_wrong")
    return correct(
        lang,
        "Así es la máscara de la autoatención del decodificador (decoder).",
        "This is the mask of the decoder's self-attention.",
    )
