"""The decoder-only Transformer (GPT): configuration and model.

A GPT is the decoder of "Attention Is All You Need" without cross-attention: each block is
masked self-attention and a feed-forward network — the same sublayers as
:class:`~minitransformer.layers.EncoderLayer`, run with a causal mask. GPT-2 puts the
LayerNorm first (pre-LN), uses learned positions, GELU (tanh approximation), a final
LayerNorm and an output projection tied to the token embedding.

Stable API (notebooks 09 and 10 build on it):

* :class:`GPTConfig` — frozen dataclass; the defaults are GPT-2 small (124 M parameters).
* :class:`GPT` — ``GPT(config)``; ``model(tokens, cache=None)`` -> logits (B, T, V);
  ``model.new_cache()``; ``model.num_parameters()``.

Around it, each in its own module: generation (:func:`~minitransformer.generation.generate`),
training (:func:`~minitransformer.train.train_gpt`), GPT-2's weights
(:func:`~minitransformer.hf_import.from_gpt2`) and notebook 09's counting model
(:mod:`~minitransformer.course.counting`).

Padding: with ``config.pad_id`` set, padding tokens are never attended to, and positions
count only the real tokens of a row, so a left-padded prompt gives the same logits as the
unpadded one.

Letters: B batch, T length, D d_model, H heads, V vocabulary.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from .attention import attention_weights_needed, causal_mask, check_heads, combine_masks
from .i18n import error
from .kv_cache import KVCache
from .layers import EncoderLayer
from .model import check_tokens

__all__ = ["GPTConfig", "GPT"]


@dataclass(frozen=True)
class GPTConfig:
    """Everything that defines a decoder-only model. The defaults are GPT-2 small."""

    vocab_size: int = 50257  # tokens V
    max_len: int = 1024  # context length: the longest sequence (GPT-2's n_positions)
    d_model: int = 768  # width of every token vector
    n_heads: int = 12  # attention heads; d_head = d_model / n_heads
    n_layers: int = 12  # blocks N
    d_ff: int = 3072  # hidden width of the feed-forward network (4 · d_model in GPT-2)
    dropout: float = 0.1  # on embeddings, attention weights and sublayer outputs
    activation: str = "gelu_tanh"  # GPT-2's GELU (tanh approximation); "gelu" or "relu"
    layer_norm_eps: float = 1e-5
    pad_id: int | None = None  # padding id, never attended to (GPT-2 has none)
    tie_output: bool = True  # the output projection is the token embedding (as in GPT-2)

    def __post_init__(self):
        for name in ("vocab_size", "max_len", "d_model", "n_heads", "n_layers", "d_ff"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise error(
                    f"{name} debe ser un entero positivo, no {value!r}",
                    f"{name} must be a positive integer, got {value!r}",
                )
        check_heads(self.d_model, self.n_heads)
        if self.pad_id is not None and not 0 <= self.pad_id < self.vocab_size:
            raise error(
                f"pad_id {self.pad_id} está fuera del vocabulario [0, {self.vocab_size})",
                f"pad_id {self.pad_id} is outside the vocabulary [0, {self.vocab_size})",
            )

    @property
    def d_head(self) -> int:
        return self.d_model // self.n_heads


class GPT(nn.Module):
    """A decoder-only Transformer with GPT-2's architecture.

    Shapes: tokens (B, T) -> logits (B, T, V).
    """

    def __init__(self, config: GPTConfig):
        super().__init__()
        self.config = config
        self.token = nn.Embedding(config.vocab_size, config.d_model)
        self.position = nn.Embedding(config.max_len, config.d_model)
        self.dropout = nn.Dropout(config.dropout)
        self.layers = nn.ModuleList(
            EncoderLayer(
                config.d_model,
                config.n_heads,
                config.d_ff,
                config.dropout,
                norm_first=True,
                activation=config.activation,
                layer_norm_eps=config.layer_norm_eps,
            )
            for _ in range(config.n_layers)
        )
        self.norm = nn.LayerNorm(config.d_model, eps=config.layer_norm_eps)
        self.lm_head = nn.Linear(config.d_model, config.vocab_size, bias=False)
        if config.tie_output:
            self.lm_head.weight = self.token.weight
        self._init_weights()

    def _init_weights(self) -> None:
        # GPT-2's initialisation: N(0, 0.02), zero biases, and the projections that write
        # into the residual stream scaled by 1/√(2N) (two per block).
        for name, p in self.named_parameters():
            if p.dim() > 1:
                std = (
                    0.02 / math.sqrt(2 * self.config.n_layers) if name.endswith(("W_o.weight", "W_2.weight")) else 0.02
                )
                nn.init.normal_(p, mean=0.0, std=std)
            elif name.endswith("bias"):
                nn.init.zeros_(p)

    def new_cache(self, capacity: int | None = None) -> KVCache:
        """An empty key-value cache for :meth:`forward`; with ``capacity``, allocated once for
        that many positions and written in place."""
        return KVCache(self.config.n_layers, capacity=capacity)

    def forward(self, tokens: Tensor, cache: KVCache | None = None, return_attention: bool = False):
        """Next-token logits at every position.

        Args:
            tokens: (B, T) ids; with ``cache``, only the tokens after the cached ones.
            cache: a :class:`~minitransformer.kv_cache.KVCache` from :meth:`new_cache`,
                updated in place.
            return_attention: also return one (B, H, T, S) attention map per layer.

        Returns:
            logits (B, T, V) (and the list of maps).
        """
        check_tokens(
            tokens, self.config.vocab_size, max_len=self.config.max_len, cached=len(cache) if cache is not None else 0
        )
        B, T = tokens.shape
        real = (
            tokens != self.config.pad_id
            if self.config.pad_id is not None
            else torch.ones_like(tokens, dtype=torch.bool)
        )
        if cache is not None:
            positions, mask = cache.extend(real)  # (B, T), (B, 1, T, S)
        else:
            positions = (real.long().cumsum(dim=1) - 1).clamp(min=0)  # (B, T) padding does not count
            mask = combine_masks(real[:, None, None, :], causal_mask(T, device=tokens.device))  # (B, 1, T, T)
        x = self.dropout(self.token(tokens) + self.position(positions))  # (B, T, D)
        maps = []
        with attention_weights_needed(return_attention):  # no maps asked: the fused kernel
            for i, layer in enumerate(self.layers):
                x, w = layer(x, mask, cache=cache.layers[i].self_attn if cache is not None else None)
                maps.append(w)
        logits = self.lm_head(self.norm(x))  # (B, T, V)
        return (logits, maps) if return_attention else logits

    def num_parameters(self) -> int:
        """Number of distinct trainable parameters (the tied embedding counted once)."""
        return sum(p.numel() for p in self.parameters() if p.requires_grad)
