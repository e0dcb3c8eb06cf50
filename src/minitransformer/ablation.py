"""An ablation: the modern model against notebook 09's, changing one thing at a time.

Every variant trains on the same batches (drawn from the seed), for the same steps, with the
same optimiser and learning-rate schedule (AdamW, no warm-up, cosine decay), and is scored by
its loss on the same validation lines under the honest causal mask. Only the variant's one
change differs, so a difference between two rows is that change (or the seed: hence several
seeds and their spread).

Letters: B batch, T length, V vocabulary.
"""

from __future__ import annotations

import math
import random
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import torch
from torch import Tensor, nn

from .gpt import lm_loss
from .i18n import check_lang, decimal, error, tr
from .modern import ModernConfig, ModernTransformer
from .train import train

__all__ = [
    "AblationSetup",
    "FULL_SETUP",
    "LIVE_SETUP",
    "Variant",
    "VARIANTS",
    "counting_task",
    "train_variant",
    "run_ablation",
    "ablation_rows",
    "format_table",
    "MEASURED",
]


@dataclass(frozen=True)
class AblationSetup:
    """What every variant shares."""

    d_model: int = 64
    n_heads: int = 4
    n_layers: int = 2
    d_ff_swiglu: int = 172  # ≈ 8/3 · d_model: three matrices with the parameters of two of 4 · d_model
    d_ff_plain: int = 256  # 4 · d_model, the paper's ratio
    steps: int = 300
    batch_size: int = 32
    lr: float = 3e-3
    weight_decay: float = 0.0
    clip_norm: float = 1.0
    val_lines: int = 256  # validation lines, drawn once with their own seed
    val_seed: int = 12345


# The table that benchmarks/ablation.py measures, and the smaller run notebook 10 makes live.
FULL_SETUP = AblationSetup(steps=400)
LIVE_SETUP = AblationSetup(steps=200, batch_size=8, val_lines=128)


@dataclass(frozen=True)
class Variant:
    """One row of the ablation: a name, its label in each language and what changes."""

    name: str
    es: str
    en: str
    change: dict = field(default_factory=dict)  # fields of ModernConfig that differ from the modern model
    model: str = "modern"  # "modern" or "gpt" (notebook 09's model)
    leaky_mask: bool = False  # trained with a mask that also lets each position see the next token

    def build(self, vocab_size: int, max_len: int, pad_id: int, setup: AblationSetup) -> nn.Module:
        """A fresh model for this variant (its weights come from the current random state)."""
        if self.model == "gpt":
            from .gpt import GPT, GPTConfig

            return GPT(
                GPTConfig(
                    vocab_size=vocab_size,
                    max_len=max_len,
                    d_model=setup.d_model,
                    n_heads=setup.n_heads,
                    n_layers=setup.n_layers,
                    d_ff=setup.d_ff_plain,
                    dropout=0.0,
                    pad_id=pad_id,
                )
            )
        d_ff = setup.d_ff_swiglu if self.change.get("feed_forward", "swiglu") == "swiglu" else setup.d_ff_plain
        config = ModernConfig(
            vocab_size=vocab_size,
            d_model=setup.d_model,
            n_heads=setup.n_heads,
            n_layers=setup.n_layers,
            d_ff=d_ff,
            max_len=max_len,
            **self.change,
        )
        return ModernTransformer(config)


VARIANTS: tuple[Variant, ...] = (
    Variant(
        "modern",
        "moderno (RoPE, RMSNorm, SwiGLU, pre-norm, sin sesgos)",
        "modern (RoPE, RMSNorm, SwiGLU, pre-norm, no biases)",
    ),
    Variant("gpt", "modelo del cuaderno 09 (GPT-2)", "notebook 09's model (GPT-2)", model="gpt"),
    Variant(
        "sinusoidal",
        "posiciones sinusoidales en vez de RoPE",
        "sinusoidal positions instead of RoPE",
        {"positional": "sinusoidal"},
    ),
    Variant(
        "learned",
        "posiciones aprendidas en vez de RoPE",
        "learned positions instead of RoPE",
        {"positional": "learned"},
    ),
    Variant("layernorm", "LayerNorm en vez de RMSNorm", "LayerNorm instead of RMSNorm", {"norm": "layer"}),
    Variant("relu", "ReLU en vez de SwiGLU", "ReLU instead of SwiGLU", {"feed_forward": "relu"}),
    Variant("post_norm", "post-norm (sin calentamiento)", "post-norm (no warm-up)", {"norm_first": False}),
    Variant("no_scale", "sin dividir entre √d_k", "no division by √d_k", {"scale_scores": False}),
    Variant(
        "leaky_mask",
        "máscara causal rota (ve el siguiente token)",
        "broken causal mask (sees the next token)",
        leaky_mask=True,
    ),
)


def counting_task(setup: AblationSetup = FULL_SETUP):
    """Notebook 09's counting corpus: ``(corpus, next_batch, val_tokens)``.

    ``next_batch(rng)`` draws ``setup.batch_size`` right-padded lines (B, L); ``val_tokens``
    are ``setup.val_lines`` lines drawn once from ``setup.val_seed``.
    """
    from .gpt import COUNTING_RECIPE

    corpus = COUNTING_RECIPE.corpus()

    def next_batch(rng: random.Random) -> Tensor:
        return corpus.batch(setup.batch_size, rng)  # (B, L)

    return corpus, next_batch, corpus.batch(setup.val_lines, random.Random(setup.val_seed))


def _leaky_mask(T: int, device) -> Tensor:
    """The off-by-one causal mask: position t sees t + 1 too. Shapes: -> (1, 1, T, T)."""
    return torch.ones(T, T, dtype=torch.bool, device=device).tril(1)[None, None]


def train_variant(
    variant: Variant,
    next_batch: Callable[[random.Random], Tensor],
    val_tokens: Tensor,
    vocab_size: int,
    pad_id: int,
    seed: int,
    setup: AblationSetup = AblationSetup(),
) -> float:
    """Train one variant from seed ``seed`` and return its validation loss (honest causal mask).

    ``next_batch(rng)`` returns a (B, T) batch of right-padded lines; the batches come from
    ``random.Random(seed)``, so every variant with the same seed sees the same ones.
    """
    max_len = 2 * val_tokens.size(1) + 8
    torch.manual_seed(seed)
    model = variant.build(vocab_size, max_len, pad_id, setup)

    def loss(model: nn.Module, tokens: Tensor) -> Tensor:
        mask = _leaky_mask(tokens.size(1), tokens.device) if variant.leaky_mask else None
        return lm_loss(model(tokens, mask=mask) if mask is not None else model(tokens), tokens, pad_id)

    rng = random.Random(seed)
    train(
        model,
        lambda: next_batch(rng),  # (B, T)
        setup.steps,
        loss_fn=loss,
        make_optimizer=lambda params: torch.optim.AdamW(
            params, lr=setup.lr, betas=(0.9, 0.95), weight_decay=setup.weight_decay
        ),
        schedule=lambda step: 0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * step / setup.steps)),  # no warm-up
        clip_norm=setup.clip_norm,
        progress=False,
    )
    with torch.no_grad():
        return lm_loss(model(val_tokens), val_tokens, pad_id).item()  # every model: the causal mask


def run_ablation(
    next_batch: Callable[[random.Random], Tensor],
    val_tokens: Tensor,
    vocab_size: int,
    pad_id: int,
    seeds: tuple[int, ...] | list[int] = (0, 1, 2),
    variants: tuple[Variant, ...] | list[Variant] = VARIANTS,
    setup: AblationSetup = AblationSetup(),
    progress: bool = False,
    threads: int | None = 1,
) -> dict[str, list[float]]:
    """Validation loss of every variant for every seed: {name: [loss per seed]}.

    ``threads``: CPU threads while training (models this small run fastest on one, and then
    the numbers do not depend on the machine's thread count); None keeps the current setting.
    """
    if not seeds:
        raise error("hace falta al menos una semilla", "at least one seed is needed")
    previous = torch.get_num_threads()
    if threads is not None:
        torch.set_num_threads(threads)
    results: dict[str, list[float]] = {}
    try:
        for variant in variants:
            start = time.perf_counter()
            results[variant.name] = [
                train_variant(variant, next_batch, val_tokens, vocab_size, pad_id, s, setup) for s in seeds
            ]
            if progress:
                print(f"{variant.name}: {results[variant.name]} ({time.perf_counter() - start:.0f} s)", flush=True)
    finally:
        torch.set_num_threads(previous)
    return results


def ablation_rows(results: dict[str, list[float]]) -> list[tuple[str, float, float, float]]:
    """(name, mean, standard deviation over seeds, mean − the modern model's mean) per variant."""
    base = statistics.fmean(results["modern"]) if "modern" in results else float("nan")
    rows = []
    for name, losses in results.items():
        mean = statistics.fmean(losses)
        spread = statistics.stdev(losses) if len(losses) > 1 else 0.0
        rows.append((name, mean, spread, mean - base))
    return rows


def format_table(results: dict[str, list[float]], lang: str = "es", digits: int = 3) -> str:
    """The ablation as a text table in ``lang`` (decimal comma in Spanish)."""
    check_lang(lang)
    labels = {v.name: tr(lang, v.es, v.en) for v in VARIANTS}

    def num(x: float, sign: bool = False) -> str:
        text = decimal(x, digits, lang)
        return "+" + text if sign and not text.startswith("-") else text

    n_seeds = max(len(v) for v in results.values())
    head = [
        tr(lang, "variante", "variant"),
        tr(lang, "pérdida val.", "val. loss"),
        tr(lang, f"± desv. ({n_seeds} semillas)", f"± std ({n_seeds} seeds)"),
        tr(lang, "Δ frente al moderno", "Δ vs modern"),
    ]
    body = [
        [labels.get(name, name), num(mean), num(spread), num(delta, sign=True)]
        for name, mean, spread, delta in ablation_rows(results)
    ]
    widths = [max(len(r[i]) for r in [head] + body) for i in range(4)]
    lines = [
        "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths)))
        for row in [head] + body
    ]
    lines.insert(1, "-" * len(lines[0]))
    return "\n".join(lines)


# measured by benchmarks/ablation.py: seeds [0, 1, 2, 3, 4], 400 steps
MEASURED: dict[str, list[float]] = {
    "modern": [0.6647, 0.662, 0.664, 0.6627, 0.665],
    "gpt": [0.8214, 0.8377, 0.9638, 0.9386, 0.8927],
    "sinusoidal": [1.3132, 1.3224, 1.3257, 1.3645, 1.3709],
    "learned": [0.6668, 0.668, 0.6665, 0.6647, 0.6653],
    "layernorm": [0.6651, 0.6621, 0.6642, 0.6624, 0.6668],
    "relu": [0.6757, 0.6664, 0.6696, 0.668, 0.6727],
    "post_norm": [0.8356, 0.9345, 0.9782, 1.1622, 0.9908],
    "no_scale": [0.6639, 0.663, 0.6633, 0.6625, 0.6634],
    "leaky_mask": [6.8572, 7.0764, 8.0657, 6.319, 7.5811],
}
