"""The answer key of notebook 05, in notebook order:
``05.shift_right``, ``05.cross_attention``, ``05.decoder_layer``.
"""

from __future__ import annotations

import math

import torch

from ..registry import solution


@solution(
    "05.shift_right",
    "En la posición t el decodificador lee el token anterior, y[t−1], y debe predecir y[t]: la entrada es "
    "`bos_id` seguido de `y` sin su último token, con la misma forma (B, T) y el mismo dtype que `y`. "
    "`torch.cat` construye un tensor nuevo, así que `y` no cambia.",
    "At position t the decoder reads the previous token, y[t−1], and must predict y[t]: the input is `bos_id` "
    "followed by `y` without its last token, with the same shape (B, T) and dtype as `y`. `torch.cat` builds "
    "a new tensor, so `y` does not change.",
)
def solution_my_shift_right(y, bos_id):
    bos = torch.full((y.size(0), 1), bos_id, dtype=y.dtype, device=y.device)  # (B, 1)
    return torch.cat([bos, y[:, :-1]], dim=1)  # (B, T)


@solution(
    "05.cross_attention",
    "Las consultas son los vectores del decodificador `x` y las claves y los valores, la memoria: las "
    "puntuaciones `x · memoryᵀ` son (B, T, S), una fila por token de destino. Se dividen entre √D; las claves "
    "de relleno del origen reciben −∞ (la máscara (B, 1, S) se extiende a todas las filas), y la softmax sobre "
    "las claves les da peso 0. No hay máscara causal: el origen entero se conoce desde el principio.",
    "The queries are the decoder's vectors `x` and the keys and values the memory: the scores "
    "`x · memoryᵀ` are (B, T, S), one row per target token. They are divided by √D; the source's padding keys "
    "get −∞ (the (B, 1, S) mask extends over every row), and the softmax over the keys gives them weight 0. "
    "There is no causal mask: the whole source is known from the start.",
)
def solution_my_cross_attention(x, memory, src, pad_id):
    scores = x @ memory.transpose(1, 2) / math.sqrt(x.size(-1))  # (B, T, S)
    keys = (src != pad_id)[:, None, :]  # (B, 1, S)
    weights = torch.softmax(scores.masked_fill(~keys, float("-inf")), dim=-1)  # (B, T, S)
    return weights @ memory, weights  # (B, T, D), (B, T, S)


@solution(
    "05.decoder_layer",
    "Tres subcapas, cada una envuelta en su conexión residual y su propia LayerNorm (post-LN): la "
    "autoatención enmascarada con `tgt_mask`; la atención cruzada, con consultas de la salida anterior y "
    "claves y valores de la memoria, con `memory_mask`; y la red prealimentada. Las atenciones devuelven "
    "`(salida, pesos)`: se usa la salida, `[0]`.",
    "Three sublayers, each wrapped in its residual connection and its own LayerNorm (post-LN): masked "
    "self-attention with `tgt_mask`; cross-attention, with queries from the previous output and keys and "
    "values from the memory, with `memory_mask`; and the feed-forward network. The attentions return "
    "`(output, weights)`: take the output, `[0]`.",
)
def solution_my_decoder_layer(layer, x, memory, tgt_mask, memory_mask):
    x = layer.norm1(x + layer.self_attn(x, x, x, tgt_mask)[0])  # (B, T, D)
    x = layer.norm2(x + layer.cross_attn(x, memory, memory, memory_mask)[0])  # (B, T, D)
    return layer.norm3(x + layer.feed_forward(x))  # (B, T, D)
