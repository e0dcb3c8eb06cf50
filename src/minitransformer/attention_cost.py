"""What attention costs: the online softmax behind FlashAttention, PyTorch's fused attention
backends timed against the one that builds the whole matrix, and the power law that a cost
follows with the length.

Attention holds a (T, S) matrix of scores: time and memory grow as O(T · S). The online softmax
reads the scores one block of keys at a time, keeping a running maximum and sum, so the whole
matrix never exists (:func:`online_softmax`, :func:`online_attention`); the fused kernels of
``F.scaled_dot_product_attention`` do the same on the GPU (:func:`compare_backends`).
:func:`power_law_fit` reads the exponent off measured times.

Letters: T length (queries), S length (keys), Dh d_head, Dv width of the values.
"""

from __future__ import annotations

import math
import time
import warnings
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor

from .i18n import error, say

__all__ = [
    "online_softmax",
    "online_attention",
    "power_law_fit",
    "FUSED_BACKENDS",
    "BackendRun",
    "run_backend",
    "compare_backends",
]


# --- the online softmax (FlashAttention's idea) -----------------------------------------


def _check_block(block_size: int) -> None:
    if not isinstance(block_size, int) or block_size <= 0:
        raise error(
            f"block_size debe ser un entero positivo, no {block_size!r}",
            f"block_size must be a positive integer, got {block_size!r}",
        )


def online_softmax(scores: Tensor, block_size: int = 16) -> Tensor:
    """Softmax over the last axis, reading the scores one block of columns at a time.

    A running maximum m and a running sum l = Σ exp(s − m) are updated block by block; when
    m grows, the sum so far is rescaled by exp(m_old − m_new). Equal to ``torch.softmax``.

    Shapes: scores (..., S) -> (..., S).
    """
    _check_block(block_size)
    m = torch.full(scores.shape[:-1] + (1,), float("-inf"), dtype=scores.dtype, device=scores.device)
    l = torch.zeros_like(m)
    for start in range(0, scores.size(-1), block_size):
        block = scores[..., start : start + block_size]  # (..., block)
        m_new = torch.maximum(m, block.amax(dim=-1, keepdim=True))
        l = l * torch.exp(m - m_new) + torch.exp(block - m_new).sum(dim=-1, keepdim=True)
        m = m_new
    return torch.exp(scores - m) / l


def online_attention(q: Tensor, k: Tensor, v: Tensor, block_size: int = 16) -> Tensor:
    """softmax(q kᵀ / √Dh) v without ever holding the (T, S) matrix: one block of keys at a time.

    Besides m and l, each query keeps its output so far, rescaled like l when m grows and
    divided by l at the end. Memory O(T · block) instead of O(T · S).

    Shapes: q (..., T, Dh), k (..., S, Dh), v (..., S, Dv) -> (..., T, Dv).
    """
    _check_block(block_size)
    scale = 1 / math.sqrt(q.size(-1))
    m = torch.full(q.shape[:-1] + (1,), float("-inf"), dtype=q.dtype, device=q.device)  # (..., T, 1)
    l = torch.zeros_like(m)  # (..., T, 1)
    out = torch.zeros(q.shape[:-1] + (v.size(-1),), dtype=q.dtype, device=q.device)  # (..., T, Dv)
    for start in range(0, k.size(-2), block_size):
        s = q @ k[..., start : start + block_size, :].transpose(-2, -1) * scale  # (..., T, block)
        m_new = torch.maximum(m, s.amax(dim=-1, keepdim=True))
        p = torch.exp(s - m_new)  # (..., T, block)
        correction = torch.exp(m - m_new)
        l = l * correction + p.sum(dim=-1, keepdim=True)
        out = out * correction + p @ v[..., start : start + block_size, :]
        m = m_new
    return out / l


# --- what attention costs ------------------------------------------------------------------


def power_law_fit(x, y) -> tuple[float, float]:
    """The exponent b and factor a of y ≈ a · x^b, by least squares on log y against log x.

    Shapes: x, y sequences of the same length (at least two positive values each).
    """
    lx = torch.log(torch.as_tensor(x, dtype=torch.float64))
    ly = torch.log(torch.as_tensor(y, dtype=torch.float64))
    if (
        lx.dim() != 1
        or lx.shape != ly.shape
        or lx.numel() < 2
        or not bool(torch.isfinite(lx).all() & torch.isfinite(ly).all())
    ):
        raise error(
            "hacen falta dos secuencias de la misma longitud, con al menos dos valores positivos",
            "two sequences of the same length are needed, with at least two positive values",
        )
    if float(lx.var()) == 0:
        raise error("x debe tener al menos dos valores distintos", "x must hold at least two different values")
    dx, dy = lx - lx.mean(), ly - ly.mean()
    b = float((dx * dy).sum() / (dx * dx).sum())
    return b, math.exp(float(ly.mean()) - b * float(lx.mean()))


# --- PyTorch's attention backends -----------------------------------------------------------

# The fused backends of ``F.scaled_dot_product_attention``, in the order they are tried. PyTorch
# has no FlashAttention kernel for GPUs older than Ampere (Colab's free T4, for one); there the
# memory-efficient backend, which also never holds the whole matrix, runs instead.
FUSED_BACKENDS = ("FLASH_ATTENTION", "EFFICIENT_ATTENTION")


@dataclass
class BackendRun:
    """One timed call of ``F.scaled_dot_product_attention`` restricted to one backend."""

    name: str  # the ``torch.nn.attention.SDPBackend`` name: MATH, FLASH_ATTENTION, ...
    output: Tensor
    ms: float  # wall-clock time of the call, after a warm-up call
    peak_mib: float | None  # memory the call added at its peak, in MiB (CUDA only; None elsewhere)


def run_backend(name: str, q: Tensor, k: Tensor, v: Tensor, is_causal: bool = True) -> BackendRun:
    """Time ``F.scaled_dot_product_attention(q, k, v)`` with only the backend ``name``.

    Raises PyTorch's ``RuntimeError`` when that backend cannot run these inputs (device,
    dtype, shapes).

    Shapes: q (B, H, T, Dh), k (B, H, S, Dh), v (B, H, S, Dv) -> output (B, H, T, Dv).
    """
    from torch.nn.attention import SDPBackend, sdpa_kernel

    cuda = q.device.type == "cuda"
    with sdpa_kernel(getattr(SDPBackend, name)):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # PyTorch explains every kernel it cannot use
            F.scaled_dot_product_attention(q, k, v, is_causal=is_causal)  # warm-up
        if cuda:
            torch.cuda.synchronize(q.device)
            torch.cuda.reset_peak_memory_stats(q.device)
            before = torch.cuda.memory_allocated(q.device)
        start = time.perf_counter()
        out = F.scaled_dot_product_attention(q, k, v, is_causal=is_causal)
        if cuda:
            torch.cuda.synchronize(q.device)
        ms = (time.perf_counter() - start) * 1000
    peak = (torch.cuda.max_memory_allocated(q.device) - before) / 2**20 if cuda else None
    return BackendRun(name, out, ms, peak)


def compare_backends(q: Tensor, k: Tensor, v: Tensor, is_causal: bool = True) -> tuple[BackendRun, BackendRun]:
    """The math backend (it builds the T × S matrix) and the first of :data:`FUSED_BACKENDS`
    that runs on these inputs, each timed on one call.

    Shapes: q (B, H, T, Dh), k (B, H, S, Dh), v (B, H, S, Dv).
    """
    math_run = run_backend("MATH", q, k, v, is_causal)
    for name in FUSED_BACKENDS:
        try:
            return math_run, run_backend(name, q, k, v, is_causal)
        except torch.cuda.OutOfMemoryError:
            raise
        except RuntimeError:
            continue  # this backend has no kernel for this device, dtype or shape: the next one
    tried, dtype = ", ".join(FUSED_BACKENDS), str(q.dtype).removeprefix("torch.")
    raise RuntimeError(
        say(
            f"ningún backend fusionado ({tried}) puede calcular esta atención en {q.device.type} con {dtype}",
            f"no fused backend ({tried}) can compute this attention on {q.device.type} with {dtype}",
        )
    )
