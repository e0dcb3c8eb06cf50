"""The whole model: configuration, embeddings, encoder, decoder and the Transformer.

Letters: B batch, S source length, T target length, D d_model, H heads, V vocabulary.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch
from torch import Tensor, nn

from .attention import attention_weights_needed, causal_mask, check_heads, combine_masks, padding_mask
from .i18n import error
from .kv_cache import KVCache
from .layers import DecoderLayer, EncoderLayer
from .positional import LearnedPositionalEmbedding, SinusoidalPositionalEncoding

__all__ = ["TransformerConfig", "Embeddings", "Encoder", "Decoder", "Transformer", "AttentionMaps"]


@dataclass(frozen=True)
class TransformerConfig:
    """Everything that defines a model. The defaults are the paper's base model."""

    src_vocab_size: int = 37000  # source vocabulary V_src
    tgt_vocab_size: int = 37000  # target vocabulary V_tgt
    d_model: int = 512  # width of every token vector
    n_heads: int = 8  # attention heads h; d_head = d_model / n_heads
    d_ff: int = 2048  # hidden width of the position-wise feed-forward network
    n_layers: int = 6  # encoder layers N
    n_decoder_layers: int | None = None  # decoder layers (None: the same as n_layers)
    dropout: float = 0.1  # on embeddings, attention weights and sublayer outputs
    max_len: int = 512  # longest sequence the positional encoding covers
    pad_id: int = 0  # padding token id, in both vocabularies
    norm_first: bool = False  # False: post-LN (the paper); True: pre-LN
    activation: str = "relu"  # "relu" (the paper) or "gelu" (BERT)
    layer_norm_eps: float = 1e-5
    positional: str = "sinusoidal"  # "sinusoidal" (the paper) or "learned" (BERT)
    scale_embeddings: bool = True  # multiply embeddings by √d_model (the paper)
    embedding_norm: bool = False  # LayerNorm after the embeddings (BERT)
    n_token_types: int = 0  # segment embeddings (BERT uses 2)
    share_embeddings: bool = False  # one embedding for source and target (needs one vocabulary)
    tie_output: bool = False  # output projection shares the target embedding's weights

    def __post_init__(self):
        check_heads(self.d_model, self.n_heads)
        if self.positional not in ("sinusoidal", "learned"):
            raise error(
                f"positional debe ser 'sinusoidal' o 'learned', no {self.positional!r}",
                f"positional must be 'sinusoidal' or 'learned', got {self.positional!r}",
            )
        if self.share_embeddings and self.src_vocab_size != self.tgt_vocab_size:
            raise error(
                "share_embeddings necesita src_vocab_size == tgt_vocab_size",
                "share_embeddings needs src_vocab_size == tgt_vocab_size",
            )
        if not 0 <= self.pad_id < min(self.src_vocab_size, self.tgt_vocab_size):
            raise error(
                f"pad_id {self.pad_id} está fuera de los vocabularios",
                f"pad_id {self.pad_id} is outside the vocabularies",
            )

    @property
    def d_head(self) -> int:
        return self.d_model // self.n_heads

    @property
    def decoder_layers(self) -> int:
        return self.n_layers if self.n_decoder_layers is None else self.n_decoder_layers


@dataclass
class AttentionMaps:
    """Every attention map of one forward pass, one (B, H, ·, ·) tensor per layer."""

    encoder: list[Tensor] = field(default_factory=list)  # (B, H, S, S) each
    decoder_self: list[Tensor] = field(default_factory=list)  # (B, H, T, T) each
    cross: list[Tensor] = field(default_factory=list)  # (B, H, T, S) each


def check_tokens(
    tokens: Tensor, vocab_size: int, name: str = "tokens", max_len: int | None = None, cached: int = 0
) -> None:
    """Raise a ``ValueError`` (:class:`~minitransformer.i18n.CourseError`) unless ``tokens`` is a
    non-empty (B, L) tensor of integer ids in [0, vocab_size) and, with ``max_len``, the
    ``cached`` tokens and these fit in it. Models call it once per forward pass, per input."""
    if not isinstance(tokens, Tensor) or tokens.dim() != 2:
        shape = tuple(tokens.shape) if isinstance(tokens, Tensor) else type(tokens).__name__
        raise error(f"{name} debe tener forma (B, T), no {shape}", f"{name} must have shape (B, T), got {shape}")
    if tokens.numel() == 0:
        raise error(f"{name} está vacío: forma {tuple(tokens.shape)}", f"{name} is empty: shape {tuple(tokens.shape)}")
    if tokens.is_floating_point() or tokens.is_complex() or tokens.dtype == torch.bool:
        raise error(
            f"{name} debe contener ids enteros, no de dtype {tokens.dtype}",
            f"{name} must hold integer token ids, got dtype {tokens.dtype}",
        )
    length = cached + tokens.size(1)
    if max_len is not None and length > max_len:
        raise error(
            f"la secuencia tiene {length} tokens y el contexto del modelo es de max_len = {max_len}",
            f"the sequence has {length} tokens and the model's context is max_len = {max_len}",
        )
    if tokens.is_meta:  # no values to check on the "meta" device (shapes only)
        return
    lo, hi = int(tokens.min()), int(tokens.max())
    if lo < 0 or hi >= vocab_size:
        bad = lo if lo < 0 else hi
        raise error(
            f"{name} contiene el id de token {bad}, fuera del vocabulario [0, {vocab_size})",
            f"{name} has token id {bad}, outside the vocabulary [0, {vocab_size})",
        )


class Embeddings(nn.Module):
    """Token embedding (× √d_model), positions, optional token types and LayerNorm, dropout.

    Shapes: tokens (B, L) -> (B, L, D).
    """

    def __init__(self, vocab_size: int, config: TransformerConfig):
        super().__init__()
        self.vocab_size = vocab_size
        self.scale = math.sqrt(config.d_model) if config.scale_embeddings else 1.0
        self.token = nn.Embedding(vocab_size, config.d_model)
        if config.positional == "sinusoidal":
            self.position = SinusoidalPositionalEncoding(config.d_model, config.max_len)
        else:
            self.position = LearnedPositionalEmbedding(config.d_model, config.max_len)
        self.token_type = nn.Embedding(config.n_token_types, config.d_model) if config.n_token_types else None
        self.norm = nn.LayerNorm(config.d_model, eps=config.layer_norm_eps) if config.embedding_norm else None
        self.dropout = nn.Dropout(config.dropout)

    def forward(self, tokens: Tensor, token_type_ids: Tensor | None = None, offset: int = 0) -> Tensor:
        """``offset``: position of the first token (the length of a key-value cache).
        The ids are not checked here: the encoder and the decoder check them once, before they embed them."""
        x = self.position(self.token(tokens) * self.scale, offset)  # (B, L, D)
        if self.token_type is not None:
            if token_type_ids is None:
                token_type_ids = torch.zeros_like(tokens)
            x = x + self.token_type(token_type_ids)
        if self.norm is not None:
            x = self.norm(x)
        return self.dropout(x)


class _Stack(nn.Module):
    """What the encoder and the decoder share: embeddings, N layers of one kind and, in
    pre-LN, a final LayerNorm."""

    def __init__(
        self,
        config: TransformerConfig,
        vocab_size: int,
        layer: type[nn.Module],
        n_layers: int,
        embeddings: Embeddings | None,
    ):
        super().__init__()
        self.config = config
        self.embeddings = embeddings or Embeddings(vocab_size, config)
        self.layers = nn.ModuleList(
            layer(
                config.d_model,
                config.n_heads,
                config.d_ff,
                config.dropout,
                config.norm_first,
                config.activation,
                config.layer_norm_eps,
            )
            for _ in range(n_layers)
        )
        self.norm = nn.LayerNorm(config.d_model, eps=config.layer_norm_eps) if config.norm_first else None


class Encoder(_Stack):
    """Embeddings and a stack of N encoder layers (plus a final LayerNorm in pre-LN).

    Shapes: src (B, S) -> memory (B, S, D).
    """

    def __init__(self, config: TransformerConfig, embeddings: Embeddings | None = None):
        super().__init__(config, config.src_vocab_size, EncoderLayer, config.n_layers, embeddings)

    def forward(
        self,
        src: Tensor,
        src_mask: Tensor | None = None,
        token_type_ids: Tensor | None = None,
    ) -> tuple[Tensor, list[Tensor]]:
        """Shapes: src (B, S); src_mask broadcastable to (B, H, S, S), by default the
        padding mask of ``src``.

        Returns ``(memory, weights)``: (B, S, D) and one (B, H, S, S) map per layer.
        """
        check_tokens(src, self.config.src_vocab_size, "src")
        if src_mask is None:
            src_mask = padding_mask(src, self.config.pad_id)  # (B, 1, 1, S)
        x = self.embeddings(src, token_type_ids)  # (B, S, D)
        maps = []
        for layer in self.layers:
            x, w = layer(x, src_mask)
            maps.append(w)
        if self.norm is not None:
            x = self.norm(x)
        return x, maps


class Decoder(_Stack):
    """Embeddings and a stack of N decoder layers (plus a final LayerNorm in pre-LN).

    Shapes: tgt (B, T), memory (B, S, D) -> (B, T, D).
    """

    def __init__(self, config: TransformerConfig, embeddings: Embeddings | None = None):
        super().__init__(config, config.tgt_vocab_size, DecoderLayer, config.decoder_layers, embeddings)

    def forward(
        self,
        tgt: Tensor,
        memory: Tensor,
        tgt_mask: Tensor | None = None,
        memory_mask: Tensor | None = None,
        cache: KVCache | None = None,
    ) -> tuple[Tensor, list[Tensor], list[Tensor]]:
        """Shapes: tgt (B, T); memory (B, S, D); tgt_mask broadcastable to (B, H, T, T), by
        default causal and padding; memory_mask broadcastable to (B, H, T, S).

        With a :class:`~minitransformer.kv_cache.KVCache` (``KVCache(n_layers, cross=True)``)
        ``tgt`` holds only the tokens after the cached ones, and the default mask covers the
        cached positions too: (B, 1, T, T_cached + T).

        Returns ``(x, self_weights, cross_weights)``: (B, T, D) and one map per layer.
        """
        check_tokens(tgt, self.config.tgt_vocab_size, "tgt")
        offset = len(cache) if cache is not None else 0
        if cache is not None:
            _, cached_mask = cache.extend(tgt != self.config.pad_id)  # (B, 1, T, T_cached + T)
            tgt_mask = cached_mask if tgt_mask is None else tgt_mask
        if tgt_mask is None:
            tgt_mask = target_mask(tgt, self.config.pad_id)
        x = self.embeddings(tgt, offset=offset)  # (B, T, D)
        self_maps, cross_maps = [], []
        for i, layer in enumerate(self.layers):
            layer_cache = cache.layers[i] if cache is not None else None
            x, w_self, w_cross = layer(x, memory, tgt_mask, memory_mask, cache=layer_cache)
            self_maps.append(w_self)
            cross_maps.append(w_cross)
        if self.norm is not None:
            x = self.norm(x)
        return x, self_maps, cross_maps


def target_mask(tgt: Tensor, pad_id: int) -> Tensor:
    """Causal and padding mask of a target batch. Shapes: tgt (B, T) -> (B, 1, T, T)."""
    return combine_masks(padding_mask(tgt, pad_id), causal_mask(tgt.size(1), device=tgt.device))


class Transformer(nn.Module):
    """The encoder-decoder Transformer of "Attention Is All You Need".

    ``forward(src, tgt)`` returns next-token logits; the softmax is left to the loss
    or to decoding.
    """

    def __init__(self, config: TransformerConfig):
        super().__init__()
        self.config = config
        self.encoder = Encoder(config)
        shared = self.encoder.embeddings if config.share_embeddings else None
        self.decoder = Decoder(config, embeddings=shared)
        self.generator = nn.Linear(config.d_model, config.tgt_vocab_size)
        if config.tie_output:
            self.generator.weight = self.decoder.embeddings.token.weight
        self._init_weights()

    def _init_weights(self) -> None:
        """Xavier for every matrix, except token embeddings: N(0, 1/d_model), so a token's
        vector has norm about 1 and, times √d_model, the norm √d_model of the positional
        encoding's scale (as the paper's weights shared with the output layer assume)."""
        for p in self.parameters():
            if p.dim() > 1:
                nn.init.xavier_uniform_(p)
        for emb in {id(m.token): m.token for m in (self.encoder.embeddings, self.decoder.embeddings)}.values():
            nn.init.normal_(emb.weight, mean=0.0, std=self.config.d_model**-0.5)

    def encode(self, src: Tensor) -> tuple[Tensor, Tensor, list[Tensor]]:
        """Shapes: src (B, S) -> memory (B, S, D), src_mask (B, 1, 1, S), encoder maps."""
        src_mask = padding_mask(src, self.config.pad_id)  # (B, 1, 1, S)
        memory, maps = self.encoder(src, src_mask)
        return memory, src_mask, maps

    def decode(
        self, tgt: Tensor, memory: Tensor, src_mask: Tensor, cache: KVCache | None = None
    ) -> tuple[Tensor, list[Tensor], list[Tensor]]:
        """Shapes: tgt (B, T), memory (B, S, D), src_mask (B, 1, 1, S) -> logits (B, T, V)
        and the decoder's self- and cross-attention maps.

        With ``cache`` (see :meth:`new_cache`), ``tgt`` holds only the tokens after the
        cached ones."""
        if tgt.size(0) != memory.size(0):
            raise error(
                f"src y tgt tienen lotes de tamaño distinto: {memory.size(0)} y {tgt.size(0)}",
                f"src and tgt batch sizes differ: {memory.size(0)} and {tgt.size(0)}",
            )
        x, self_maps, cross_maps = self.decoder(tgt, memory, None, src_mask, cache=cache)
        return self.generator(x), self_maps, cross_maps  # (B, T, V)

    def forward(
        self, src: Tensor, tgt: Tensor, return_attention: bool = False
    ) -> Tensor | tuple[Tensor, AttentionMaps]:
        """Next-token logits for every target position.

        Shapes: src (B, S), tgt (B, T) token ids -> logits (B, T, V_tgt).
        Masks come from the ids: padding (``config.pad_id``) in both, causal in the target.
        With ``return_attention=True`` also returns the :class:`AttentionMaps`.
        """
        with attention_weights_needed(return_attention):  # no maps asked: the fused kernel
            memory, src_mask, enc_maps = self.encode(src)
            logits, self_maps, cross_maps = self.decode(tgt, memory, src_mask)
        if return_attention:
            return logits, AttentionMaps(enc_maps, self_maps, cross_maps)
        return logits

    def new_cache(self) -> KVCache:
        """An empty key-value cache for :meth:`decode` (self- and cross-attention)."""
        return KVCache(self.config.decoder_layers, cross=True)

    def num_parameters(self) -> int:
        """Number of distinct trainable parameters (shared weights counted once)."""
        return sum(p.numel() for p in self.parameters() if p.requires_grad)
