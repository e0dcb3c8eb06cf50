"""The key-value cache: what a decoder keeps between generation steps.

When a decoder generates token t + 1, the keys and values of positions 0 … t are the same
as one step earlier (a causal mask lets no position see what comes later). The cache keeps
them, so each step computes the projections of the new token only:

* self-attention: the cache **grows** by one position per step (``AttentionCache``);
* cross-attention (the encoder–decoder translator): the keys and values of the encoder's
  output are computed **once**, at the first step, and reused (``static=True``).

A growing cache concatenates (``torch.cat``) at every step; one made with a ``capacity``
allocates its tensors once and writes each step into them in place.

Memory: K and V of every layer, 2 · n_layers · B · S · Hkv · Dh numbers (:func:`cache_bytes`;
Hkv · Dh = d_model without grouped-query heads), which :meth:`KVCache.nbytes` counts on the
tensors actually held.

A :class:`KVCache` serves a whole decoder stack: one :class:`LayerCache` per layer, the
mask of the cached keys that are real tokens (not padding) and, per row, how many real
tokens it holds (the position of the next token, for left-padded prompts).

Letters: B batch, S cached length, T new tokens, H heads (Hkv key/value heads), Dh d_head,
C capacity.
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
        capacity: ``None``: each call concatenates the new keys and values to the old ones;
            an integer C: tensors of C positions are allocated at the first call and written
            in place (self-attention only).

    Shapes: k and v (B, S, H, Dh), or ``None`` while empty (with a capacity, views of the
    first S positions of (B, C, H, Dh) tensors).
    """

    def __init__(self, static: bool = False, capacity: int | None = None):
        if capacity is not None:
            _check_capacity(capacity, static)
        self.static, self.capacity = static, capacity
        self.k: Tensor | None = None
        self.v: Tensor | None = None
        self._k: Tensor | None = None  # (B, C, H, Dh) with a capacity
        self._v: Tensor | None = None

    @property
    def filled(self) -> bool:
        return self.k is not None

    def __len__(self) -> int:
        """Positions stored (S)."""
        return 0 if self.k is None else self.k.size(1)

    def update(self, k: Tensor, v: Tensor) -> tuple[Tensor, Tensor]:
        """Append the new keys and values; return all of them.

        Shapes: k, v (B, T, H, Dh) -> (B, S + T, H, Dh).
        """
        if self.capacity is not None:
            return self._write(k, v)
        if self.k is None or self.static:
            self.k, self.v = k, v
        else:
            self.k = torch.cat([self.k, k], dim=1)  # (B, S + T, H, Dh)
            self.v = torch.cat([self.v, v], dim=1)  # (B, S + T, H, Dh)
        return self.k, self.v

    def _write(self, k: Tensor, v: Tensor) -> tuple[Tensor, Tensor]:
        S, T = len(self), k.size(1)
        if self._k is None:
            self._k = k.new_empty(k.size(0), self.capacity, *k.shape[2:])  # (B, C, H, Dh)
            self._v = v.new_empty(v.size(0), self.capacity, *v.shape[2:])
        if S + T > self.capacity or k.shape[0] != self._k.shape[0] or k.shape[2:] != self._k.shape[2:]:
            raise error(
                f"la caché tiene sitio para {self.capacity} posiciones de {self._k.size(0)} filas y forma "
                f"{tuple(self._k.shape[2:])} cada una; no caben {S} + {T} de forma {tuple(k.shape)}",
                f"the cache has room for {self.capacity} positions of {self._k.size(0)} rows and shape "
                f"{tuple(self._k.shape[2:])} each; {S} + {T} of shape {tuple(k.shape)} do not fit",
            )
        self._k[:, S : S + T] = k  # in place: only the new positions are written
        self._v[:, S : S + T] = v
        self.k, self.v = self._k[:, : S + T], self._v[:, : S + T]  # (B, S + T, H, Dh) views
        return self.k, self.v

    def nbytes(self) -> int:
        """Bytes held by the keys and values (with a capacity, the whole allocated tensors)."""
        k, v = (self._k, self._v) if self._k is not None else (self.k, self.v)
        if k is None:
            return 0
        return k.numel() * k.element_size() + v.numel() * v.element_size()


def _check_capacity(capacity, static: bool = False) -> None:
    if static or isinstance(capacity, bool) or not isinstance(capacity, int) or capacity <= 0:
        raise error(
            f"capacity debe ser un entero positivo, y solo para la autoatención, no {capacity!r}",
            f"capacity must be a positive integer, and only for self-attention, got {capacity!r}",
        )


class LayerCache:
    """The caches of one decoder layer: self-attention and, for an encoder–decoder,
    cross-attention."""

    def __init__(self, cross: bool = False, capacity: int | None = None):
        self.self_attn = AttentionCache(capacity=capacity)
        self.cross_attn = AttentionCache(static=True) if cross else None

    def nbytes(self) -> int:
        return self.self_attn.nbytes() + (self.cross_attn.nbytes() if self.cross_attn else 0)


class KVCache:
    """The cache of a whole decoder stack, passed to the model's ``forward`` at every step.

    Args:
        n_layers: number of decoder layers.
        cross: also cache cross-attention (encoder–decoder models).
        capacity: ``None``: the tensors grow at every step (``torch.cat``); an integer C:
            allocated once for C positions and written in place.

    Attributes:
        layers: one :class:`LayerCache` per layer.
        key_mask: (B, S) boolean, True where the cached position is a real token.
        count: (B,) real tokens cached per row (the position of the row's next token).
    """

    def __init__(self, n_layers: int, cross: bool = False, capacity: int | None = None):
        if capacity is not None:
            _check_capacity(capacity)
        self.layers = [LayerCache(cross, capacity) for _ in range(n_layers)]
        self.capacity = capacity
        self.key_mask: Tensor | None = None
        self.count: Tensor | None = None
        self._mask: Tensor | None = None  # (B, C) with a capacity

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
            if self.capacity is not None:
                self._mask = real.new_zeros(B, self.capacity)  # (B, C)
        elif self.key_mask.size(0) != B:
            raise error(
                f"la caché tiene {self.key_mask.size(0)} filas, no un lote de {B}",
                f"the cache holds {self.key_mask.size(0)} rows, got a batch of {B}",
            )
        S = len(self) + T
        if self.capacity is not None and S > self.capacity:
            raise error(
                f"la caché tiene sitio para {self.capacity} posiciones; no caben {len(self)} + {T}",
                f"the cache has room for {self.capacity} positions; {len(self)} + {T} do not fit",
            )
        positions = (self.count[:, None] + real.long().cumsum(dim=1) - 1).clamp(min=0)  # (B, T)
        self.count = self.count + real.long().sum(dim=1)  # (B,)
        if self.capacity is None:
            self.key_mask = torch.cat([self.key_mask, real], dim=1)  # (B, S)
        else:
            self._mask[:, S - T : S] = real
            self.key_mask = self._mask[:, :S]  # (B, S) view
        causal = torch.ones(T, S, dtype=torch.bool, device=real.device).tril(diagonal=S - T)  # (T, S)
        return positions, causal[None, None] & self.key_mask[:, None, None, :]  # (B, 1, T, S)

    def nbytes(self) -> int:
        """Bytes of the keys and values stored in every layer."""
        return sum(layer.nbytes() for layer in self.layers)


def cache_bytes(n_layers: int, batch: int, length: int, d_model: int, bytes_per_number: int = 4) -> int:
    """Size of one attention kind's cache: K and V, per layer, per row, per position,
    d_model numbers each (the H heads of Dh numbers): 2 · n_layers · B · S · d_model · bytes.

    With grouped-query heads, ``d_model`` is the width of the cached keys, Hkv · Dh."""
    return 2 * n_layers * batch * length * d_model * bytes_per_number
