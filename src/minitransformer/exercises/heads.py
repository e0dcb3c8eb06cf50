"""Checkers for notebook 08: finding a head by code, and one row of attention from q and k."""

from __future__ import annotations

import math
import operator

import torch
from torch import Tensor

from ..analysis import attention_to, top_heads
from ._core import (
    Feedback,
    Hints,
    attempt,
    by_key,
    close,
    correct,
    diagnose,
    dtype_name,
    exercise,
    not_a_tensor,
    type_name,
)

__all__ = ["HINTS", "check_strongest_head", "check_attention_row"]

HINTS = Hints(
    {
        # strongest head
        "head_float_tensor": (
            "la capa y la cabeza son índices enteros, no {dtype}.",
            "the layer and the head are integer indices, not {dtype}.",
        ),
        "head_single_number": (
            "devuelve un par (capa, cabeza), no un solo número: si usaste `argmax` sobre una "
            "matriz aplanada (L·H), `divmod(i, H)` lo convierte en (capa, cabeza).",
            "return a pair (layer, head), not a single number: if you used `argmax` on a "
            "flattened (L·H) matrix, `divmod(i, H)` turns it into (layer, head).",
        ),
        "head_floats": (
            "la capa y la cabeza son índices enteros (sirven para indexar `maps`), no decimales.",
            "the layer and the head are integer indices (they index `maps`), not floats.",
        ),
        "head_not_a_pair": (
            "se esperaba un par (capa, cabeza) de enteros y tu función devolvió {what}.",
            "a pair (layer, head) of integers was expected and your function returned {what}.",
        ),
        "head_swapped": (
            "el orden es (capa, cabeza): has devuelto (cabeza, capa).",
            "the order is (layer, head): you returned (head, layer).",
        ),
        "head_key_to_query": (
            "has leído la atención de la clave hacia la consulta: en cada mapa (T, S) la fila "
            "es la consulta, así que el peso es `maps[l][0, h, query, key]`.",
            "you read the attention from the key to the query: in each (T, S) map the row is "
            "the query, so the weight is `maps[l][0, h, query, key]`.",
        ),
        "head_other_head": (
            "con query={query} y key={key} tu función dio {got}, pero otra cabeza da más peso: compara el "
            "peso de la fila `query`, columna `key`, en todas las capas y cabezas.",
            "with query={query} and key={key} your function gave {got}, but another head gives more weight: "
            "compare the weight in row `query`, column `key`, over every layer and head.",
        ),
        # attention row
        "row_shape": (
            "la forma debe ser (S,) = {want}, no {got}.",
            "the shape must be (S,) = {want}, not {got}.",
        ),
        "row_no_scale": (
            "falta dividir las puntuaciones entre √d_head antes del softmax.",
            "the scores must be divided by √d_head before the softmax.",
        ),
        "row_scale_d_head": (
            "se divide entre la raíz cuadrada de d_head, no entre d_head.",
            "divide by the square root of d_head, not by d_head.",
        ),
        "row_no_softmax": (
            "esas son las puntuaciones: falta el softmax para convertirlas en pesos.",
            "those are the scores: a softmax turns them into weights.",
        ),
        "row_not_normalised": (
            "los pesos de una consulta deben sumar 1: aplica el softmax sobre las S claves.",
            "the weights of one query must add up to 1: apply softmax over the S keys.",
        ),
        "row_wrong": (
            "los pesos suman 1 pero no coinciden: revisa las puntuaciones, el producto escalar de `q` "
            "con cada clave, antes de la escala y la softmax.",
            "the weights add up to 1 but do not match: check the scores, the dot product of `q` with each "
            "key, before the scale and the softmax.",
        ),
    }
)


# ---- 08.strongest_head ---------------------------------------------------------------------------


def _head_cases() -> list[tuple[list[Tensor], int, int]]:
    """(maps, query, key): L × (1, H, T, T) random maps, and the pair of positions asked about."""
    return [(_random_maps(seed), query, key) for seed, (query, key) in enumerate([(4, 1), (2, 5), (0, 3), (5, 5)])]


def _random_maps(seed: int, n_layers: int = 3, n_heads: int = 4, length: int = 6) -> list[Tensor]:
    g = torch.Generator().manual_seed(seed)
    return [
        torch.softmax(3 * torch.randn(1, n_heads, length, length, generator=g), dim=-1) for _ in range(n_layers)
    ]  # L × (1, H, T, T)


def _head_mistakes(maps: list[Tensor], query: int, key: int) -> dict[str, tuple[int, int]]:
    """The (layer, head) each typical mistake answers."""
    want = top_heads(attention_to(maps, query, key), 1)[0]
    return {"head_swapped": want[::-1], "head_key_to_query": top_heads(attention_to(maps, key, query), 1)[0]}


@exercise("08.strongest_head")
def check_strongest_head(strongest_head, lang: str | None = None) -> Feedback:
    """``strongest_head(maps, query, key)`` must return the (layer, head) in which the token
    at position ``query`` gives the most attention to the token at position ``key``;
    ``maps`` is a list of (1, H, T, T) maps, one per layer."""
    for maps, query, key in _head_cases():
        want = top_heads(attention_to(maps, query, key), 1)[0]
        got = attempt(lang, strongest_head, [m.clone() for m in maps], query, key)
        if isinstance(got, Tensor):
            if got.is_floating_point() or got.is_complex():
                return HINTS(lang, "head_float_tensor", dtype=dtype_name(got))
            got = tuple(int(x) for x in got.flatten()) if got.numel() in (1, 2) else got
        if isinstance(got, int) or (isinstance(got, tuple) and len(got) == 1):
            return HINTS(lang, "head_single_number")
        pair = got if isinstance(got, (tuple, list)) and len(got) == 2 else None
        if pair is not None and any(
            isinstance(x, float) or (isinstance(x, Tensor) and x.is_floating_point()) for x in pair
        ):
            return HINTS(lang, "head_floats")
        try:
            got = (int(pair[0]), int(pair[1]))
        except (TypeError, ValueError, IndexError, RuntimeError):
            return HINTS(lang, "head_not_a_pair", what=type_name(got))
        if got == want:
            continue
        named = diagnose([got], by_key([_head_mistakes(maps, query, key)]), same=operator.eq)
        return HINTS(lang, named or "head_other_head", query=query, key=key, got=got)
    return correct(
        lang,
        "Así se encuentran las cabezas en el cuaderno: con código, no a ojo.",
        "That is how the notebook finds heads: with code, not by eye.",
    )


# ---- 08.attention_row ----------------------------------------------------------------------------


def _row_cases() -> list[tuple[Tensor, Tensor]]:
    """(q, k): one query (Dh,) and S keys (S, Dh), with S ≠ Dh."""
    g = torch.Generator().manual_seed(8)
    cases = []
    for S, Dh in [(5, 16), (7, 32)]:
        q = 2 * torch.randn(Dh, generator=g)
        cases.append((q, 2 * torch.randn(S, Dh, generator=g)))
    return cases


def _row_mistakes(scores: Tensor, Dh: int) -> dict[str, Tensor]:
    """The weights (S,) each typical mistake gives, from the scores k q."""
    return {
        "row_no_scale": torch.softmax(scores, dim=-1),
        "row_scale_d_head": torch.softmax(scores / Dh, dim=-1),
    }


@exercise("08.attention_row")
def check_attention_row(attention_row, lang: str | None = None) -> Feedback:
    """``attention_row(q, k)`` must return softmax(k q / √d_head): the weights of one query
    q (Dh,) over S keys k (S, Dh), shape (S,)."""
    for q, k in _row_cases():
        Dh = q.size(0)
        scores = k @ q  # (S,)
        want = torch.softmax(scores / math.sqrt(Dh), dim=-1)
        got = attempt(lang, attention_row, q.clone(), k.clone())
        if not isinstance(got, Tensor):
            return not_a_tensor(lang, got)
        if got.shape != want.shape:
            return HINTS(lang, "row_shape", want=tuple(want.shape), got=tuple(got.shape))
        got = got.detach()
        if close(got, want, atol=1e-5, rtol=0.0):
            continue
        got = got.double()
        named = diagnose([got], by_key([_row_mistakes(scores, Dh)]), atol=1e-5, rtol=0.0)
        if named is not None:
            return HINTS(lang, named)
        if close(got, scores / math.sqrt(Dh), atol=1e-4, rtol=0.0):  # scores, not weights: a looser tolerance
            return HINTS(lang, "row_no_softmax")
        if not abs(float(got.sum()) - 1.0) <= 1e-4:
            return HINTS(lang, "row_not_normalised")
        return HINTS(lang, "row_wrong")
    return correct(
        lang, "Es exactamente lo que dibuja la vista de neuronas.", "It is exactly what the neuron view draws."
    )
