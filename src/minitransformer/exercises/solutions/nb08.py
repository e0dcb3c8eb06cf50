"""The answer key of notebook 08, in notebook order: ``08.strongest_head``, ``08.attention_row``."""

from __future__ import annotations

import math

import torch

from ..registry import solution


@solution(
    "08.strongest_head",
    "Apilar los mapas da un tensor (L, 1, H, T, T); el peso de la posición `query` hacia la posición `key` en "
    "cada capa y cabeza es la entrada [:, 0, :, query, key], una matriz (L, H). `argmax` sobre la matriz "
    "aplanada da un índice l·H + h, y `divmod` lo separa en (capa, cabeza).",
    "Stacking the maps gives an (L, 1, H, T, T) tensor; the weight from position `query` to position `key` in "
    "every layer and head is the entry [:, 0, :, query, key], an (L, H) matrix. `argmax` over the flattened "
    "matrix gives an index l·H + h, and `divmod` splits it into (layer, head).",
)
def solution_strongest_head(maps, query, key):
    weights = torch.stack(maps)[:, 0, :, query, key]  # (L, H)
    layer, head = divmod(int(weights.argmax()), weights.size(1))
    return layer, head


@solution(
    "08.attention_row",
    "Una fila de la atención: el producto escalar de la consulta con cada clave, `k @ q` (S,), dividido entre "
    "√d_head, y la softmax sobre las S claves para que los pesos sumen 1.",
    "One row of attention: the dot product of the query with each key, `k @ q` (S,), divided by √d_head, and "
    "the softmax over the S keys so that the weights add up to 1.",
)
def solution_attention_row(q, k):
    scores = k @ q / math.sqrt(q.size(-1))  # (S,)
    return torch.softmax(scores, dim=-1)
