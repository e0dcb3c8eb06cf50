"""The decoder-only Transformer (GPT): configuration, model, GPT-2 weights, generation, training.

A GPT is the decoder of "Attention Is All You Need" without cross-attention: each block is
masked self-attention and a feed-forward network — the same sublayers as
:class:`~minitransformer.layers.EncoderLayer`, run with a causal mask. GPT-2 puts the
LayerNorm first (pre-LN), uses learned positions, GELU (tanh approximation), a final
LayerNorm and an output projection tied to the token embedding.

Stable API (notebooks 09 and 10 build on it):

* :class:`GPTConfig` — frozen dataclass; the defaults are GPT-2 small (124 M parameters).
* :class:`GPT` — ``GPT(config)``; ``model(tokens, cache=None)`` -> logits (B, T, V);
  ``model.new_cache()``; ``model.num_parameters()``.
* :func:`from_gpt2` — our model with the weights of a ``transformers`` ``GPT2LMHeadModel``.
* :func:`generate` — prompt (B, T) -> (B, T + new), greedy or sampled, with or without
  the key-value cache (growing, or preallocated), token-for-token identical either way; it
  drives a :class:`GPT` and a :class:`~minitransformer.modern.ModernTransformer` alike.
* :func:`train_gpt` — next-token training on batches of padded lines (AdamW, warm-up then
  cosine decay); returns the loss per step.
* :data:`COUNTING_RECIPE` and :func:`train_counting_gpt` — the small GPT of notebook 09,
  trained on :class:`~minitransformer.corpus.CountingCorpus` in seconds on a CPU.

Padding: with ``config.pad_id`` set, padding tokens are never attended to, and positions
count only the real tokens of a row, so a left-padded prompt gives the same logits as the
unpadded one.

Letters: B batch, T length, D d_model, H heads, V vocabulary.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from .attention import attention_weights_needed, causal_mask, check_heads, combine_masks
from .corpus import CountingCorpus
from .i18n import error
from .kv_cache import KVCache
from .layers import EncoderLayer
from .model import check_tokens
from .runtime import eval_mode
from .sampling import check_temperature, check_top_k, check_top_p, sample_next_token

__all__ = [
    "GPTConfig",
    "GPT",
    "from_gpt2",
    "generate",
    "train_gpt",
    "lm_loss",
    "corpus_loss",
    "CountingRecipe",
    "COUNTING_RECIPE",
    "train_counting_gpt",
]


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


# ---------------------------------------------------------------------------------------
# GPT-2's weights
# ---------------------------------------------------------------------------------------


# transformers' activation names -> ours, where the function is the same (the tanh formulas of
# gelu_new, gelu_fast and gelu_accurate differ from PyTorch's tanh GELU only by rounding)
_GPT2_ACTIVATIONS = {
    "gelu_new": "gelu_tanh",
    "gelu_pytorch_tanh": "gelu_tanh",
    "gelu_python_tanh": "gelu_tanh",
    "gelu_fast": "gelu_tanh",
    "gelu_accurate": "gelu_tanh",
    "gelu": "gelu",
    "gelu_python": "gelu",
    "relu": "relu",
}


def _refuse_gpt2(flag: str, value, es: str, en: str):
    return error(
        f"from_gpt2 no puede representar {flag}={value!r} de esta configuración de GPT-2: {es}",
        f"from_gpt2 cannot represent {flag}={value!r} of this GPT-2 configuration: {en}",
    )


def _gpt2_attention_factor(hf, layer: int, d_head: int) -> float:
    """What GPT-2 multiplies the scores by, relative to our 1/√d_head (folded into W_q)."""
    scaling = d_head**-0.5 if getattr(hf, "scale_attn_weights", True) else 1.0
    if getattr(hf, "scale_attn_by_inverse_layer_idx", False):
        scaling /= float(layer + 1)
    return scaling * math.sqrt(d_head)


def from_gpt2(hf_model) -> GPT:
    """Our :class:`GPT` with the weights of a ``transformers`` ``GPT2LMHeadModel``, in eval mode.

    GPT-2 stores its linear layers as ``Conv1D`` with weights (in, out): they are transposed;
    its ``c_attn`` holds W_q, W_k and W_v side by side: it is split in three. Every setting of
    ``GPT2Config`` that changes the function is carried over exactly or refused with an error
    naming it: ``activation_function``, ``layer_norm_epsilon``, ``n_inner`` and
    ``tie_word_embeddings`` map to :class:`GPTConfig`; ``scale_attn_weights=False`` and
    ``scale_attn_by_inverse_layer_idx=True`` change the scores' scale, which is folded into
    W_q; ``reorder_and_upcast_attn`` only changes the order of float32 operations;
    ``add_cross_attention`` and activations we do not have are refused. Dropout is not
    carried over (the model is returned for inference, dropout 0).
    """
    hf = getattr(hf_model, "config", None)
    if getattr(hf, "model_type", None) != "gpt2" or not hasattr(hf_model, "lm_head"):
        raise error(
            f"from_gpt2 espera un GPT2LMHeadModel de transformers, no {type(hf_model).__name__}",
            f"from_gpt2 expects a transformers GPT2LMHeadModel, got {type(hf_model).__name__}",
        )
    if hf.activation_function not in _GPT2_ACTIVATIONS:
        raise _refuse_gpt2(
            "activation_function",
            hf.activation_function,
            f"las activaciones posibles son {sorted(_GPT2_ACTIVATIONS)}",
            f"the possible activations are {sorted(_GPT2_ACTIVATIONS)}",
        )
    if getattr(hf, "add_cross_attention", False):
        raise _refuse_gpt2(
            "add_cross_attention",
            True,
            "nuestro GPT no tiene atención cruzada (para un codificador–decodificador, usa Transformer)",
            "our GPT has no cross-attention (for an encoder–decoder, use Transformer)",
        )
    config = GPTConfig(
        vocab_size=hf.vocab_size,
        max_len=hf.n_positions,
        d_model=hf.n_embd,
        n_heads=hf.n_head,
        n_layers=hf.n_layer,
        d_ff=hf.n_inner or 4 * hf.n_embd,
        dropout=0.0,
        activation=_GPT2_ACTIVATIONS[hf.activation_function],
        layer_norm_eps=hf.layer_norm_epsilon,
        tie_output=bool(hf.tie_word_embeddings),
    )
    dtype = next(hf_model.parameters()).dtype
    model = GPT(config).to(dtype)
    sd = hf_model.state_dict()
    used = {"lm_head.weight"}  # tied, or copied below
    D = config.d_model

    def take(name: str, shape: tuple[int, ...]) -> Tensor:
        if name not in sd or tuple(sd[name].shape) != shape:
            got = tuple(sd[name].shape) if name in sd else None
            raise error(
                f"from_gpt2: el parámetro {name} de GPT-2 tiene forma {got}, y su configuración pide {shape}",
                f"from_gpt2: GPT-2's parameter {name} has shape {got}, and its configuration asks for {shape}",
            )
        used.add(name)
        return sd[name]

    with torch.no_grad():
        model.token.weight.copy_(take("transformer.wte.weight", (config.vocab_size, D)))
        model.position.weight.copy_(take("transformer.wpe.weight", (config.max_len, D)))
        for i, layer in enumerate(model.layers):
            p = f"transformer.h.{i}."
            w, b = take(p + "attn.c_attn.weight", (D, 3 * D)), take(p + "attn.c_attn.bias", (3 * D,))
            for j, lin in enumerate((layer.self_attn.W_q, layer.self_attn.W_k, layer.self_attn.W_v)):
                lin.weight.copy_(w[:, j * D : (j + 1) * D].T)
                lin.bias.copy_(b[j * D : (j + 1) * D])
            factor = _gpt2_attention_factor(hf, i, config.d_head)
            if factor != 1.0:  # GPT-2's scale of the scores, in W_q: (c·q)·k / √d_head
                layer.self_attn.W_q.weight.mul_(factor)
                layer.self_attn.W_q.bias.mul_(factor)
            layer.self_attn.W_o.weight.copy_(take(p + "attn.c_proj.weight", (D, D)).T)
            layer.self_attn.W_o.bias.copy_(take(p + "attn.c_proj.bias", (D,)))
            layer.feed_forward.W_1.weight.copy_(take(p + "mlp.c_fc.weight", (D, config.d_ff)).T)
            layer.feed_forward.W_1.bias.copy_(take(p + "mlp.c_fc.bias", (config.d_ff,)))
            layer.feed_forward.W_2.weight.copy_(take(p + "mlp.c_proj.weight", (config.d_ff, D)).T)
            layer.feed_forward.W_2.bias.copy_(take(p + "mlp.c_proj.bias", (D,)))
            for ours, theirs in ((layer.norm1, "ln_1"), (layer.norm2, "ln_2")):
                ours.weight.copy_(take(p + theirs + ".weight", (D,)))
                ours.bias.copy_(take(p + theirs + ".bias", (D,)))
        model.norm.weight.copy_(take("transformer.ln_f.weight", (D,)))
        model.norm.bias.copy_(take("transformer.ln_f.bias", (D,)))
        if not config.tie_output:
            model.lm_head.weight.copy_(take("lm_head.weight", (config.vocab_size, D)))
    unused = sorted(name for name, _ in hf_model.named_parameters() if name not in used)
    if unused:  # a module this conversion does not know would be dropped silently
        raise error(
            f"from_gpt2 no sabe qué hacer con estos parámetros de GPT-2: {unused[:4]}",
            f"from_gpt2 does not know what to do with these GPT-2 parameters: {unused[:4]}",
        )
    return model.eval()


# ---------------------------------------------------------------------------------------
# Generation
# ---------------------------------------------------------------------------------------


@torch.no_grad()
def generate(
    model: nn.Module,
    prompt: Tensor,
    max_new_tokens: int,
    *,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
    generator: torch.Generator | None = None,
    eos_id: int | None = None,
    use_cache: bool = True,
    preallocate: bool = False,
) -> Tensor:
    """Continue ``prompt`` one token at a time.

    Args:
        model: a :class:`GPT`, a :class:`~minitransformer.modern.ModernTransformer`, or any
            model with the same ``forward(tokens, cache=...)``/``new_cache(capacity)`` and a
            ``config`` with ``max_len`` and ``pad_id``.
        prompt: (B, T) ids; rows of different lengths are padded on the left with
            ``config.pad_id``.
        max_new_tokens: tokens to add (fewer if every row has produced ``eos_id``).
        temperature, top_k, top_p: see :func:`~minitransformer.sampling.next_token_probs`;
            ``temperature=0`` is greedy decoding.
        generator: the random source of the draws (same state, same text).
        eos_id: a row that produces it is finished; it is then filled with padding
            (``config.pad_id``, or ``eos_id`` when there is none).
        use_cache: keep keys and values between steps (the same tokens, fewer computations).
        preallocate: with the cache, allocate it once for prompt + ``max_new_tokens``
            positions and write each step in place instead of concatenating (the same tokens).

    Returns:
        (B, T + L) ids, L ≤ ``max_new_tokens``. The padding token is never generated.
    """
    check_temperature(temperature)
    if top_k is not None:
        check_top_k(top_k)
    if top_p is not None:
        check_top_p(top_p)
    if isinstance(max_new_tokens, bool) or not isinstance(max_new_tokens, int) or max_new_tokens < 0:
        raise error(
            f"max_new_tokens debe ser un entero ≥ 0, no {max_new_tokens!r}",
            f"max_new_tokens must be an integer ≥ 0, got {max_new_tokens!r}",
        )
    config = model.config
    pad_id = getattr(config, "pad_id", None)
    if prompt.dim() != 2 or prompt.size(1) + max_new_tokens > config.max_len:
        raise error(
            f"el prompt ({prompt.size(-1)} tokens) más los {max_new_tokens} nuevos no caben en el "
            f"contexto del modelo ({config.max_len} tokens, max_len)",
            f"the prompt ({prompt.size(-1)} tokens) plus {max_new_tokens} new ones do not fit in the "
            f"model's context ({config.max_len} tokens, max_len)",
        )
    fill = pad_id if pad_id is not None else eos_id
    with eval_mode(model):
        tokens = prompt
        cache = None
        if use_cache:
            cache = model.new_cache(prompt.size(1) + max_new_tokens) if preallocate else model.new_cache()
        done = torch.zeros(prompt.size(0), dtype=torch.bool, device=prompt.device)
        new = prompt  # what the model has not seen yet
        for _ in range(max_new_tokens):
            logits = model(new if use_cache else tokens, cache=cache)[:, -1].float()  # (B, V)
            if pad_id is not None:
                logits[:, pad_id] = float("-inf")
            nxt = sample_next_token(logits, temperature, top_k, top_p, generator)  # (B,)
            if eos_id is not None:
                nxt = nxt.masked_fill(done, fill)
                done = done | (nxt == eos_id)
            tokens = torch.cat([tokens, nxt[:, None]], dim=1)  # (B, t + 1)
            new = nxt[:, None]  # (B, 1)
            if eos_id is not None and bool(done.all()):
                break
        return tokens


# ---------------------------------------------------------------------------------------
# Training
# ---------------------------------------------------------------------------------------


def lm_loss(logits: Tensor, tokens: Tensor, pad_id: int | None) -> Tensor:
    """Cross-entropy of predicting each token from the ones before it (padding ignored).

    Shapes: logits (B, T, V) of ``tokens`` (B, T) -> a scalar.
    """
    targets = tokens[:, 1:]  # (B, T - 1) the next token of each position
    return nn.functional.cross_entropy(
        logits[:, :-1].reshape(-1, logits.size(-1)).float(),
        targets.reshape(-1),
        ignore_index=-100 if pad_id is None else pad_id,
    )


@torch.no_grad()
def corpus_loss(model: nn.Module, corpus: CountingCorpus, held_out: bool = False) -> float:
    """The model's expected next-token loss, in nats per predicted token, on the lines of
    ``corpus`` as its generator draws them (``held_out=True``: on its held-out lines), computed
    over every line at once instead of a sample: comparable with
    :meth:`~minitransformer.corpus.CountingCorpus.entropy_per_token`, which it can never beat."""
    from .data import pad_sequences

    weights = corpus.distribution(held_out)
    pad = corpus.vocab.pad_id
    lines = pad_sequences([corpus.line(start, count, lang) for lang, start, count in weights], pad)  # (N, L)
    lines = lines.to(next(model.parameters()).device)
    with eval_mode(model):
        logits = model(lines)  # (N, L, V)
    targets = lines[:, 1:]  # (N, L - 1)
    per_token = nn.functional.cross_entropy(
        logits[:, :-1].transpose(1, 2).float(), targets, ignore_index=pad, reduction="none"
    )  # (N, L - 1)
    w = torch.tensor(list(weights.values()), dtype=torch.float64, device=lines.device)  # (N,)
    return float((w * per_token.double().sum(dim=1)).sum() / (w * (targets != pad).sum(dim=1)).sum())


def train_gpt(
    model: nn.Module,
    next_batch: Callable[[], Tensor],
    steps: int,
    *,
    lr: float = 3e-3,
    warmup: int = 50,
    weight_decay: float = 0.01,
    clip_norm: float = 1.0,
    device: torch.device | str | None = None,
    progress: bool = True,
) -> list[float]:
    """Train a language model on next-token prediction.

    Args:
        model: maps tokens (B, T) to logits (B, T, V) and has ``config.pad_id``.
        next_batch: returns the next (B, T) batch of padded lines.
        steps: optimiser steps (AdamW; linear warm-up for ``warmup`` steps, then cosine
            decay to a tenth of ``lr``).

    Returns:
        the training loss of every step.
    """
    from .train import train

    def schedule(step: int) -> float:  # multiplier of lr; step counts from 0
        if step < warmup:
            return (step + 1) / warmup
        progress_ = (step - warmup) / max(1, steps - warmup)
        return 0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(1.0, progress_)))

    history = train(
        model,
        next_batch,
        steps,
        loss_fn=lambda model, tokens: lm_loss(model(tokens), tokens, model.config.pad_id),
        # foreach: every tensor in one call, the same numbers as one tensor at a time (tested)
        make_optimizer=lambda params: torch.optim.AdamW(
            params, lr=lr, betas=(0.9, 0.95), weight_decay=weight_decay, foreach=True
        ),
        schedule=schedule,
        clip_norm=clip_norm,
        device=device,
        progress=progress,
    )
    return history.loss


# ---------------------------------------------------------------------------------------
# The course's counting model
# ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class CountingRecipe:
    """Corpus, model and training settings of notebook 09's GPT."""

    max_number: int = 100  # the corpus counts from 0 to 99
    max_count: int = 5  # numbers per line: 2 to 5
    d_model: int = 64
    n_heads: int = 4
    n_layers: int = 2
    d_ff: int = 256
    max_len: int = 320  # lines are short; the long context is for timing generation
    steps: int = 800
    batch_size: int = 64
    lr: float = 5e-3
    warmup: int = 50
    held_out: float = 0.1  # share of the corpus's lines set aside for training (the same ones every run)

    def corpus(self, held_out: bool = False) -> CountingCorpus:
        """The counting corpus; with ``held_out``, the one training draws from: the recipe's
        share of its lines, chosen once (``random.Random(0)``), is set aside."""
        import random

        every = CountingCorpus(self.max_number, min_count=2, max_count=self.max_count)
        if not held_out:
            return every
        chosen = random.Random(0).sample(every.keys(), round(self.held_out * len(every.keys())))
        return CountingCorpus(self.max_number, min_count=2, max_count=self.max_count, held_out=chosen)

    def config(self, corpus: CountingCorpus) -> GPTConfig:
        return GPTConfig(
            vocab_size=len(corpus.vocab),
            max_len=self.max_len,
            d_model=self.d_model,
            n_heads=self.n_heads,
            n_layers=self.n_layers,
            d_ff=self.d_ff,
            dropout=0.0,
            pad_id=corpus.vocab.pad_id,
        )


COUNTING_RECIPE = CountingRecipe()


def train_counting_gpt(
    seed: int | None = None,
    recipe: CountingRecipe = COUNTING_RECIPE,
    device: torch.device | str | None = None,
    progress: bool = True,
) -> tuple[GPT, CountingCorpus, list[float]]:
    """Train the counting GPT from scratch under ``seed`` (default: the seed in force), on the
    recipe's corpus without its held-out lines.

    Returns ``(model, corpus, losses)``: ``corpus`` knows the held-out lines; the model is in eval mode.
    """
    import random

    from .runtime import seed as current_seed

    seed = current_seed() if seed is None else seed
    corpus = recipe.corpus(held_out=True)
    torch.manual_seed(seed)
    model = GPT(recipe.config(corpus))
    rng = random.Random(seed)
    losses = train_gpt(
        model,
        lambda: corpus.batch(recipe.batch_size, rng),
        recipe.steps,
        lr=recipe.lr,
        warmup=recipe.warmup,
        device=device,
        progress=progress,
    )
    return model, corpus, losses
