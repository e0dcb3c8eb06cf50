"""The answer key of notebook 06, in notebook order: ``06.embed``, ``06.model_params``, ``06.output_probabilities``."""

from __future__ import annotations

import math

import torch

from ..registry import solution


@solution(
    "06.embed",
    "Cada id elige su fila de la tabla, `table[tokens]` (B, T, D). El artículo multiplica los embeddings por "
    "√D para que queden en la escala de la codificación posicional, y suma la codificación de cada posición, "
    "0 … T − 1: las T primeras filas de `pe`, que se extienden a todo el lote.",
    "Each id picks its row of the table, `table[tokens]` (B, T, D). The paper multiplies the embeddings by √D "
    "to put them on the scale of the positional encoding, and adds the encoding of each position, 0 … T − 1: "
    "the first T rows of `pe`, which broadcast over the batch.",
)
def solution_my_embed(tokens, table, pe):
    T, D = tokens.size(1), table.size(1)
    return table[tokens] * math.sqrt(D) + pe[:T]  # (B, T, D)


@solution(
    "06.model_params",
    "Una capa del codificador: atención (4 proyecciones D × D con sesgo), red prealimentada (D·F + F + F·D + D) "
    "y 2 LayerNorm de 2D. Una del decodificador: dos atenciones, la red y 3 LayerNorm. Con los pesos "
    "compartidos hay una sola matriz V × D, más el sesgo de la proyección de salida (V). En pre-LN cada pila "
    "termina con otra LayerNorm. Las cabezas no cuentan: se reparten las mismas matrices.",
    "An encoder layer: attention (4 D × D projections with bias), feed-forward (D·F + F + F·D + D) and 2 "
    "LayerNorms of 2D. A decoder layer: two attentions, the network and 3 LayerNorms. With shared weights there "
    "is a single V × D matrix, plus the output projection's bias (V). In pre-LN each stack ends with one more "
    "LayerNorm. Heads do not count: they share out the same matrices.",
)
def solution_my_model_params(V, D, F, N, norm_first):
    attention = 4 * (D * D + D)
    feed_forward = D * F + F + F * D + D
    norm = 2 * D
    encoder = N * (attention + feed_forward + 2 * norm)
    decoder = N * (2 * attention + feed_forward + 3 * norm)
    final_norms = 2 * norm if norm_first else 0
    return V * D + V + encoder + decoder + final_norms


@solution(
    "06.output_probabilities",
    "`weight` es (V, D), una fila por token: los logits son `h @ weightᵀ + bias`, (B, T, V), y la softmax sobre "
    "el vocabulario (el último eje) los convierte en probabilidades que suman 1 en cada posición.",
    "`weight` is (V, D), one row per token: the logits are `h @ weightᵀ + bias`, (B, T, V), and the softmax "
    "over the vocabulary (the last axis) turns them into probabilities that add up to 1 at every position.",
)
def solution_my_output_probabilities(h, weight, bias):
    logits = h @ weight.T + bias  # (B, T, V)
    return torch.softmax(logits, dim=-1)
