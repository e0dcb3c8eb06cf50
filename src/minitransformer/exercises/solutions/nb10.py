"""The answer key of notebook 10, in notebook order:
``10.rope``, ``10.swiglu``, ``10.online_softmax``, ``10.rope_offset``.
"""

from __future__ import annotations

import torch

from .._core import exercise
from ..registry import explain


@exercise("10.rope")
@explain(
    "Cada par de dimensiones (2i, 2i+1) es un punto del plano que se gira un ángulo p · base^(−2i/Dh), con p la "
    "posición: el primer elemento del par pasa a x·cos − y·sen y el segundo a x·sen + y·cos, los dos calculados con "
    "los valores de antes de girar. Los pares bajos giran deprisa y los altos despacio, como las frecuencias de la "
    "codificación sinusoidal del cuaderno 03. Los comentarios dan la forma de cada tensor.",
    "Each pair of dimensions (2i, 2i+1) is a point in the plane, turned by the angle p · base^(−2i/Dh), with p the "
    "position: the pair's first element becomes x·cos − y·sin and the second x·sin + y·cos, both computed from the "
    "values before turning. Low pairs turn fast and high pairs slowly, like the frequencies of notebook 03's "
    "sinusoidal encoding. The comments give each tensor's shape.",
)
def solution_rope(x, base):
    T, Dh = x.shape
    omega = base ** (-torch.arange(0, Dh, 2, dtype=torch.float32) / Dh)  # (Dh/2,)
    angle = torch.arange(T, dtype=torch.float32)[:, None] * omega  # (T, Dh/2)
    cos, sin = torch.cos(angle), torch.sin(angle)  # (T, Dh/2)
    even, odd = x[:, 0::2], x[:, 1::2]  # (T, Dh/2)
    out = torch.empty_like(x)  # (T, Dh)
    out[:, 0::2] = even * cos - odd * sin
    out[:, 1::2] = even * sin + odd * cos
    return out


@exercise("10.swiglu")
@explain(
    "Dos proyecciones de x: la de W_gate pasa por SiLU(z) = z · sigmoid(z) y hace de compuerta, la de W_up lleva el "
    "contenido; se multiplican elemento a elemento y W_down vuelve a d_model. Con `@`, que multiplica el último "
    "eje, vale para x de cualquier forma (…, D). Los comentarios dan la forma de cada tensor.",
    "Two projections of x: W_gate's goes through SiLU(z) = z · sigmoid(z) and acts as the gate, W_up's carries the "
    "content; they are multiplied element by element and W_down goes back to d_model. With `@`, which multiplies "
    "the last axis, it works for x of any shape (…, D). The comments give each tensor's shape.",
)
def solution_swiglu(x, W_gate, W_up, W_down):
    gate = x @ W_gate  # (..., d_ff)
    return (gate * torch.sigmoid(gate) * (x @ W_up)) @ W_down  # (..., D)


@exercise("10.online_softmax")
@explain(
    "Recorre las columnas por bloques llevando el máximo m y la suma l de exp(s − m) vistos hasta ahora; m empieza "
    "en −∞ y l en 0. Cuando un bloque trae un máximo mayor, la suma vieja se reescala con exp(m − m_nuevo) antes de "
    "sumarle el bloque. Al final, exp(s − m) / l es la softmax, sin haber mirado nunca más de un bloque a la vez "
    "para el máximo y la suma. Los comentarios dan la forma de cada tensor (R filas).",
    "Walk over the columns block by block, carrying the maximum m and the sum l of exp(s − m) seen so far; m starts "
    "at −∞ and l at 0. When a block brings a larger maximum, the old sum is rescaled by exp(m − m_new) before the "
    "block is added. At the end, exp(s − m) / l is the softmax, without ever looking at more than one block at a "
    "time for the maximum and the sum. The comments give each tensor's shape (R rows).",
)
def solution_online_softmax(scores, block_size):
    m = torch.full((scores.size(0), 1), float("-inf"))  # (R, 1)
    l = torch.zeros_like(m)  # (R, 1)
    for start in range(0, scores.size(-1), block_size):
        block = scores[:, start : start + block_size]  # (R, ≤ block_size)
        m_new = torch.maximum(m, block.amax(dim=-1, keepdim=True))  # (R, 1)
        l = l * torch.exp(m - m_new) + torch.exp(block - m_new).sum(dim=-1, keepdim=True)
        m = m_new
    return torch.exp(scores - m) / l  # (R, S)


@exercise("10.rope_offset")
@explain(
    "La caché guarda las claves de las posiciones 0 … S − 1, ya giradas cada una en la suya; len(cache) es S (el eje "
    "1 de cache.k, y 0 cuando la caché aún está vacía y cache.k es None). El primer token nuevo es el siguiente de "
    "la secuencia: su posición es S, y los siguientes de la misma llamada van en S + 1, S + 2… La capacidad de una "
    "caché preasignada solo dice cuánto sitio le queda, no dónde va la secuencia.",
    "The cache holds the keys of positions 0 … S − 1, each already turned at its own; len(cache) is S (axis 1 of "
    "cache.k, and 0 while the cache is still empty and cache.k is None). The first new token is the sequence's "
    "next: its position is S, and the next ones of the same call go at S + 1, S + 2… The capacity of a "
    "preallocated cache only says how much room it has, not where the sequence is.",
)
def solution_rope_offset(cache):
    return len(cache)
