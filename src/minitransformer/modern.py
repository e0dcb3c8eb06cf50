"""The modern decoder-only Transformer (the LLaMA recipe).

What today's open models change with respect to the 2017 paper, one piece at a time:
rotary position embeddings (RoPE) on queries and keys instead of a vector added to the
embeddings, RMSNorm instead of LayerNorm, a SwiGLU feed-forward network, pre-norm, no
biases, and grouped-query attention (several query heads share one key/value head).
:func:`~minitransformer.hf_import.from_llama` copies the weights of ``transformers``'
``LlamaForCausalLM`` into a :class:`ModernTransformer`. Every choice is a switch of
:class:`ModernConfig`, so an ablation can change one at a time. The model generates with
:func:`~minitransformer.generation.generate` and the key-value cache, as GPT does
(``new_cache()``, ``forward(tokens, cache=...)``). What attention costs (the online softmax,
PyTorch's fused backends, the power-law fit) is :mod:`~minitransformer.attention_cost`.

Letters: B batch, T length (queries), S length (keys), D d_model, H query heads,
Hkv key/value heads, G = H / Hkv query heads per key/value head, Dh d_head, V vocabulary.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .attention import causal_mask, check_heads, combine_masks, fast_attention, masked_softmax
from .i18n import error
from .kv_cache import AttentionCache, KVCache, cache_bytes
from .layers import FeedForward
from .model import check_tokens
from .positional import sinusoidal_encoding

__all__ = [
    "rope_frequencies",
    "rope_cos_sin",
    "apply_rope",
    "ROPE_LAYOUTS",
    "rope_pair_order",
    "permute_rope_rows",
    "RotaryEmbedding",
    "RMSNorm",
    "SwiGLU",
    "GroupedQueryAttention",
    "ModernConfig",
    "ModernBlock",
    "ModernTransformer",
    "with_rope_layout",
]


# --- RoPE ---------------------------------------------------------------------------------


def rope_frequencies(d_head: int, base: float = 10000.0) -> Tensor:
    """The angle per position of each pair of dimensions: ω_i = base^(−2i / d_head).

    The same frequencies as the sinusoidal encoding's (with d_head for d_model). Shape (Dh/2,).
    """
    if d_head <= 0 or d_head % 2 != 0:
        raise error(
            f"d_head debe ser par y positivo para RoPE, no {d_head}",
            f"d_head must be even and positive for RoPE, got {d_head}",
        )
    if base <= 1:
        raise error(
            f"la base de RoPE debe ser mayor que 1, no {base}", f"the RoPE base must be greater than 1, got {base}"
        )
    return 1.0 / (base ** (torch.arange(0, d_head, 2, dtype=torch.float32) / d_head))  # (Dh/2,)


def rope_cos_sin(positions: Tensor, d_head: int, base: float = 10000.0) -> tuple[Tensor, Tensor]:
    """cos and sin of the angles p · ω_i. Shapes: positions (T,) -> two (T, Dh/2) tensors."""
    angles = positions.to(torch.float32)[:, None] * rope_frequencies(d_head, base).to(positions.device)  # (T, Dh/2)
    return angles.cos(), angles.sin()


def apply_rope(x: Tensor, cos: Tensor, sin: Tensor, interleaved: bool = False) -> Tensor:
    """Rotate each pair of dimensions of ``x`` at position p by the angle p · ω_i.

    Pair i is (x_i, x_{i + Dh/2}) by default (the "halves" layout, Hugging Face's) or
    (x_{2i}, x_{2i+1}) with ``interleaved=True`` (the RoPE paper's and Meta's reference code).

    Shapes: x (..., T, Dh); cos, sin (T, Dh/2), or with leading axes that broadcast against
    x's (one position per row: (B, 1, T, Dh/2) for x (B, H, T, Dh)) -> (..., T, Dh).
    """
    fits = x.size(-1) == 2 * cos.size(-1) and x.size(-2) == cos.size(-2) and cos.shape == sin.shape
    if fits and cos.dim() > 2:
        try:
            fits = torch.broadcast_shapes(x.shape[:-1], cos.shape[:-1]) == x.shape[:-1]
        except RuntimeError:
            fits = False
    if not fits:
        raise error(
            f"x de forma {tuple(x.shape)} no casa con cos/sin de forma {tuple(cos.shape)}: "
            "hacen falta (..., T, Dh) y (T, Dh/2)",
            f"x of shape {tuple(x.shape)} does not fit cos/sin of shape {tuple(cos.shape)}: "
            "they must be (..., T, Dh) and (T, Dh/2)",
        )
    cos, sin = cos.to(x.dtype), sin.to(x.dtype)
    if interleaved:
        even, odd = x[..., 0::2], x[..., 1::2]  # (..., T, Dh/2) each
        return torch.stack([even * cos - odd * sin, even * sin + odd * cos], dim=-1).flatten(-2)  # (..., T, Dh)
    first, second = x.chunk(2, dim=-1)  # (..., T, Dh/2) each
    return torch.cat([first * cos - second * sin, first * sin + second * cos], dim=-1)  # (..., T, Dh)


# The two ways of pairing a head's dimensions. They are the same rotation with the dimensions
# in another order, so one model can use either once its W_q and W_k rows are permuted.
ROPE_LAYOUTS = ("halves", "interleaved")


def _check_layout(layout: str) -> None:
    if layout not in ROPE_LAYOUTS:
        raise error(
            f"la disposición de RoPE debe ser una de {ROPE_LAYOUTS}, no {layout!r}",
            f"the RoPE layout must be one of {ROPE_LAYOUTS}, got {layout!r}",
        )


def rope_pair_order(d_head: int) -> Tensor:
    """The order of a head's dimensions that takes the interleaved layout to halves.

    ``x[..., order]`` puts the even dimensions first and the odd ones after, (0, 2, 4, …, 1, 3,
    5, …): the pair (2i, 2i+1) lands on (i, i + Dh/2). Shape (Dh,).
    """
    if d_head <= 0 or d_head % 2 != 0:
        raise error(
            f"d_head debe ser par y positivo para RoPE, no {d_head}",
            f"d_head must be even and positive for RoPE, got {d_head}",
        )
    return torch.cat([torch.arange(0, d_head, 2), torch.arange(1, d_head, 2)])  # (Dh,)


def permute_rope_rows(weight: Tensor, d_head: int, to: str = "halves") -> Tensor:
    """The rows of a query or key projection reordered within each head for RoPE in layout ``to``.

    RoPE in layout ``to`` on the permuted rows gives the same attention scores as the other
    layout on the rows as they were (the order of a head's dimensions does not change a dot
    product). ``to="halves"`` is the reordering Hugging Face's conversion applies to Meta's
    LLaMA weights; ``to="interleaved"`` undoes it.

    Shapes: weight (H · Dh, D) or a bias (H · Dh,) -> the same.
    """
    _check_layout(to)
    order = rope_pair_order(d_head)
    if to == "interleaved":
        order = torch.argsort(order)
    if weight.size(0) % d_head != 0:
        raise error(
            f"la proyección tiene {weight.size(0)} filas, que no son cabezas enteras de d_head = {d_head}",
            f"the projection has {weight.size(0)} rows, which are not whole heads of d_head = {d_head}",
        )
    heads = weight.size(0) // d_head
    rows = (torch.arange(heads)[:, None] * d_head + order).flatten()  # (H · Dh,)
    return weight[rows.to(weight.device)]


class RotaryEmbedding(nn.Module):
    """RoPE with its cos/sin tables for positions 0 … max_len − 1 kept as buffers.

    ``forward(x, offset)`` turns the T rows of x as positions offset, offset + 1, …;
    ``forward(x, positions=p)`` as the given positions, one per row: p (T,), or (B, T) for
    x (B, H, T, Dh) or (B, T, Dh).

    Shapes: x (..., T, Dh) -> (..., T, Dh).
    """

    def __init__(self, d_head: int, max_len: int, base: float = 10000.0, interleaved: bool = False):
        super().__init__()
        self.d_head, self.max_len, self.base, self.interleaved = d_head, max_len, base, interleaved
        cos, sin = rope_cos_sin(torch.arange(max_len), d_head, base)
        self.register_buffer("cos", cos, persistent=False)  # (max_len, Dh/2)
        self.register_buffer("sin", sin, persistent=False)  # (max_len, Dh/2)

    def forward(self, x: Tensor, offset: int = 0, positions: Tensor | None = None) -> Tensor:
        T = x.size(-2)
        if positions is None:
            if offset < 0 or offset + T > self.max_len:
                raise error(
                    f"las posiciones {offset}…{offset + T - 1} se salen de la tabla de RoPE (max_len = {self.max_len})",
                    f"positions {offset}…{offset + T - 1} are outside the RoPE table (max_len = {self.max_len})",
                )
            return apply_rope(x, self.cos[offset : offset + T], self.sin[offset : offset + T], self.interleaved)
        check_positions(positions, x.shape[:-1], self.max_len)
        cos, sin = self.cos[positions], self.sin[positions]  # (T, Dh/2) or (B, T, Dh/2)
        if positions.dim() == 2 and x.dim() == 4:
            cos, sin = cos.unsqueeze(-3), sin.unsqueeze(-3)  # (B, 1, T, Dh/2): the same for every head
        return apply_rope(x, cos, sin, self.interleaved)


def check_positions(positions: Tensor, rows: torch.Size | tuple[int, ...], max_len: int) -> None:
    """Raise a ``ValueError`` unless ``positions`` are integer positions in [0, max_len), one per
    row: shape (T,), or (B, T) for rows (B, H, T) or (B, T)."""
    T = rows[-1]
    shape_ok = isinstance(positions, Tensor) and (
        tuple(positions.shape) == (T,)
        or (positions.dim() == 2 and len(rows) in (2, 3) and positions.shape == (rows[0], T))
    )
    if not shape_ok:
        shape = tuple(positions.shape) if isinstance(positions, Tensor) else type(positions).__name__
        raise error(
            f"positions debe tener forma (T,) o (B, T) con T = {T}, no {shape}",
            f"positions must have shape (T,) or (B, T) with T = {T}, got {shape}",
        )
    if positions.is_floating_point() or positions.is_complex() or positions.dtype == torch.bool:
        raise error(
            f"positions debe contener enteros, no dtype {positions.dtype}",
            f"positions must hold integers, got dtype {positions.dtype}",
        )
    if positions.numel() and (int(positions.min()) < 0 or int(positions.max()) >= max_len):
        raise error(
            f"las posiciones deben estar en [0, {max_len}), no entre {int(positions.min())} y {int(positions.max())}",
            f"positions must lie in [0, {max_len}), got {int(positions.min())} to {int(positions.max())}",
        )


# --- normalisation and feed-forward -----------------------------------------------------


class RMSNorm(nn.Module):
    """RMSNorm: x / √(mean(x²) + ε) · γ over the last dimension (no mean, no β).

    Shapes: x (..., D) -> (..., D).
    """

    def __init__(self, d_model: int, eps: float = 1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d_model))

    def forward(self, x: Tensor) -> Tensor:
        return x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + self.eps) * self.weight  # (..., D)


class SwiGLU(nn.Module):
    """The gated feed-forward network of LLaMA: W_down(SiLU(W_gate x) ⊙ W_up x), no biases.

    Shapes: x (..., D) -> (..., D); the hidden width is d_ff.
    """

    def __init__(self, d_model: int, d_ff: int, bias: bool = False):
        super().__init__()
        self.W_gate = nn.Linear(d_model, d_ff, bias=bias)
        self.W_up = nn.Linear(d_model, d_ff, bias=bias)
        self.W_down = nn.Linear(d_ff, d_model, bias=bias)

    def forward(self, x: Tensor) -> Tensor:
        return self.W_down(F.silu(self.W_gate(x)) * self.W_up(x))  # (..., D)


# --- grouped-query attention ------------------------------------------------------------


class GroupedQueryAttention(nn.Module):
    """Causal self-attention in which groups of G = H / Hkv query heads share a key/value head.

    Hkv = H is ordinary multi-head attention; Hkv = 1 is multi-query attention. Query head h
    uses key/value head h // G. Written with einsum when the weights are asked for, with
    ``F.scaled_dot_product_attention`` otherwise (same output).

    Args:
        d_model: width D.
        n_heads: query heads H.
        n_kv_heads: key/value heads Hkv; must divide ``n_heads`` (None: Hkv = H).
        rope: the rotary embedding applied to queries and keys (None: no rotation).
        scale_scores: divide the scores by √Dh (True, as everybody does).
        dropout: on the attention weights, in training.
        bias: whether the four projections have a bias (LLaMA: no).
        d_head: dimensions per head Dh (None: D / H, and D must be divisible by H).
    """

    def __init__(
        self,
        d_model: int,
        n_heads: int,
        n_kv_heads: int | None = None,
        rope: RotaryEmbedding | None = None,
        scale_scores: bool = True,
        dropout: float = 0.0,
        bias: bool = False,
        d_head: int | None = None,
    ):
        super().__init__()
        n_kv_heads = n_heads if n_kv_heads is None else n_kv_heads
        _check_heads(d_model, n_heads, n_kv_heads, d_head)
        self.d_model, self.n_heads, self.n_kv_heads = d_model, n_heads, n_kv_heads
        self.d_head = d_model // n_heads if d_head is None else d_head
        self.W_q = nn.Linear(d_model, n_heads * self.d_head, bias=bias)
        self.W_k = nn.Linear(d_model, n_kv_heads * self.d_head, bias=bias)
        self.W_v = nn.Linear(d_model, n_kv_heads * self.d_head, bias=bias)
        self.W_o = nn.Linear(n_heads * self.d_head, d_model, bias=bias)
        self.rope = rope
        self.scale = 1 / math.sqrt(self.d_head) if scale_scores else 1.0
        self.dropout = dropout

    def forward(
        self,
        x: Tensor,
        mask: Tensor | None = None,
        need_weights: bool = False,
        positions: Tensor | None = None,
        cache: AttentionCache | None = None,
    ) -> tuple[Tensor, Tensor | None]:
        """Shapes: x (B, T, D); mask boolean, True = may attend, broadcastable to (B, H, T, S);
        positions (T,) or (B, T), the positions RoPE turns each token to (None: 0 … T − 1).
        With ``cache`` (an :class:`~minitransformer.kv_cache.AttentionCache`), x holds only the
        new tokens: their keys, rotated at their positions, and values (Hkv heads) are appended
        and the queries attend to all S cached ones.

        Returns ``(output, weights)``: (B, T, D) and (B, H, T, S), or None for the weights
        unless ``need_weights``.
        """
        if x.dim() != 3 or x.size(-1) != self.d_model:
            raise error(
                f"se esperaba una entrada (B, T, D) con d_model = {self.d_model}, no {tuple(x.shape)}",
                f"expected an input (B, T, D) with d_model = {self.d_model}, got {tuple(x.shape)}",
            )
        B, T, _ = x.shape
        H, Hkv, Dh = self.n_heads, self.n_kv_heads, self.d_head
        q = self.W_q(x).view(B, T, H, Dh).transpose(1, 2)  # (B, H, T, Dh)
        k = self.W_k(x).view(B, T, Hkv, Dh).transpose(1, 2)  # (B, Hkv, T, Dh)
        v = self.W_v(x).view(B, T, Hkv, Dh).transpose(1, 2)  # (B, Hkv, T, Dh)
        if self.rope is not None:
            q, k = self.rope(q, positions=positions), self.rope(k, positions=positions)
        if cache is not None:
            k, v = cache.update(k.transpose(1, 2), v.transpose(1, 2))  # (B, S, Hkv, Dh) each
            k, v = k.transpose(1, 2), v.transpose(1, 2)  # (B, Hkv, S, Dh)
        S = k.size(-2)
        p = self.dropout if self.training else 0.0
        if not need_weights:
            heads = fast_attention(q, k, v, mask, p, scale=self.scale)  # (B, H, T, Dh)
            return self.W_o(heads.transpose(1, 2).reshape(B, T, H * Dh)), None  # (B, T, D)
        G = H // Hkv
        q = q.reshape(B, Hkv, G, T, Dh)  # (B, Hkv, G, T, Dh): the G query heads of each group
        scores = torch.einsum("bkgtd,bksd->bkgts", q, k) * self.scale  # (B, Hkv, G, T, S)
        weights = masked_softmax(scores.reshape(B, H, T, S), mask)  # (B, H, T, S)
        dropped = F.dropout(weights, p) if p > 0 else weights
        heads = torch.einsum("bkgts,bksd->bkgtd", dropped.reshape(B, Hkv, G, T, S), v)  # (B, Hkv, G, T, Dh)
        out = self.W_o(heads.reshape(B, H, T, Dh).transpose(1, 2).reshape(B, T, H * Dh))  # (B, T, D)
        return out, weights


def _check_heads(d_model: int, n_heads: int, n_kv_heads: int, d_head: int | None = None) -> None:
    if d_head is None:
        check_heads(d_model, n_heads)
        d_head = d_model // n_heads
    elif n_heads <= 0 or d_model <= 0 or d_head <= 0:
        raise error(
            f"d_model, n_heads y d_head deben ser positivos, no {d_model}, {n_heads} y {d_head}",
            f"d_model, n_heads and d_head must be positive, got {d_model}, {n_heads} and {d_head}",
        )
    if n_kv_heads <= 0:
        raise error(f"n_kv_heads debe ser positivo, no {n_kv_heads}", f"n_kv_heads must be positive, got {n_kv_heads}")
    if n_heads % n_kv_heads != 0:
        raise error(
            f"n_heads ({n_heads}) debe ser múltiplo de n_kv_heads ({n_kv_heads}): cada grupo de "
            "cabezas de consulta comparte una cabeza de clave y valor",
            f"n_heads ({n_heads}) must be a multiple of n_kv_heads ({n_kv_heads}): each group of "
            "query heads shares one key/value head",
        )
    if d_head % 2 != 0:
        raise error(
            f"d_head = {d_head} debe ser par (RoPE gira pares)",
            f"d_head = {d_head} must be even (RoPE turns pairs)",
        )


# --- the model --------------------------------------------------------------------------

_CHOICES = {
    "positional": ("rope", "sinusoidal", "learned"),
    "rope_layout": ROPE_LAYOUTS,
    "norm": ("rms", "layer"),
    "feed_forward": ("swiglu", "relu", "gelu", "none"),
}


@dataclass(frozen=True)
class ModernConfig:
    """A decoder-only model. The defaults of the switches are LLaMA's choices."""

    vocab_size: int = 256  # vocabulary V
    d_model: int = 64  # width D
    n_heads: int = 4  # query heads H
    n_kv_heads: int | None = None  # key/value heads Hkv (None: H, no grouping; 1: multi-query)
    head_dim: int | None = None  # dimensions per head Dh (None: d_model / n_heads)
    d_ff: int = 172  # hidden width of the feed-forward network (SwiGLU: ≈ 8/3 · D)
    n_layers: int = 2  # blocks N
    max_len: int = 128  # longest sequence (RoPE table or position table)
    rope_base: float = 10000.0  # base of the RoPE frequencies (LLaMA 3: 500000)
    rope_layout: str = "halves"  # RoPE's pairs: "halves" (i, i + Dh/2), Hugging Face's; "interleaved" (2i, 2i+1)
    norm_eps: float = 1e-6  # ε of every normalisation
    dropout: float = 0.0  # on attention weights and block outputs
    tie_output: bool = False  # the output projection shares the token embedding's weights
    # the switches an ablation turns, one at a time
    positional: str = "rope"  # "rope", "sinusoidal" (added, the paper) or "learned" (added, GPT-2)
    norm: str = "rms"  # "rms" (RMSNorm) or "layer" (LayerNorm)
    # "swiglu", "relu"/"gelu" (W_2 act(W_1 x)), or "none": attention-only blocks, x + Attn(Norm(x)) with no
    # feed-forward network and no second norm (d_ff is then unused), the model of the induction-head lesson
    feed_forward: str = "swiglu"
    norm_first: bool = True  # pre-norm (True) or post-norm, the paper (False)
    scale_scores: bool = True  # divide the attention scores by √d_head
    bias: bool = False  # biases in the projections and the feed-forward network
    pad_id: int | None = None  # padding id: never attended to, and not counted in the positions

    def __post_init__(self):
        if self.vocab_size <= 0 or self.n_layers <= 0 or self.d_ff <= 0 or self.max_len <= 0:
            raise error(
                "vocab_size, n_layers, d_ff y max_len deben ser positivos",
                "vocab_size, n_layers, d_ff and max_len must be positive",
            )
        _check_heads(self.d_model, self.n_heads, self.kv_heads, self.head_dim)
        for name, allowed in _CHOICES.items():
            value = getattr(self, name)
            if value not in allowed:
                raise error(
                    f"{name} debe ser uno de {allowed}, no {value!r}", f"{name} must be one of {allowed}, got {value!r}"
                )
        if self.pad_id is not None and not 0 <= self.pad_id < self.vocab_size:
            raise error(
                f"pad_id {self.pad_id} está fuera del vocabulario [0, {self.vocab_size})",
                f"pad_id {self.pad_id} is outside the vocabulary [0, {self.vocab_size})",
            )
        if not 0.0 <= self.dropout < 1.0:
            raise error(
                f"dropout debe estar en [0, 1), no {self.dropout}", f"dropout must be in [0, 1), got {self.dropout}"
            )

    @property
    def d_head(self) -> int:
        return self.d_model // self.n_heads if self.head_dim is None else self.head_dim

    @property
    def kv_heads(self) -> int:
        return self.n_heads if self.n_kv_heads is None else self.n_kv_heads

    def cache_bytes(self, length: int, batch: int = 1, bytes_per_number: int = 4) -> int:
        """Bytes of the key-value cache of ``batch`` rows of ``length`` positions: K and V of Hkv
        heads of Dh numbers per layer, 2 · n_layers · B · S · Hkv · Dh · bytes."""
        return cache_bytes(self.n_layers, batch, length, self.kv_heads * self.d_head, bytes_per_number)


def _norm(config: ModernConfig) -> nn.Module:
    if config.norm == "rms":
        return RMSNorm(config.d_model, config.norm_eps)
    return nn.LayerNorm(config.d_model, eps=config.norm_eps, bias=config.bias)


class ModernBlock(nn.Module):
    """Attention and feed-forward, each with a residual connection and a normalisation.

    Pre-norm: x + Attn(Norm(x)), then x + FFN(Norm(x)). Post-norm: Norm(x + Attn(x)), ...
    With ``feed_forward="none"`` the block is attention only: x + Attn(Norm(x)) (post-norm:
    Norm(x + Attn(x))); ``feed_forward`` and ``norm2`` are then None.

    Shapes: x (B, T, D), mask broadcastable to (B, H, T, S), positions (T,) or (B, T) -> (B, T, D);
    ``cache``: the attention's :class:`~minitransformer.kv_cache.AttentionCache`.
    """

    def __init__(self, config: ModernConfig, rope: RotaryEmbedding | None = None):
        super().__init__()
        self.norm_first = config.norm_first
        self.attn = GroupedQueryAttention(
            config.d_model,
            config.n_heads,
            config.kv_heads,
            rope,
            config.scale_scores,
            config.dropout,
            config.bias,
            config.head_dim,
        )
        self.feed_forward: nn.Module | None = None
        if config.feed_forward == "swiglu":
            self.feed_forward = SwiGLU(config.d_model, config.d_ff, config.bias)
        elif config.feed_forward != "none":
            self.feed_forward = FeedForward(
                config.d_model, config.d_ff, activation=config.feed_forward, bias=config.bias
            )
        self.norm1 = _norm(config)
        self.norm2 = _norm(config) if self.feed_forward is not None else None
        self.dropout = nn.Dropout(config.dropout)

    def forward(
        self,
        x: Tensor,
        mask: Tensor | None = None,
        need_weights: bool = False,
        positions: Tensor | None = None,
        cache: AttentionCache | None = None,
    ) -> tuple[Tensor, Tensor | None]:
        if self.norm_first:
            a, weights = self.attn(self.norm1(x), mask, need_weights, positions, cache)
            x = x + self.dropout(a)
            if self.feed_forward is not None:
                x = x + self.dropout(self.feed_forward(self.norm2(x)))
        else:
            a, weights = self.attn(x, mask, need_weights, positions, cache)
            x = self.norm1(x + self.dropout(a))
            if self.feed_forward is not None:
                x = self.norm2(x + self.dropout(self.feed_forward(x)))
        return x, weights


class ModernTransformer(nn.Module):
    """A decoder-only language model: embeddings, N blocks, final norm, output projection.

    ``forward(tokens)`` returns next-token logits; by default each position sees itself and
    the earlier ones (causal mask) and, with ``config.pad_id`` set, no padding. With
    ``forward(tokens, cache=model.new_cache())`` the same protocol as
    :class:`~minitransformer.gpt.GPT`: later calls pass only the new tokens.
    """

    def __init__(self, config: ModernConfig):
        super().__init__()
        self.config = config
        D = config.d_model
        self.token = nn.Embedding(config.vocab_size, D)
        rope = None
        if config.positional == "rope":
            interleaved = config.rope_layout == "interleaved"
            rope = RotaryEmbedding(config.d_head, config.max_len, config.rope_base, interleaved)
            self.position = None
        elif config.positional == "learned":
            self.position = nn.Parameter(torch.zeros(config.max_len, D))
        else:
            self.register_buffer("position", sinusoidal_encoding(config.max_len, D), persistent=False)
        self.rope = rope  # one table, shared by every block
        self.blocks = nn.ModuleList(ModernBlock(config, rope) for _ in range(config.n_layers))
        self.norm = _norm(config) if config.norm_first else None
        self.dropout = nn.Dropout(config.dropout)
        self.lm_head = nn.Linear(D, config.vocab_size, bias=False)
        self._init_weights()
        if config.tie_output:
            self.lm_head.weight = self.token.weight

    def _init_weights(self) -> None:
        for module in self.modules():
            if isinstance(module, (nn.Linear, nn.Embedding)):
                nn.init.normal_(module.weight, std=0.02)
            if isinstance(module, nn.Linear) and module.bias is not None:
                nn.init.zeros_(module.bias)
        if isinstance(self.position, nn.Parameter):
            nn.init.normal_(self.position, std=0.02)

    def new_cache(self, capacity: int | None = None) -> KVCache:
        """An empty key-value cache for :meth:`forward` (Hkv heads per layer); with ``capacity``,
        allocated once for that many positions and written in place."""
        return KVCache(self.config.n_layers, capacity=capacity)

    def forward(
        self,
        tokens: Tensor,
        mask: Tensor | None = None,
        return_attention: bool = False,
        positions: Tensor | None = None,
        cache: KVCache | None = None,
    ) -> Tensor | tuple[Tensor, list[Tensor]]:
        """Next-token logits.

        Shapes: tokens (B, T) integer ids; mask boolean broadcastable to (B, H, T, T), by
        default causal (and, with ``config.pad_id``, no padding keys); positions (T,) or (B, T),
        the position of each token (by default 0 … T − 1, padding not counted) -> logits
        (B, T, V). With ``return_attention=True`` also the list of the (B, H, T, S) attention
        weights of each block.

        With ``cache`` (from :meth:`new_cache`, updated in place) tokens are only the ones after
        the cached ones; each is turned at its true position, the number of real tokens its row
        has cached (the cache's length without padding), and mask and positions come from the
        cache.
        """
        cached = len(cache) if cache is not None else 0
        check_tokens(tokens, self.config.vocab_size, max_len=self.config.max_len, cached=cached)
        B, T = tokens.shape
        pad_id = self.config.pad_id
        if cache is not None:
            if mask is not None or positions is not None:
                raise error(
                    "con caché, la máscara y las posiciones salen de la caché: no pases mask ni positions",
                    "with a cache, the mask and the positions come from the cache: pass neither mask nor positions",
                )
            real = tokens != pad_id if pad_id is not None else torch.ones_like(tokens, dtype=torch.bool)
            positions, mask = cache.extend(real)  # (B, T), (B, 1, T, S)
        else:
            if positions is not None:
                check_positions(positions, tokens.shape, self.config.max_len)
            if pad_id is not None:
                real = tokens != pad_id  # (B, T)
                if positions is None:
                    positions = (real.long().cumsum(dim=1) - 1).clamp(min=0)  # (B, T) padding does not count
                if mask is None:
                    mask = combine_masks(real[:, None, None, :], causal_mask(T, device=tokens.device))  # (B, 1, T, T)
            if mask is None:
                mask = causal_mask(T, device=tokens.device)  # (1, 1, T, T)
        x = self.token(tokens)  # (B, T, D)
        if self.position is not None:
            x = x + (self.position[:T] if positions is None else self.position[positions])  # (B, T, D)
        x = self.dropout(x)
        maps = []
        for i, block in enumerate(self.blocks):
            layer_cache = cache.layers[i].self_attn if cache is not None else None
            x, weights = block(x, mask, return_attention, positions, layer_cache)
            maps.append(weights)
        if self.norm is not None:
            x = self.norm(x)
        logits = self.lm_head(x)  # (B, T, V)
        return (logits, maps) if return_attention else logits

    def num_parameters(self) -> int:
        """Number of distinct trainable parameters (shared weights counted once)."""
        return sum(p.numel() for p in self.parameters() if p.requires_grad)


def with_rope_layout(model: ModernTransformer, layout: str) -> ModernTransformer:
    """A copy of ``model`` whose RoPE pairs dimensions in ``layout``, with the rows of every W_q
    and W_k (and their biases) permuted by :func:`permute_rope_rows`: the same logits."""
    _check_layout(layout)
    config = model.config
    if config.positional != "rope":
        raise error(
            f"el modelo no usa RoPE (positional = {config.positional!r})",
            f"the model does not use RoPE (positional = {config.positional!r})",
        )
    copy = ModernTransformer(replace(config, rope_layout=layout)).to(model.lm_head.weight.device)
    copy.load_state_dict(model.state_dict())
    copy.token.padding_idx = model.token.padding_idx
    if layout != config.rope_layout:
        with torch.no_grad():
            for block in copy.blocks:
                for linear in (block.attn.W_q, block.attn.W_k):
                    linear.weight.copy_(permute_rope_rows(linear.weight, config.d_head, to=layout))
                    if linear.bias is not None:
                        linear.bias.copy_(permute_rope_rows(linear.bias, config.d_head, to=layout))
    return copy.train(model.training)
