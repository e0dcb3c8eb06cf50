"""The answer key of notebook 01, in notebook order: ``01.softmax``, ``01.attention_weights``, ``01.self_attention``."""

from __future__ import annotations

import math

import torch

from ..registry import solution


@solution(
    "01.softmax",
    "Restar a cada fila su máximo no cambia la softmax (el factor e^(−máx) se cancela al dividir) y deja "
    "todos los exponentes ≤ 0: `exp` nunca se desborda y el mayor término vale 1, así que la suma nunca es 0. "
    "`keepdim=True` conserva el eje para que la resta y la división se extiendan fila a fila, con o sin lote.",
    "Subtracting each row's maximum leaves the softmax unchanged (the factor e^(−max) cancels in the division) "
    "and makes every exponent ≤ 0: `exp` never overflows and the largest term is 1, so the sum is never 0. "
    "`keepdim=True` keeps the axis so that the subtraction and the division broadcast row by row, batched or "
    "not.",
)
def solution_softmax(x):
    e = torch.exp(x - x.max(dim=-1, keepdim=True).values)
    return e / e.sum(dim=-1, keepdim=True)


@solution(
    "01.attention_weights",
    "Las puntuaciones son los productos escalares de cada consulta con cada clave, `q @ kᵀ` (T, S); "
    "`transpose(-2, -1)` traspone solo los dos últimos ejes, así que sirve también con lotes. La escala es "
    "√d_k, el tamaño del último eje de `q`, y la softmax va sobre las claves (el último eje).",
    "The scores are the dot products of every query with every key, `q @ kᵀ` (T, S); `transpose(-2, -1)` "
    "swaps only the last two axes, so it works with batches too. The scale is √d_k, the size of `q`'s last "
    "axis, and the softmax runs over the keys (the last axis).",
)
def solution_attention_weights(q, k):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))  # (..., T, S)
    return torch.softmax(scores, dim=-1)


@solution(
    "01.self_attention",
    "Primero las tres proyecciones: Q = x W_Q y K = x W_K (T, d_k), V = x W_V (T, d_v). Las puntuaciones "
    "Q Kᵀ (T, T) se dividen entre √d_k, el ancho de Q y K (no d_model, el de x, ni T, el número de tokens); "
    "la softmax de cada fila reparte 1 entre las claves y esos pesos combinan las filas de V.",
    "First the three projections: Q = x W_Q and K = x W_K (T, d_k), V = x W_V (T, d_v). The scores Q Kᵀ "
    "(T, T) are divided by √d_k, the width of Q and K (not d_model, that of x, nor T, the number of tokens); "
    "each row's softmax shares 1 among the keys, and those weights combine the rows of V.",
)
def solution_self_attention(x, W_q, W_k, W_v):
    Q, K, V = x @ W_q, x @ W_k, x @ W_v  # (T, d_k), (T, d_k), (T, d_v)
    weights = torch.softmax(Q @ K.T / math.sqrt(K.size(-1)), dim=-1)  # (T, T)
    return weights @ V  # (T, d_v)
