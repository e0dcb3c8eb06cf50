"""The answer key of notebook 02, in notebook order:
``02.split_heads``, ``02.masked_attention``, ``02.decoder_mask``.
"""

from __future__ import annotations

import math

import torch

from ..registry import solution


@solution(
    "02.split_heads",
    "`view(B, T, H, d_head)` parte el último eje en H bloques contiguos de d_head columnas (la cabeza h "
    "recibe las columnas h·d_head … (h+1)·d_head − 1); `transpose(1, 2)` lleva el eje de las cabezas delante "
    "del de las posiciones. Ver `x` directamente como (B, H, T, d_head) daría la forma correcta con los "
    "números mezclados.",
    "`view(B, T, H, d_head)` splits the last axis into H contiguous blocks of d_head columns (head h gets "
    "columns h·d_head … (h+1)·d_head − 1); `transpose(1, 2)` moves the heads' axis in front of the positions' "
    "axis. Viewing `x` directly as (B, H, T, d_head) would give the right shape with the numbers mixed up.",
)
def solution_split_heads(x, n_heads):
    B, T, D = x.shape
    return x.view(B, T, n_heads, D // n_heads).transpose(1, 2)  # (B, H, T, d_head)


@solution(
    "02.masked_attention",
    "Las puntuaciones de todas las cabezas salen de un solo `einsum` (B, H, T, S), escaladas por √d_head. "
    "Donde la máscara es False se pone −∞, y la softmax les da peso 0. Una fila sin ninguna clave permitida "
    "sería toda −∞ y daría 0/0 = NaN: esas filas se ponen a cero después de la softmax, y entonces su salida, "
    "pesos por valores, también es cero.",
    "The scores of every head come from one `einsum` (B, H, T, S), scaled by √d_head. Where the mask is "
    "False they become −∞, and the softmax gives them weight 0. A row with no allowed key would be all −∞ "
    "and give 0/0 = NaN: those rows are set to zero after the softmax, and then their output, weights times "
    "values, is zero too.",
)
def solution_masked_attention(q, k, v, mask):
    scores = torch.einsum("bhtd,bhsd->bhts", q, k) / math.sqrt(q.size(-1))  # (B, H, T, S)
    scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    weights = weights.masked_fill(
        ~mask.any(dim=-1, keepdim=True), 0.0
    )  # «filas sin ninguna clave permitida|rows with no allowed key»
    return weights @ v, weights  # (B, H, T, d_head), (B, H, T, S)


@solution(
    "02.decoder_mask",
    "Dos máscaras que se combinan con AND (`&`): la de relleno, (B, 1, 1, T), dice qué claves no son `pad_id` "
    "y se extiende a todas las filas; la causal, (T, T), es el triángulo inferior con la diagonal (cada "
    "posición ve a sí misma y a las anteriores). La difusión (broadcasting) da (B, 1, T, T), que se extiende "
    "a las H cabezas.",
    "Two masks combined with AND (`&`): the padding one, (B, 1, 1, T), says which keys are not `pad_id` and "
    "extends over every row; the causal one, (T, T), is the lower triangle with the diagonal (each position "
    "sees itself and earlier ones). Broadcasting gives (B, 1, T, T), which extends to the H heads.",
)
def solution_decoder_mask(tokens, pad_id):
    T = tokens.size(1)
    keys = (tokens != pad_id)[:, None, None, :]  # (B, 1, 1, T)
    causal = torch.ones(T, T, dtype=torch.bool, device=tokens.device).tril()  # (T, T)
    return keys & causal  # (B, 1, T, T)
