"""The answer key of notebook 10, in notebook order:
``10.rope``, ``10.swiglu``, ``10.online_softmax``, ``10.cached_step``.
"""

from __future__ import annotations

import torch

from ...attention import scaled_dot_product_attention
from ...modern import apply_rope, rope_cos_sin
from ..registry import solution


@solution(
    "10.rope",
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


@solution(
    "10.swiglu",
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


@solution(
    "10.online_softmax",
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


@solution(
    "10.cached_step",
    "La caché ya guarda S = len(cache) posiciones, así que los T tokens nuevos están en las posiciones S, S + 1, "
    "…, S + T − 1: ahí se giran `q` y `k` (con las cabezas delante de los tokens, como pide `apply_rope`), y eso se "
    "toma antes de añadir nada. La caché recibe las claves giradas, que no se vuelven a girar nunca, y los valores "
    "tal cual, en su disposición (B, T, H_kv, D_h); `update` devuelve todas las guardadas. Cada cabeza de clave y "
    "valor se repite G = H / H_kv veces seguidas (la cabeza de consulta h usa la h // G). La máscara deja a cada "
    "token nuevo i ver las S posiciones guardadas y los nuevos hasta él mismo: la diagonal de una máscara causal "
    "de T filas y S + T columnas desplazada S columnas. Los comentarios dan la forma de cada tensor.",
    "The cache already holds S = len(cache) positions, so the T new tokens are at positions S, S + 1, …, "
    "S + T − 1: that is where `q` and `k` are turned (with the heads before the tokens, as `apply_rope` wants), and "
    "it is read before anything is appended. The cache gets the turned keys, never turned again, and the values "
    "as they are, in its layout (B, T, H_kv, D_h); `update` returns all the stored ones. Each key/value head is "
    "repeated G = H / H_kv times in a row (query head h uses head h // G). The mask lets each new token i see the "
    "S stored positions and the new ones up to itself: the diagonal of a causal mask of T rows and S + T columns, "
    "shifted by S columns. The comments give each tensor's shape.",
)
def solution_cached_step(q, k, v, cache, base):
    B, T, H, Dh = q.shape
    S = len(cache)
    cos, sin = rope_cos_sin(torch.arange(S, S + T), Dh, base)  # (T, Dh/2)
    q = apply_rope(q.transpose(1, 2), cos, sin)  # (B, H, T, Dh)
    k = apply_rope(k.transpose(1, 2), cos, sin)  # (B, H_kv, T, Dh)
    keys, values = cache.update(k.transpose(1, 2), v)  # (B, S + T, H_kv, Dh)
    G = H // keys.size(2)
    keys = keys.transpose(1, 2).repeat_interleave(G, dim=1)  # (B, H, S + T, Dh)
    values = values.transpose(1, 2).repeat_interleave(G, dim=1)  # (B, H, S + T, Dh)
    allowed = torch.ones(T, S + T, dtype=torch.bool).tril(diagonal=S)  # (T, S + T)
    out, _ = scaled_dot_product_attention(q, keys, values, allowed)  # (B, H, T, Dh)
    return out.transpose(1, 2)  # (B, T, H, Dh)
