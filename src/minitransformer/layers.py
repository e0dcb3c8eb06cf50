"""The blocks the encoder and decoder are stacked from.

Post-LN (the paper): x = LayerNorm(x + Dropout(Sublayer(x))).
Pre-LN (``norm_first=True``): x = x + Dropout(Sublayer(LayerNorm(x))).

Letters: B batch, T target length, S source length, D d_model, H heads.
"""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING

from torch import Tensor, nn

from .attention import MultiHeadAttention
from .i18n import error

if TYPE_CHECKING:
    from .kv_cache import AttentionCache, LayerCache

__all__ = ["FeedForward", "EncoderLayer", "DecoderLayer", "make_activation"]

_ACTIVATIONS = {"relu": nn.ReLU, "gelu": nn.GELU, "gelu_tanh": partial(nn.GELU, approximate="tanh")}


def make_activation(name: str) -> nn.Module:
    """``"relu"`` (the paper), ``"gelu"`` (BERT) or ``"gelu_tanh"`` (GPT-2's tanh approximation)."""
    if name not in _ACTIVATIONS:
        raise error(
            f"activation debe ser una de {sorted(_ACTIVATIONS)}, no {name!r}",
            f"activation must be one of {sorted(_ACTIVATIONS)}, got {name!r}",
        )
    return _ACTIVATIONS[name]()


class FeedForward(nn.Module):
    """Position-wise feed-forward network: W_2 · act(W_1 x + b_1) + b_2.

    Shapes: x (B, T, D) -> (B, T, D).
    """

    def __init__(self, d_model: int, d_ff: int, dropout: float = 0.0, activation: str = "relu", bias: bool = True):
        super().__init__()
        self.W_1 = nn.Linear(d_model, d_ff, bias=bias)
        self.W_2 = nn.Linear(d_ff, d_model, bias=bias)
        self.activation = make_activation(activation)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: Tensor) -> Tensor:
        return self.W_2(self.dropout(self.activation(self.W_1(x))))  # (B, T, D)


class EncoderLayer(nn.Module):
    """Self-attention and feed-forward, each with a residual connection and LayerNorm.

    Args:
        d_model, n_heads, d_ff: widths as in the paper.
        dropout: on the attention weights, inside the feed-forward and on each sublayer output.
        norm_first: False for post-LN (the paper), True for pre-LN.
        activation: ``"relu"`` or ``"gelu"``.
        layer_norm_eps: epsilon of both LayerNorms.
    """

    def __init__(
        self,
        d_model: int,
        n_heads: int,
        d_ff: int,
        dropout: float = 0.1,
        norm_first: bool = False,
        activation: str = "relu",
        layer_norm_eps: float = 1e-5,
    ):
        super().__init__()
        self.norm_first = norm_first
        self.self_attn = MultiHeadAttention(d_model, n_heads, dropout)
        self.feed_forward = FeedForward(d_model, d_ff, dropout, activation)
        self.norm1 = nn.LayerNorm(d_model, eps=layer_norm_eps)
        self.norm2 = nn.LayerNorm(d_model, eps=layer_norm_eps)
        self.dropout1 = nn.Dropout(dropout)
        self.dropout2 = nn.Dropout(dropout)

    def forward(
        self, x: Tensor, mask: Tensor | None = None, cache: AttentionCache | None = None
    ) -> tuple[Tensor, Tensor]:
        """Shapes: x (B, S, D), mask broadcastable to (B, H, S, S).

        With a causal mask this is a decoder-only (GPT) block; ``cache`` (its self-attention
        :class:`~minitransformer.kv_cache.AttentionCache`) then lets x hold only the new
        positions, and the mask is (B, H, S_new, S_cached + S_new).

        Returns ``(x, weights)``: (B, S, D) and the self-attention weights (B, H, S, S).
        """
        if self.norm_first:
            h = self.norm1(x)
            a, weights = self.self_attn(h, h, h, mask, cache=cache)
            x = x + self.dropout1(a)
            x = x + self.dropout2(self.feed_forward(self.norm2(x)))
        else:
            a, weights = self.self_attn(x, x, x, mask, cache=cache)
            x = self.norm1(x + self.dropout1(a))
            x = self.norm2(x + self.dropout2(self.feed_forward(x)))
        return x, weights


class DecoderLayer(nn.Module):
    """Masked self-attention, cross-attention over the encoder output, feed-forward.

    Arguments as for :class:`EncoderLayer`.
    """

    def __init__(
        self,
        d_model: int,
        n_heads: int,
        d_ff: int,
        dropout: float = 0.1,
        norm_first: bool = False,
        activation: str = "relu",
        layer_norm_eps: float = 1e-5,
    ):
        super().__init__()
        self.norm_first = norm_first
        self.self_attn = MultiHeadAttention(d_model, n_heads, dropout)
        self.cross_attn = MultiHeadAttention(d_model, n_heads, dropout)
        self.feed_forward = FeedForward(d_model, d_ff, dropout, activation)
        self.norm1 = nn.LayerNorm(d_model, eps=layer_norm_eps)
        self.norm2 = nn.LayerNorm(d_model, eps=layer_norm_eps)
        self.norm3 = nn.LayerNorm(d_model, eps=layer_norm_eps)
        self.dropout1 = nn.Dropout(dropout)
        self.dropout2 = nn.Dropout(dropout)
        self.dropout3 = nn.Dropout(dropout)

    def forward(
        self,
        x: Tensor,
        memory: Tensor,
        tgt_mask: Tensor | None = None,
        memory_mask: Tensor | None = None,
        cache: LayerCache | None = None,
    ) -> tuple[Tensor, Tensor, Tensor]:
        """Shapes: x (B, T, D), memory (B, S, D), tgt_mask broadcastable to (B, H, T, T),
        memory_mask broadcastable to (B, H, T, S).

        ``cache`` (a :class:`~minitransformer.kv_cache.LayerCache` with cross-attention):
        x holds only the new positions, tgt_mask is (B, H, T_new, T_cached + T_new), and the
        keys and values of ``memory`` are computed at the first call only.

        Returns ``(x, self_weights, cross_weights)``: (B, T, D), (B, H, T, T), (B, H, T, S).
        """
        self_cache = cache.self_attn if cache is not None else None
        cross_cache = cache.cross_attn if cache is not None else None
        if self.norm_first:
            h = self.norm1(x)
            a, self_weights = self.self_attn(h, h, h, tgt_mask, cache=self_cache)
            x = x + self.dropout1(a)
            a, cross_weights = self.cross_attn(self.norm2(x), memory, memory, memory_mask, cache=cross_cache)
            x = x + self.dropout2(a)
            x = x + self.dropout3(self.feed_forward(self.norm3(x)))
        else:
            a, self_weights = self.self_attn(x, x, x, tgt_mask, cache=self_cache)
            x = self.norm1(x + self.dropout1(a))
            a, cross_weights = self.cross_attn(x, memory, memory, memory_mask, cache=cross_cache)
            x = self.norm2(x + self.dropout2(a))
            x = self.norm3(x + self.dropout3(self.feed_forward(x)))
        return x, self_weights, cross_weights
