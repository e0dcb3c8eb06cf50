"""Checkers for notebook 10's exercises: RoPE by pairs, SwiGLU, the online softmax.

Each checker compares the student's answer with the package's own (computed before the
student's code runs), on cases chosen so that the usual mistakes give different numbers
(non-square shapes, a base other than 10000, a late large score), and names the mistake
without writing the code. The tools a statement forbids are switched off while the
student's function runs, and using one is answered as such. ``solution_<exercise>`` are the
worked solutions.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor

from .. import modern
from ..i18n import tr
from ._core import (
    COMMON_HINTS,
    Feedback,
    ForbiddenTool,
    Hints,
    attempt,
    checker,
    close,
    correct,
    dtype_name,
    forbid,
    randn,
    stop,
    tensor,
    wrong_shape,
)
from .registry import explain

__all__ = [
    "HINTS",
    "check_rope",
    "check_swiglu",
    "check_online_softmax",
    "solution_rope",
    "solution_swiglu",
    "solution_online_softmax",
]

# Every hint these checkers give, (Spanish, English), by key.
HINTS = Hints(
    {
        **COMMON_HINTS,
        "forbidden": (
            "usaste {tool}, que el enunciado no permite: {why}",
            "you used {tool}, which the statement does not allow: {why}",
        ),
        "complex": (
            "devuelve un tensor real con la forma de `x`, no complejo: si usas números complejos, vuelve a pares reales "
            "al final.",
            "return a real tensor with the shape of `x`, not a complex one: if you use complex numbers, go back to real "
            "pairs at the end.",
        ),
        "dtype": (
            "el resultado debe ser un tensor de números reales (float), no {dtype}.",
            "the result must be a tensor of real numbers (float), not {dtype}.",
        ),
        # RoPE
        "rope_halves": (
            "giras los pares (i, i + Dh/2), la disposición de LLaMA. El enunciado pide los pares de dimensiones vecinas "
            "(2i, 2i+1).",
            "you turn the pairs (i, i + Dh/2), LLaMA's layout. The statement asks for the pairs of neighbouring "
            "dimensions (2i, 2i+1).",
        ),
        "rope_direction": (
            "giras en sentido contrario: revisa los signos de los senos en la rotación (el ángulo es +p·ω_i).",
            "you turn the other way: check the signs of the sines in the rotation (the angle is +p·ω_i).",
        ),
        "rope_frequency": (
            "las frecuencias no son las de la codificación sinusoidal: el par i tiene ω_i = base^(−2i/Dh). Revisa el "
            "exponente.",
            "the frequencies are not the sinusoidal encoding's: pair i has ω_i = base^(−2i/Dh). Check the exponent.",
        ),
        "rope_start": (
            "las posiciones empiezan en 0, y la posición 0 no gira.",
            "positions start at 0, and position 0 does not turn.",
        ),
        "rope_base": (
            "con base = 10000 acierta, pero no con otra base: usa el argumento `base`.",
            "it is right with base = 10000 but not with another base: use the `base` argument.",
        ),
        "rope_identity": (
            "la salida es igual a la entrada: no has girado nada.",
            "the output equals the input: nothing was turned.",
        ),
        "rope_half_pair": (
            "en una rotación cambian los dos elementos del par, cada uno con su coseno y su seno.",
            "in a rotation both elements of the pair change, each with its cosine and its sine.",
        ),
        "rope_other": (
            "el resultado no coincide: el par (2i, 2i+1) de la posición p debe girar un ángulo p·base^(−2i/Dh), como "
            "la matriz de rotación de la sección 2.",
            "the result does not match: the pair (2i, 2i+1) at position p must turn by the angle p·base^(−2i/Dh), like "
            "the rotation matrix of section 2.",
        ),
        # SwiGLU
        "swiglu_swapped": (
            "SiLU va sobre la compuerta, x·W_gate, no sobre x·W_up.",
            "SiLU goes on the gate, x·W_gate, not on x·W_up.",
        ),
        "swiglu_relu": (
            "usas ReLU: SwiGLU usa SiLU, z·σ(z).",
            "you use ReLU: SwiGLU uses SiLU, z·σ(z).",
        ),
        "swiglu_sigmoid": (
            "SiLU es z·σ(z), no σ(z) sola.",
            "SiLU is z·σ(z), not σ(z) alone.",
        ),
        "swiglu_gelu": (
            "usas GELU: SwiGLU usa SiLU, z·σ(z).",
            "you use GELU: SwiGLU uses SiLU, z·σ(z).",
        ),
        "swiglu_no_up": (
            "falta el producto con x·W_up: la compuerta multiplica, elemento a elemento, a la otra proyección.",
            "the product with x·W_up is missing: the gate multiplies the other projection, element by element.",
        ),
        "swiglu_sum": (
            "la compuerta y la otra proyección se multiplican elemento a elemento, no se suman.",
            "the gate and the other projection are multiplied element by element, not added.",
        ),
        "swiglu_late_silu": (
            "SiLU se aplica solo a la compuerta, antes del producto, no al producto.",
            "SiLU is applied to the gate alone, before the product, not to the product.",
        ),
        "swiglu_no_down": (
            "falta la proyección de vuelta con W_down.",
            "the projection back with W_down is missing.",
        ),
        "swiglu_other": (
            "el resultado no coincide con W_down(SiLU(x·W_gate) ⊙ x·W_up).",
            "the result does not match W_down(SiLU(x·W_gate) ⊙ x·W_up).",
        ),
        # online softmax
        "online_no_rescale": (
            "cuando un bloque trae un máximo mayor, la suma acumulada hay que corregirla: sus términos se calcularon con "
            "el máximo viejo.",
            "when a block brings a larger maximum, the running sum must be corrected: its terms were computed with the "
            "old maximum.",
        ),
        "online_inverted": (
            "el resultado no es finito ni con puntuaciones pequeñas: revisa el factor de corrección. La suma vieja se "
            "multiplica por exp(m_viejo − m_nuevo), que es ≤ 1, y 0 en el primer bloque (donde m_viejo = −∞).",
            "the result is not finite even with small scores: check the correction factor. The old sum is multiplied by "
            "exp(m_old − m_new), which is ≤ 1, and 0 at the first block (where m_old = −∞).",
        ),
        "online_per_block": (
            "normalizas cada bloque por su cuenta: cada fila debe sumar 1 entera, no cada bloque.",
            "you normalise each block on its own: each whole row must sum to 1, not each block.",
        ),
        "online_overflow": (
            "con una puntuación de 1000 el resultado no es finito: resta el máximo antes de la exponencial.",
            "with a score of 1000 the result is not finite: subtract the maximum before the exponential.",
        ),
        "online_missing_block": (
            "la suma deja fuera las últimas columnas: ¿llega tu bucle al último bloque, aunque sea más corto?",
            "the sum leaves out the last columns: does your loop reach the last block, even when it is shorter?",
        ),
        "online_unnormalised": (
            "cada fila debe sumar 1: al final, divide entre la suma acumulada.",
            "each row must sum to 1: at the end, divide by the running sum.",
        ),
        "online_other": (
            "el resultado no coincide con la softmax de cada fila.",
            "the result does not match the softmax of each row.",
        ),
    }
)


def _run(lang: str, fn: Callable[..., Any], args: tuple, tools: Iterable[str | tuple[str, str]], why: tuple[str, str]):
    """The student's answer with the ``tools`` the statement forbids switched off (``why``: the reason);
    using one stops the check with this notebook's hint, which names the tool."""

    def guarded(*a: Any) -> Any:
        try:
            return fn(*a)
        except ForbiddenTool as used:
            return used

    with forbid(tools, *why):
        got = attempt(lang, guarded, *args)
    if isinstance(got, ForbiddenTool):
        raise stop(HINTS(lang, "forbidden", tool=f"`{got.name}`", why=tr(lang, got.es, got.en)))
    return got


def _float_answer(lang: str, got: Any, expected: Tensor) -> Tensor:
    """The answer as a float tensor of ``expected``'s shape; anything else stops the check with its hint."""
    got = tensor(lang, got)
    if got.is_complex():
        raise stop(HINTS(lang, "complex"))
    if not got.is_floating_point():
        raise stop(HINTS(lang, "dtype", dtype=dtype_name(got)))
    if got.shape != expected.shape:
        raise stop(wrong_shape(lang, got, expected.shape))
    return got.float()


# --- exercise 1: RoPE by pairs ----------------------------------------------------------


@explain(
    "Cada par de dimensiones (2i, 2i+1) es un punto del plano que se gira un ángulo p · base^(−2i/Dh), con p la "
    "posición: el primer elemento del par pasa a x·cos − y·sen y el segundo a x·sen + y·cos. Los pares bajos giran "
    "deprisa y los altos despacio, como las frecuencias de la codificación sinusoidal del cuaderno 03.",
    "Each pair of dimensions (2i, 2i+1) is a point in the plane, turned by the angle p · base^(−2i/Dh), with p the "
    "position: the pair's first element becomes x·cos − y·sin and the second x·sin + y·cos. Low pairs turn fast and "
    "high pairs slowly, like the frequencies of notebook 03's sinusoidal encoding.",
)
def solution_rope(x: Tensor, base: float) -> Tensor:
    """Turn the pair (2i, 2i+1) at position p by the angle p · base^(−2i/Dh). x (T, Dh)."""
    T, Dh = x.shape
    omega = base ** (-torch.arange(0, Dh, 2, dtype=torch.float32) / Dh)  # (Dh/2,)
    angle = torch.arange(T, dtype=torch.float32)[:, None] * omega  # (T, Dh/2)
    cos, sin = torch.cos(angle), torch.sin(angle)
    even, odd = x[:, 0::2], x[:, 1::2]  # (T, Dh/2) each
    out = torch.empty_like(x)
    out[:, 0::2] = even * cos - odd * sin
    out[:, 1::2] = even * sin + odd * cos
    return out


def _rope_with(
    x: Tensor, base: float, exponent: float = 2.0, sign: float = 1.0, start: int = 0, halves: bool = False
) -> Tensor:
    T, Dh = x.shape
    omega = base ** (-exponent * torch.arange(0, Dh // 2, dtype=torch.float32) / Dh)
    angle = sign * (torch.arange(T, dtype=torch.float32)[:, None] + start) * omega
    return modern.apply_rope(x, angle.cos(), angle.sin(), interleaved=not halves)


_ROPE_TOOLS = (
    ("minitransformer.modern.apply_rope", "apply_rope"),
    ("minitransformer.modern.rope_cos_sin", "rope_cos_sin"),
    ("minitransformer.modern.RotaryEmbedding.forward", "RotaryEmbedding"),
)
_ROPE_WHY = (
    "escribe tú la rotación de cada par, sin las funciones de RoPE del paquete.",
    "write the rotation of each pair yourself, without the package's RoPE functions.",
)


@checker
def check_rope(rope: Callable[[Tensor, float], Tensor], lang: str | None = None) -> Feedback:
    """Check ``rope(x, base)``: x (T, Dh), positions 0 … T − 1, interleaved pairs (2i, 2i+1)."""
    cases = [(randn(7, 10, seed=10), 10000.0), (randn(5, 6, seed=11) * 2, 500.0)]
    for n, (x, base) in enumerate(cases):
        T, Dh = x.shape
        expected = modern.apply_rope(x, *modern.rope_cos_sin(torch.arange(T), Dh, base), interleaved=True)
        wrongs = [
            (_rope_with(x, base, halves=True), "rope_halves"),
            (_rope_with(x, base, sign=-1.0), "rope_direction"),
            (_rope_with(x, base, exponent=1.0), "rope_frequency"),
            (_rope_with(x, base, exponent=4.0), "rope_frequency"),
            (_rope_with(x, base, start=1), "rope_start"),
            (_rope_with(x, 10000.0), "rope_base"),
            (x, "rope_identity"),
        ]
        half = expected.clone()
        half[:, 1::2] = x[:, 1::2]
        other_half = expected.clone()
        other_half[:, 0::2] = x[:, 0::2]
        wrongs += [(half, "rope_half_pair"), (other_half, "rope_half_pair")]
        got = _float_answer(lang, _run(lang, rope, (x.clone(), base), _ROPE_TOOLS, _ROPE_WHY), expected)
        if close(got, expected, atol=1e-4):
            continue
        if not bool(torch.isfinite(got).all()):
            return HINTS(lang, "nan")
        for wrong, key in wrongs:
            if n == 0 and key == "rope_base":
                continue
            if close(got, wrong, atol=1e-4):
                return HINTS(lang, key)
        return HINTS(lang, "rope_other")
    return correct(
        lang,
        "Coincide con `apply_rope(..., interleaved=True)` del paquete.",
        "It matches the package's `apply_rope(..., interleaved=True)`.",
    )


# --- exercise 2: SwiGLU -----------------------------------------------------------------


@explain(
    "Dos proyecciones de x: una pasa por SiLU(z) = z · sigmoid(z) y hace de puerta, la otra lleva el contenido; "
    "se multiplican elemento a elemento y W_down vuelve a d_model.",
    "Two projections of x: one goes through SiLU(z) = z · sigmoid(z) and acts as a gate, the other carries the "
    "content; they are multiplied element by element and W_down goes back to d_model.",
)
def solution_swiglu(x: Tensor, W_gate: Tensor, W_up: Tensor, W_down: Tensor) -> Tensor:
    """W_down(SiLU(x W_gate) ⊙ x W_up), SiLU written with the sigmoid. x (..., D)."""
    gate = x @ W_gate  # (..., d_ff)
    return (gate * torch.sigmoid(gate) * (x @ W_up)) @ W_down  # (..., D)


_SILU_TOOLS = ("torch.nn.functional.silu", "torch.silu")
_SWIGLU_WHY = (
    "escribe SiLU tú mismo, z·σ(z), con `torch.sigmoid`.",
    "write SiLU yourself, z·σ(z), with `torch.sigmoid`.",
)


@checker
def check_swiglu(swiglu: Callable[..., Tensor], lang: str | None = None) -> Feedback:
    """Check ``swiglu(x, W_gate, W_up, W_down)``: x (..., D), W_gate and W_up (D, F), W_down (F, D)."""
    D, Fw = 6, 10
    x = randn(2, 3, D, seed=20) * 1.5
    W_gate, W_up, W_down = randn(D, Fw, seed=21), randn(D, Fw, seed=22), randn(Fw, D, seed=23)
    gate, up = x @ W_gate, x @ W_up
    expected = (F.silu(gate) * up) @ W_down
    wrongs = [
        ((gate * F.silu(up)) @ W_down, "swiglu_swapped"),
        ((F.silu(up) * gate) @ W_down, "swiglu_swapped"),
        ((F.relu(gate) * up) @ W_down, "swiglu_relu"),
        ((torch.sigmoid(gate) * up) @ W_down, "swiglu_sigmoid"),
        ((F.gelu(gate) * up) @ W_down, "swiglu_gelu"),
        (F.silu(gate) @ W_down, "swiglu_no_up"),
        ((F.silu(gate) + up) @ W_down, "swiglu_sum"),
        (F.silu(gate * up) @ W_down, "swiglu_late_silu"),
    ]
    got = _run(lang, swiglu, (x.clone(), W_gate.clone(), W_up.clone(), W_down.clone()), _SILU_TOOLS, _SWIGLU_WHY)
    if isinstance(got, Tensor) and got.shape == gate.shape and got.is_floating_point():
        return HINTS(lang, "swiglu_no_down")
    got = _float_answer(lang, got, expected)
    if close(got, expected, atol=1e-3):
        return correct(lang, "Es la red SwiGLU de LLaMA.", "It is LLaMA's SwiGLU network.")
    if not bool(torch.isfinite(got).all()):
        return HINTS(lang, "nan")
    for wrong, key in wrongs:
        if close(got, wrong, atol=1e-3):
            return HINTS(lang, key)
    return HINTS(lang, "swiglu_other")


# --- exercise 3: the online softmax -----------------------------------------------------


@explain(
    "Recorre las columnas por bloques llevando el máximo m y la suma l de exp(s − m) vistos hasta ahora. Cuando "
    "un bloque trae un máximo mayor, la suma vieja se reescala con exp(m − m_nuevo) antes de sumarle el bloque. "
    "Al final, exp(s − m) / l es la softmax, sin haber guardado nunca una fila entera de exponenciales.",
    "Walk over the columns block by block, carrying the maximum m and the sum l of exp(s − m) seen so far. When "
    "a block brings a larger maximum, the old sum is rescaled by exp(m − m_new) before the block is added. At "
    "the end, exp(s − m) / l is the softmax, without ever storing a whole row of exponentials.",
)
def solution_online_softmax(scores: Tensor, block_size: int) -> Tensor:
    """Softmax over the last axis with a running maximum and sum, one block of columns at a time."""
    m = torch.full(scores.shape[:-1] + (1,), float("-inf"))
    l = torch.zeros_like(m)
    for start in range(0, scores.size(-1), block_size):
        block = scores[..., start : start + block_size]
        m_new = torch.maximum(m, block.amax(dim=-1, keepdim=True))
        l = l * torch.exp(m - m_new) + torch.exp(block - m_new).sum(dim=-1, keepdim=True)
        m = m_new
    return torch.exp(scores - m) / l


def _online_variant(scores: Tensor, block_size: int, kind: str) -> Tensor:
    m = torch.full(scores.shape[:-1] + (1,), float("-inf"))
    l = torch.zeros_like(m)
    S = scores.size(-1)
    stop = S - block_size if kind == "missing" else S
    for start in range(0, max(stop, 1), block_size):
        block = scores[..., start : start + block_size]
        m_new = torch.maximum(m, block.amax(dim=-1, keepdim=True))
        if kind == "no_rescale":
            l = l + torch.exp(block - m_new).sum(dim=-1, keepdim=True)
        elif kind == "inverted":
            l = l * torch.exp(m_new - m).nan_to_num(0.0, 0.0, 0.0) + torch.exp(block - m_new).sum(dim=-1, keepdim=True)
        else:
            l = l * torch.exp(m - m_new) + torch.exp(block - m_new).sum(dim=-1, keepdim=True)
        m = m_new
    return torch.exp(scores - m) / l


_SOFTMAX_TOOLS = (
    "torch.softmax",
    "torch.nn.functional.softmax",
    ("torch.Tensor.softmax", "Tensor.softmax"),
    "torch.special.softmax",
    "torch._softmax",
    "torch.nn.functional.log_softmax",
    "torch.special.log_softmax",
    "torch.log_softmax",
    ("torch.Tensor.log_softmax", "Tensor.log_softmax"),
    "torch.logsumexp",
    ("torch.Tensor.logsumexp", "Tensor.logsumexp"),
    ("minitransformer.modern.online_softmax", "online_softmax"),
)
_ONLINE_WHY = (
    "calcula tú el máximo y la suma bloque a bloque, sin la softmax de PyTorch ni `logsumexp`.",
    "compute the maximum and the sum block by block yourself, without PyTorch's softmax or `logsumexp`.",
)


@checker
def check_online_softmax(online_softmax: Callable[[Tensor, int], Tensor], lang: str | None = None) -> Feedback:
    """Check ``online_softmax(scores, block_size)``: scores (R, S) -> the softmax of each row."""
    first = randn(3, 23, seed=30) * 4
    first[0, 21] = 1000.0  # a huge score in the last, shorter block
    first[1, :4] = 50.0  # the maximum in the first block
    cases = [(randn(2, 9, seed=31) * 3, 7), (first, 4)]  # small scores first, then the huge one
    for scores, block in cases:
        expected = torch.softmax(scores, dim=-1)
        got = _run(lang, online_softmax, (scores.clone(), block), _SOFTMAX_TOOLS, _ONLINE_WHY)
        got = _float_answer(lang, got, expected)
        if close(got, expected):
            continue
        if not bool(torch.isfinite(got).all()):
            return HINTS(lang, "online_overflow" if scores.abs().max() > 100 else "online_inverted")
        per_block = torch.cat([torch.softmax(b, dim=-1) for b in scores.split(block, dim=-1)], dim=-1)
        wrongs = [
            (_online_variant(scores, block, "no_rescale"), "online_no_rescale"),
            (_online_variant(scores, block, "inverted"), "online_inverted"),
            (per_block, "online_per_block"),
            (_online_variant(scores, block, "missing"), "online_missing_block"),
            (torch.exp(scores - scores.amax(dim=-1, keepdim=True)), "online_unnormalised"),
        ]
        for wrong, key in wrongs:
            if bool(torch.isfinite(wrong).all()) and close(got, wrong):
                return HINTS(lang, key)
        return HINTS(lang, "online_other")
    return correct(
        lang,
        "Es la softmax, calculada por bloques como en FlashAttention.",
        "It is the softmax, computed in blocks as in FlashAttention.",
    )
