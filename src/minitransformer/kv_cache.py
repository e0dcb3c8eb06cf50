"""The key-value cache: what a decoder keeps between generation steps.

When a decoder generates token t + 1, the keys and values of positions 0 … t are the same
as one step earlier (a causal mask lets no position see what comes later). The cache keeps
them, so each step computes the projections of the new token only:

* self-attention: the cache **grows** by one position per step (``AttentionCache``);
* cross-attention (the encoder–decoder translator): the keys and values of the encoder's
  output are computed **once**, at the first step, and reused (``static=True``).

Memory: K and V of every layer, 2 · n_layers · B · S · d_model numbers
(:func:`cache_bytes`), which :meth:`KVCache.nbytes` counts on the tensors actually stored.

A :class:`KVCache` serves a whole decoder stack: one :class:`LayerCache` per layer, the
mask of the cached keys that are real tokens (not padding) and, per row, how many real
tokens it holds (the position of the next token, for left-padded prompts).

Letters: B batch, S cached length, T new tokens, H heads, Dh d_head.
"""

from __future__ import annotations

import torch
from torch import Tensor

from .i18n import error

__all__ = ["AttentionCache", "LayerCache", "KVCache", "cache_bytes"]


class AttentionCache:
    """Keys and values one attention module has computed so far.

    Args:
        static: ``False`` for self-attention (the cache grows with every call);
            ``True`` for cross-attention (filled at the first call, then read only).

    Shapes: k and v (B, S, H, Dh), or ``None`` while empty.
    """

    def __init__(self, static: bool = False):
        self.static = static
        self.k: Tensor | None = None
        self.v: Tensor | None = None

    @property
    def filled(self) -> bool:
        return self.k is not None

    def update(self, k: Tensor, v: Tensor) -> tuple[Tensor, Tensor]:
        """Append the new keys and values; return all of them.

        Shapes: k, v (B, T, H, Dh) -> (B, S + T, H, Dh).
        """
        if self.k is None or self.static:
            self.k, self.v = k, v
        else:
            self.k = torch.cat([self.k, k], dim=1)  # (B, S + T, H, Dh)
            self.v = torch.cat([self.v, v], dim=1)  # (B, S + T, H, Dh)
        return self.k, self.v

    def nbytes(self) -> int:
        """Bytes held by the stored keys and values."""
        if self.k is None:
            return 0
        return self.k.numel() * self.k.element_size() + self.v.numel() * self.v.element_size()


class LayerCache:
    """The caches of one decoder layer: self-attention and, for an encoder–decoder,
    cross-attention."""

    def __init__(self, cross: bool = False):
        self.self_attn = AttentionCache()
        self.cross_attn = AttentionCache(static=True) if cross else None

    def nbytes(self) -> int:
        return self.self_attn.nbytes() + (self.cross_attn.nbytes() if self.cross_attn else 0)


class KVCache:
    """The cache of a whole decoder stack, passed to the model's ``forward`` at every step.

    Args:
        n_layers: number of decoder layers.
        cross: also cache cross-attention (encoder–decoder models).

    Attributes:
        layers: one :class:`LayerCache` per layer.
        key_mask: (B, S) boolean, True where the cached position is a real token.
        count: (B,) real tokens cached per row (the position of the row's next token).
    """

    def __init__(self, n_layers: int, cross: bool = False):
        self.layers = [LayerCache(cross) for _ in range(n_layers)]
        self.key_mask: Tensor | None = None
        self.count: Tensor | None = None

    def __len__(self) -> int:
        """Positions cached so far (S)."""
        return 0 if self.key_mask is None else self.key_mask.size(1)

    def extend(self, real: Tensor) -> tuple[Tensor, Tensor]:
        """Register T new tokens; return their positions and their attention mask.

        Args:
            real: (B, T) boolean, True for real tokens, False for padding.

        Returns:
            ``(positions, mask)``: (B, T) positions (a row's padding does not count), and
            (B, 1, T, S + T) boolean, True = may attend (causal, padding keys excluded).
        """
        B, T = real.shape
        if self.key_mask is None:
            self.key_mask = real[:, :0]
            self.count = torch.zeros(B, dtype=torch.long, device=real.device)
        elif self.key_mask.size(0) != B:
            raise error(
                f"la caché tiene {self.key_mask.size(0)} filas, no un lote de {B}",
                f"the cache holds {self.key_mask.size(0)} rows, got a batch of {B}",
            )
        positions = (self.count[:, None] + real.long().cumsum(dim=1) - 1).clamp(min=0)  # (B, T)
        self.count = self.count + real.long().sum(dim=1)  # (B,)
        self.key_mask = torch.cat([self.key_mask, real], dim=1)  # (B, S + T)
        S = self.key_mask.size(1)
        causal = torch.ones(T, S, dtype=torch.bool, device=real.device).tril(diagonal=S - T)  # (T, S)
        return positions, causal[None, None] & self.key_mask[:, None, None, :]  # (B, 1, T, S)

    def nbytes(self) -> int:
        """Bytes of the keys and values stored in every layer."""
        return sum(layer.nbytes() for layer in self.layers)


def cache_bytes(n_layers: int, batch: int, length: int, d_model: int, bytes_per_number: int = 4) -> int:
    """Size of one attention kind's cache: K and V, per layer, per row, per position,
    d_model numbers each (the H heads of Dh numbers): 2 · n_layers · B · S · d_model · bytes."""
    return 2 * n_layers * batch * length * d_model * bytes_per_number
