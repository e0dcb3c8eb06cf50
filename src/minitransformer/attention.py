"""Scaled dot-product attention, multi-head attention and the masks they use.

Mask convention (the only one in the package): a boolean tensor, ``True`` = may attend,
broadcastable to the scores' shape (B, H, T, S). A query row in which no key is allowed
gets all-zero weights (and zero output), never NaN, in the forward and the backward pass.

Letters: B batch, H heads, T query (target) length, S key (source) length,
D d_model, Dh d_head.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TYPE_CHECKING

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .i18n import error

if TYPE_CHECKING:
    from .kv_cache import AttentionCache

__all__ = [
    "scaled_dot_product_attention",
    "MultiHeadAttention",
    "padding_mask",
    "causal_mask",
    "combine_masks",
    "check_mask",
    "check_heads",
    "fast_attention",
    "attention_weights_needed",
]

# Whether MultiHeadAttention must compute and return its weights (see attention_weights_needed).
_WEIGHTS_NEEDED: ContextVar[bool] = ContextVar("attention_weights_needed", default=True)


@contextmanager
def attention_weights_needed(needed: bool) -> Iterator[None]:
    """Inside ``with attention_weights_needed(False):`` every :class:`MultiHeadAttention`
    returns ``None`` instead of its weights and computes its output with PyTorch's fused
    ``F.scaled_dot_product_attention`` (same result, faster, no (B, H, T, S) tensor kept).
    Outside such a block the weights are always computed and returned.
    """
    token = _WEIGHTS_NEEDED.set(bool(needed))
    try:
        yield
    finally:
        _WEIGHTS_NEEDED.reset(token)


def fast_attention(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    mask: Tensor | None = None,
    dropout_p: float = 0.0,
    scale: float | None = None,
) -> Tensor:
    """The output of attention from ``F.scaled_dot_product_attention``, with the course's masks.

    Same result as :func:`scaled_dot_product_attention` (or ``scale`` instead of 1/√Dh), without
    the weights. A query row with no allowed key gives zeros, not NaN, and no gradient flows
    through it: PyTorch's CPU kernels do so themselves (checked once, see
    :func:`_kernel_zeroes_empty_rows`); elsewhere such rows are let attend everywhere (finite
    numbers) and their output is then set to zero. With fewer key/value heads than query heads
    (grouped-query attention), query head h uses key/value head h // (H / Hkv).

    Shapes: q (B, H, T, Dh), k (B, Hkv, S, Dh), v (B, Hkv, S, Dv), mask boolean broadcastable
    to (B, H, T, S), True = may attend -> (B, H, T, Dv).
    """
    empty = None
    if mask is not None:
        check_mask(mask, torch.Size((*q.shape[:-1], k.size(-2))))
        if not (q.device.type == "cpu" and _kernel_zeroes_empty_rows()):
            empty = ~mask.any(dim=-1, keepdim=True)  # (..., T, 1): rows with no allowed key
            mask = mask | empty
    if k.size(-3) != q.size(-3):  # grouped-query: each key/value head serves H / Hkv query heads
        groups = q.size(-3) // k.size(-3)
        k, v = k.repeat_interleave(groups, dim=-3), v.repeat_interleave(groups, dim=-3)  # (B, H, S, ·)
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=dropout_p, scale=scale)  # (B, H, T, Dv)
    return out if empty is None else out.masked_fill(empty, 0.0)


@functools.cache
def _kernel_zeroes_empty_rows() -> bool:
    """Whether ``F.scaled_dot_product_attention`` on the CPU already gives a zero output and
    finite gradients for a query row with no allowed key (PyTorch 2.13 does; older releases
    may give NaN). Asked once, on a 1-query example."""
    with torch.inference_mode(False), torch.enable_grad():
        q = torch.ones(1, 1, 1, 2, requires_grad=True)
        kv = torch.ones(1, 1, 2, 2, requires_grad=True)
        out = F.scaled_dot_product_attention(q, kv, kv, attn_mask=torch.zeros(1, 1, 1, 2, dtype=torch.bool))
        out.sum().backward()
    return bool((out == 0).all() and q.grad.isfinite().all() and kv.grad.isfinite().all())


def check_heads(d_model: int, n_heads: int) -> None:
    """Raise ``ValueError`` unless ``d_model`` and ``n_heads`` are positive and each head gets
    d_model / n_heads dimensions."""
    if n_heads <= 0 or d_model <= 0:
        raise error(
            f"d_model y n_heads deben ser positivos, no {d_model} y {n_heads}",
            f"d_model and n_heads must be positive, got {d_model} and {n_heads}",
        )
    if d_model % n_heads != 0:
        raise error(
            f"d_model ({d_model}) debe ser divisible por n_heads ({n_heads}): "
            f"cada cabeza recibe d_model / n_heads dimensiones",
            f"d_model ({d_model}) must be divisible by n_heads ({n_heads}): "
            f"each head gets d_model / n_heads dimensions",
        )


def check_mask(mask: Tensor, scores_shape: torch.Size) -> None:
    """Raise ``ValueError`` unless ``mask`` is boolean and broadcasts to ``scores_shape``.

    A mask must be 2-D (T, S) or have as many dimensions as the scores: a (B, 1, S) mask
    for (B, H, T, S) scores is refused, because it would silently broadcast B against H.
    """
    if mask.dtype != torch.bool:
        raise error(
            f"la máscara debe ser booleana (True = puede atender), no de dtype {mask.dtype}",
            f"mask must be boolean (True = may attend), got dtype {mask.dtype}",
        )
    if mask.dim() not in (2, len(scores_shape)):
        raise error(
            f"la máscara de forma {tuple(mask.shape)} tiene {mask.dim()} dimensiones; las puntuaciones "
            f"tienen forma {tuple(scores_shape)}: dale a la máscara 2 dimensiones (T, S) o "
            f"{len(scores_shape)} (p. ej. (B, 1, 1, S) para el relleno, (1, 1, T, S) para la causal)",
            f"mask of shape {tuple(mask.shape)} has {mask.dim()} dimensions; scores have shape "
            f"{tuple(scores_shape)}: give the mask 2 dimensions (T, S) or {len(scores_shape)} "
            f"(e.g. (B, 1, 1, S) for padding, (1, 1, T, S) for causal)",
        )
    # Broadcasts to the scores' shape iff every dimension is 1 or the scores' own (torch's
    # broadcast_shapes would say the same, more slowly: this runs once per attention call).
    if any(m not in (1, s) for m, s in zip(mask.shape[::-1], scores_shape[::-1])):
        raise error(
            f"la máscara de forma {tuple(mask.shape)} no se difunde (broadcast) a la forma de las "
            f"puntuaciones {tuple(scores_shape)}",
            f"mask of shape {tuple(mask.shape)} does not broadcast to the scores' shape {tuple(scores_shape)}",
        )


def scaled_dot_product_attention(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    mask: Tensor | None = None,
    dropout: Callable[[Tensor], Tensor] | None = None,
) -> tuple[Tensor, Tensor]:
    """softmax(q kᵀ / √d_k) v, with an optional boolean mask.

    Args:
        q: queries, shape (..., T, Dh); with heads (B, H, T, Dh).
        k: keys, shape (..., S, Dh).
        v: values, shape (..., S, Dv).
        mask: boolean, True = may attend, broadcastable to (..., T, S).
        dropout: applied to the weights before they mix the values (e.g. an ``nn.Dropout``).

    Returns:
        ``(output, weights)`` with shapes (..., T, Dv) and (..., T, S); the weights are
        those before dropout.
    """
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))  # (..., T, S)
    weights = masked_softmax(scores, mask)
    mixed = weights if dropout is None else dropout(weights)
    return mixed @ v, weights


def masked_softmax(scores: Tensor, mask: Tensor | None) -> Tensor:
    """Softmax over the last axis, where masked scores are -inf and empty rows give zeros."""
    if mask is None:
        return torch.softmax(scores, dim=-1)
    check_mask(mask, scores.shape)
    empty = ~mask.any(dim=-1, keepdim=True)  # rows with no allowed key
    # softmax of a row of -inf is 0/0: give empty rows finite scores, then zero their weights
    # (no data-dependent branch, so it also runs on the "meta" device and under tracing).
    scores = scores.masked_fill(~mask, float("-inf")).masked_fill(empty, 0.0)
    return torch.softmax(scores, dim=-1).masked_fill(empty, 0.0)


class MultiHeadAttention(nn.Module):
    """Multi-head attention, as in "Attention Is All You Need": the inputs projected into H
    heads, :func:`scaled_dot_product_attention` in every head at once, the heads concatenated
    and projected back.

    Args:
        d_model: model width D; must be divisible by ``n_heads``.
        n_heads: number of heads H; each head has width Dh = D / H.
        dropout: dropout on the attention weights.
        bias: whether the four projections have a bias.
    """

    def __init__(self, d_model: int, n_heads: int, dropout: float = 0.0, bias: bool = True):
        super().__init__()
        check_heads(d_model, n_heads)
        self.d_model = d_model
        self.n_heads = n_heads
        self.d_head = d_model // n_heads
        self.W_q = nn.Linear(d_model, d_model, bias=bias)
        self.W_k = nn.Linear(d_model, d_model, bias=bias)
        self.W_v = nn.Linear(d_model, d_model, bias=bias)
        self.W_o = nn.Linear(d_model, d_model, bias=bias)
        self.dropout = nn.Dropout(dropout)

    def forward(
        self,
        query: Tensor,
        key: Tensor,
        value: Tensor,
        mask: Tensor | None = None,
        cache: AttentionCache | None = None,
    ) -> tuple[Tensor, Tensor]:
        """Attend from ``query`` to ``key``/``value``.

        Shapes:
            query: (B, T, D); key and value: (B, S, D);
            mask: boolean, True = may attend, broadcastable to (B, H, T, S).
            cache: optional :class:`~minitransformer.kv_cache.AttentionCache`; the keys and
                values attended to are then the cached ones followed by the new ones
                (S grows), or, for a filled static cache, the cached ones only.

        Returns:
            ``(output, weights)``: (B, T, D) and the per-head weights (B, H, T, S), or
            ``None`` for the weights inside ``with attention_weights_needed(False):``.
        """
        B, T, D = query.shape
        if D != self.d_model or key.size(-1) != D or value.size(-1) != D:
            raise error(
                f"se esperaban entradas con última dimensión d_model={self.d_model}, pero query es "
                f"{tuple(query.shape)}, key {tuple(key.shape)} y value {tuple(value.shape)}",
                f"expected inputs with last dimension d_model={self.d_model}, got query "
                f"{tuple(query.shape)}, key {tuple(key.shape)}, value {tuple(value.shape)}",
            )
        q, k, v = self._project(query, key, value, cache)  # (B, H, T, Dh), (B, H, S, Dh), (B, H, S, Dh)
        if _WEIGHTS_NEEDED.get():
            heads, weights = scaled_dot_product_attention(q, k, v, mask, self.dropout)  # (B, H, T, Dh), (B, H, T, S)
        else:  # nobody looks at the weights: PyTorch's fused kernel, the same output
            heads, weights = fast_attention(q, k, v, mask, self.dropout.p if self.training else 0.0), None
        return self.W_o(heads.transpose(1, 2).reshape(B, T, D)), weights  # (B, T, D)

    def _project(
        self, query: Tensor, key: Tensor, value: Tensor, cache: AttentionCache | None
    ) -> tuple[Tensor, Tensor, Tensor]:
        """Queries, keys and values split into heads, (B, H, ·, Dh), through the cache if any."""
        if cache is not None and cache.static and cache.filled:  # cross-attention: keys and values
            return self._heads(self.W_q(query)), cache.k.transpose(1, 2), cache.v.transpose(1, 2)  # of the first step
        q, k, v = self.W_q(query), self.W_k(key), self.W_v(value)  # (B, ·, D) each
        if cache is not None:
            k, v = cache.update(self._split(k), self._split(v))  # (B, S_cached + S, H, Dh)
            return self._heads(q), k.transpose(1, 2), v.transpose(1, 2)
        return self._heads(q), self._heads(k), self._heads(v)

    def _split(self, x: Tensor) -> Tensor:
        """(B, L, D) -> (B, L, H, Dh)."""
        return x.unflatten(-1, (self.n_heads, self.d_head))

    def _heads(self, x: Tensor) -> Tensor:
        """(B, L, D) -> (B, H, L, Dh)."""
        return self._split(x).transpose(1, 2)


def padding_mask(tokens: Tensor, pad_id: int) -> Tensor:
    """Keys that are real tokens, not padding.

    Shapes: tokens (B, S) -> mask (B, 1, 1, S), True = may attend.
    """
    return (tokens != pad_id)[:, None, None, :]  # (B, 1, 1, S)


def causal_mask(size: int, device: torch.device | str | None = None) -> Tensor:
    """Each position may attend to itself and to earlier positions.

    Shapes: -> (1, 1, T, T), True on and below the diagonal.
    """
    return torch.ones(size, size, dtype=torch.bool, device=device).tril()[None, None]  # (1, 1, T, T)


def combine_masks(*masks: Tensor | None) -> Tensor | None:
    """Logical AND of boolean masks (``None`` entries are skipped), with broadcasting."""
    result = None
    for m in masks:
        if m is None:
            continue
        result = m if result is None else result & m
    return result
