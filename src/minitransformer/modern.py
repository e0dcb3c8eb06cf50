"""The modern decoder-only Transformer (the LLaMA recipe) and the online softmax.

What today's open models change with respect to the 2017 paper, one piece at a time:
rotary position embeddings (RoPE) on queries and keys instead of a vector added to the
embeddings, RMSNorm instead of LayerNorm, a SwiGLU feed-forward network, pre-norm, no
biases, and grouped-query attention (several query heads share one key/value head).
:func:`from_llama` copies the weights of ``transformers``' ``LlamaForCausalLM`` into a
:class:`ModernTransformer`. Every choice is a switch of :class:`ModernConfig`, so an
ablation can change one at a time.

Letters: B batch, T length (queries), S length (keys), D d_model, H query heads,
Hkv key/value heads, G = H / Hkv query heads per key/value head, Dh d_head, V vocabulary.
"""

from __future__ import annotations

import math
import time
import warnings
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .attention import causal_mask, check_heads, fast_attention, masked_softmax
from .i18n import error, say
from .layers import FeedForward
from .model import check_tokens
from .positional import sinusoidal_encoding

__all__ = [
    "rope_frequencies",
    "rope_cos_sin",
    "apply_rope",
    "RotaryEmbedding",
    "RMSNorm",
    "SwiGLU",
    "GroupedQueryAttention",
    "ModernConfig",
    "ModernBlock",
    "ModernTransformer",
    "from_llama",
    "online_softmax",
    "online_attention",
    "FUSED_BACKENDS",
    "BackendRun",
    "run_backend",
    "compare_backends",
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

    Pair i is (x_i, x_{i + Dh/2}) by default (LLaMA's layout, the "concatenated" one) or
    (x_{2i}, x_{2i+1}) with ``interleaved=True`` (the paper's layout of the sinusoidal encoding).

    Shapes: x (..., T, Dh); cos, sin (T, Dh/2) -> (..., T, Dh).
    """
    if x.size(-1) != 2 * cos.size(-1) or x.size(-2) != cos.size(-2) or cos.shape != sin.shape:
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


class RotaryEmbedding(nn.Module):
    """RoPE with its cos/sin tables for positions 0 … max_len − 1 kept as buffers.

    Shapes: x (..., T, Dh) -> (..., T, Dh), positions offset, offset + 1, …
    """

    def __init__(self, d_head: int, max_len: int, base: float = 10000.0, interleaved: bool = False):
        super().__init__()
        self.d_head, self.max_len, self.base, self.interleaved = d_head, max_len, base, interleaved
        cos, sin = rope_cos_sin(torch.arange(max_len), d_head, base)
        self.register_buffer("cos", cos, persistent=False)  # (max_len, Dh/2)
        self.register_buffer("sin", sin, persistent=False)  # (max_len, Dh/2)

    def forward(self, x: Tensor, offset: int = 0) -> Tensor:
        T = x.size(-2)
        if offset < 0 or offset + T > self.max_len:
            raise error(
                f"las posiciones {offset}…{offset + T - 1} se salen de la tabla de RoPE (max_len = {self.max_len})",
                f"positions {offset}…{offset + T - 1} are outside the RoPE table (max_len = {self.max_len})",
            )
        return apply_rope(x, self.cos[offset : offset + T], self.sin[offset : offset + T], self.interleaved)


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
        d_model: width D; must be divisible by ``n_heads``.
        n_heads: query heads H; each has Dh = D / H dimensions.
        n_kv_heads: key/value heads Hkv; must divide ``n_heads`` (None: Hkv = H).
        rope: the rotary embedding applied to queries and keys (None: no rotation).
        scale_scores: divide the scores by √Dh (True, as everybody does).
        dropout: on the attention weights, in training.
        bias: whether the four projections have a bias (LLaMA: no).
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
    ):
        super().__init__()
        n_kv_heads = n_heads if n_kv_heads is None else n_kv_heads
        _check_heads(d_model, n_heads, n_kv_heads)
        self.d_model, self.n_heads, self.n_kv_heads = d_model, n_heads, n_kv_heads
        self.d_head = d_model // n_heads
        self.W_q = nn.Linear(d_model, n_heads * self.d_head, bias=bias)
        self.W_k = nn.Linear(d_model, n_kv_heads * self.d_head, bias=bias)
        self.W_v = nn.Linear(d_model, n_kv_heads * self.d_head, bias=bias)
        self.W_o = nn.Linear(n_heads * self.d_head, d_model, bias=bias)
        self.rope = rope
        self.scale = 1 / math.sqrt(self.d_head) if scale_scores else 1.0
        self.dropout = dropout

    def forward(
        self, x: Tensor, mask: Tensor | None = None, need_weights: bool = False
    ) -> tuple[Tensor, Tensor | None]:
        """Shapes: x (B, T, D); mask boolean, True = may attend, broadcastable to (B, H, T, T).

        Returns ``(output, weights)``: (B, T, D) and (B, H, T, T), or None for the weights
        unless ``need_weights``.
        """
        B, T, D = x.shape
        if D != self.d_model:
            raise error(
                f"se esperaba una entrada con última dimensión d_model = {self.d_model}, no {tuple(x.shape)}",
                f"expected an input with last dimension d_model = {self.d_model}, got {tuple(x.shape)}",
            )
        H, Hkv, Dh = self.n_heads, self.n_kv_heads, self.d_head
        q = self.W_q(x).view(B, T, H, Dh).transpose(1, 2)  # (B, H, T, Dh)
        k = self.W_k(x).view(B, T, Hkv, Dh).transpose(1, 2)  # (B, Hkv, T, Dh)
        v = self.W_v(x).view(B, T, Hkv, Dh).transpose(1, 2)  # (B, Hkv, T, Dh)
        if self.rope is not None:
            q, k = self.rope(q), self.rope(k)
        p = self.dropout if self.training else 0.0
        if not need_weights:
            heads = fast_attention(q, k, v, mask, p, scale=self.scale)  # (B, H, T, Dh)
            return self.W_o(heads.transpose(1, 2).reshape(B, T, H * Dh)), None  # (B, T, D)
        G = H // Hkv
        q = q.reshape(B, Hkv, G, T, Dh)  # (B, Hkv, G, T, Dh): the G query heads of each group
        scores = torch.einsum("bkgtd,bksd->bkgts", q, k) * self.scale  # (B, Hkv, G, T, S)
        weights = masked_softmax(scores.reshape(B, H, T, T), mask)  # (B, H, T, S)
        dropped = F.dropout(weights, p) if p > 0 else weights
        heads = torch.einsum("bkgts,bksd->bkgtd", dropped.reshape(B, Hkv, G, T, T), v)  # (B, Hkv, G, T, Dh)
        out = self.W_o(heads.reshape(B, H, T, Dh).transpose(1, 2).reshape(B, T, H * Dh))  # (B, T, D)
        return out, weights


def _check_heads(d_model: int, n_heads: int, n_kv_heads: int) -> None:
    check_heads(d_model, n_heads)
    if n_kv_heads <= 0:
        raise error(f"n_kv_heads debe ser positivo, no {n_kv_heads}", f"n_kv_heads must be positive, got {n_kv_heads}")
    if n_heads % n_kv_heads != 0:
        raise error(
            f"n_heads ({n_heads}) debe ser múltiplo de n_kv_heads ({n_kv_heads}): cada grupo de "
            "cabezas de consulta comparte una cabeza de clave y valor",
            f"n_heads ({n_heads}) must be a multiple of n_kv_heads ({n_kv_heads}): each group of "
            "query heads shares one key/value head",
        )
    if (d_model // n_heads) % 2 != 0:
        raise error(
            f"d_head = d_model / n_heads = {d_model // n_heads} debe ser par (RoPE gira pares)",
            f"d_head = d_model / n_heads = {d_model // n_heads} must be even (RoPE turns pairs)",
        )


# --- the model --------------------------------------------------------------------------

_CHOICES = {
    "positional": ("rope", "sinusoidal", "learned"),
    "norm": ("rms", "layer"),
    "feed_forward": ("swiglu", "relu", "gelu"),
}


@dataclass(frozen=True)
class ModernConfig:
    """A decoder-only model. The defaults of the switches are LLaMA's choices."""

    vocab_size: int = 256  # vocabulary V
    d_model: int = 64  # width D
    n_heads: int = 4  # query heads H; d_head = d_model / n_heads
    n_kv_heads: int | None = None  # key/value heads Hkv (None: H, no grouping; 1: multi-query)
    d_ff: int = 172  # hidden width of the feed-forward network (SwiGLU: ≈ 8/3 · D)
    n_layers: int = 2  # blocks N
    max_len: int = 128  # longest sequence (RoPE table or position table)
    rope_base: float = 10000.0  # base of the RoPE frequencies (LLaMA 3: 500000)
    norm_eps: float = 1e-6  # ε of every normalisation
    dropout: float = 0.0  # on attention weights and block outputs
    tie_output: bool = False  # the output projection shares the token embedding's weights
    # the switches an ablation turns, one at a time
    positional: str = "rope"  # "rope", "sinusoidal" (added, the paper) or "learned" (added, GPT-2)
    norm: str = "rms"  # "rms" (RMSNorm) or "layer" (LayerNorm)
    feed_forward: str = "swiglu"  # "swiglu", or "relu"/"gelu" (W_2 act(W_1 x))
    norm_first: bool = True  # pre-norm (True) or post-norm, the paper (False)
    scale_scores: bool = True  # divide the attention scores by √d_head
    bias: bool = False  # biases in the projections and the feed-forward network

    def __post_init__(self):
        if self.vocab_size <= 0 or self.n_layers <= 0 or self.d_ff <= 0 or self.max_len <= 0:
            raise error(
                "vocab_size, n_layers, d_ff y max_len deben ser positivos",
                "vocab_size, n_layers, d_ff and max_len must be positive",
            )
        _check_heads(self.d_model, self.n_heads, self.kv_heads)
        for name, allowed in _CHOICES.items():
            value = getattr(self, name)
            if value not in allowed:
                raise error(
                    f"{name} debe ser uno de {allowed}, no {value!r}", f"{name} must be one of {allowed}, got {value!r}"
                )
        if not 0.0 <= self.dropout < 1.0:
            raise error(
                f"dropout debe estar en [0, 1), no {self.dropout}", f"dropout must be in [0, 1), got {self.dropout}"
            )

    @property
    def d_head(self) -> int:
        return self.d_model // self.n_heads

    @property
    def kv_heads(self) -> int:
        return self.n_heads if self.n_kv_heads is None else self.n_kv_heads


def _norm(config: ModernConfig) -> nn.Module:
    if config.norm == "rms":
        return RMSNorm(config.d_model, config.norm_eps)
    return nn.LayerNorm(config.d_model, eps=config.norm_eps, bias=config.bias)


class ModernBlock(nn.Module):
    """Attention and feed-forward, each with a residual connection and a normalisation.

    Pre-norm: x + Attn(Norm(x)), then x + FFN(Norm(x)). Post-norm: Norm(x + Attn(x)), ...

    Shapes: x (B, T, D), mask broadcastable to (B, H, T, T) -> (B, T, D).
    """

    def __init__(self, config: ModernConfig, rope: RotaryEmbedding | None = None):
        super().__init__()
        self.norm_first = config.norm_first
        self.attn = GroupedQueryAttention(
            config.d_model, config.n_heads, config.kv_heads, rope, config.scale_scores, config.dropout, config.bias
        )
        if config.feed_forward == "swiglu":
            self.feed_forward = SwiGLU(config.d_model, config.d_ff, config.bias)
        else:
            self.feed_forward = FeedForward(
                config.d_model, config.d_ff, activation=config.feed_forward, bias=config.bias
            )
        self.norm1, self.norm2 = _norm(config), _norm(config)
        self.dropout = nn.Dropout(config.dropout)

    def forward(
        self, x: Tensor, mask: Tensor | None = None, need_weights: bool = False
    ) -> tuple[Tensor, Tensor | None]:
        if self.norm_first:
            a, weights = self.attn(self.norm1(x), mask, need_weights)
            x = x + self.dropout(a)
            x = x + self.dropout(self.feed_forward(self.norm2(x)))
        else:
            a, weights = self.attn(x, mask, need_weights)
            x = self.norm1(x + self.dropout(a))
            x = self.norm2(x + self.dropout(self.feed_forward(x)))
        return x, weights


class ModernTransformer(nn.Module):
    """A decoder-only language model: embeddings, N blocks, final norm, output projection.

    ``forward(tokens)`` returns next-token logits; by default each position sees itself and
    the earlier ones (causal mask).
    """

    def __init__(self, config: ModernConfig):
        super().__init__()
        self.config = config
        D = config.d_model
        self.token = nn.Embedding(config.vocab_size, D)
        rope = None
        if config.positional == "rope":
            rope = RotaryEmbedding(config.d_head, config.max_len, config.rope_base)
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

    def forward(
        self, tokens: Tensor, mask: Tensor | None = None, return_attention: bool = False
    ) -> Tensor | tuple[Tensor, list[Tensor]]:
        """Next-token logits.

        Shapes: tokens (B, T) integer ids; mask boolean broadcastable to (B, H, T, T), by
        default causal -> logits (B, T, V). With ``return_attention=True`` also the list of
        the (B, H, T, T) attention weights of each block.
        """
        check_tokens(tokens, self.config.vocab_size, max_len=self.config.max_len)
        T = tokens.size(1)
        if mask is None:
            mask = causal_mask(T, device=tokens.device)  # (1, 1, T, T)
        x = self.token(tokens)  # (B, T, D)
        if self.position is not None:
            x = x + self.position[:T]
        x = self.dropout(x)
        maps = []
        for block in self.blocks:
            x, weights = block(x, mask, return_attention)
            maps.append(weights)
        if self.norm is not None:
            x = self.norm(x)
        logits = self.lm_head(x)  # (B, T, V)
        return (logits, maps) if return_attention else logits

    def num_parameters(self) -> int:
        """Number of distinct trainable parameters (shared weights counted once)."""
        return sum(p.numel() for p in self.parameters() if p.requires_grad)


# --- weights from transformers' Llama ---------------------------------------------------


def from_llama(hf_model: nn.Module) -> ModernTransformer:
    """A :class:`ModernTransformer` with the weights of a ``transformers`` ``LlamaForCausalLM``.

    Only the architecture LLaMA 1/2/3 share is accepted: default RoPE, SiLU, no biases,
    d_head = d_model / n_heads.
    """
    c = hf_model.config
    rope = dict(getattr(c, "rope_parameters", None) or {})
    theta = rope.get("rope_theta", getattr(c, "rope_theta", 10000.0))
    problems = []
    if rope.get("rope_type", "default") != "default":
        problems.append(f"rope_type={rope.get('rope_type')!r}")
    if getattr(c, "hidden_act", "silu") != "silu":
        problems.append(f"hidden_act={c.hidden_act!r}")
    if getattr(c, "attention_bias", False) or getattr(c, "mlp_bias", False):
        problems.append("bias")
    if getattr(c, "head_dim", None) not in (None, c.hidden_size // c.num_attention_heads):
        problems.append(f"head_dim={c.head_dim}")
    if problems:
        raise error(
            f"esta configuración de Llama no es la del curso: {', '.join(problems)}",
            f"this Llama configuration is not the course's: {', '.join(problems)}",
        )
    config = ModernConfig(
        vocab_size=c.vocab_size,
        d_model=c.hidden_size,
        n_heads=c.num_attention_heads,
        n_kv_heads=getattr(c, "num_key_value_heads", None) or c.num_attention_heads,
        d_ff=c.intermediate_size,
        n_layers=c.num_hidden_layers,
        max_len=c.max_position_embeddings,
        rope_base=float(theta),
        norm_eps=c.rms_norm_eps,
        tie_output=bool(getattr(c, "tie_word_embeddings", False)),
    )
    model = ModernTransformer(config)
    sd = hf_model.state_dict()
    names = {
        "token.weight": "model.embed_tokens.weight",
        "norm.weight": "model.norm.weight",
        "lm_head.weight": "lm_head.weight",
    }
    parts = {
        "attn.W_q": "self_attn.q_proj",
        "attn.W_k": "self_attn.k_proj",
        "attn.W_v": "self_attn.v_proj",
        "attn.W_o": "self_attn.o_proj",
        "feed_forward.W_gate": "mlp.gate_proj",
        "feed_forward.W_up": "mlp.up_proj",
        "feed_forward.W_down": "mlp.down_proj",
        "norm1": "input_layernorm",
        "norm2": "post_attention_layernorm",
    }
    for i in range(config.n_layers):
        for ours, theirs in parts.items():
            names[f"blocks.{i}.{ours}.weight"] = f"model.layers.{i}.{theirs}.weight"
    with torch.no_grad():
        own = model.state_dict()
        for ours, theirs in names.items():
            if ours == "lm_head.weight" and config.tie_output:
                continue
            own[ours].copy_(sd[theirs])
    return model


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
