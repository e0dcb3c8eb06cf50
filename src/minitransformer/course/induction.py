"""Notebook 13's induction heads: the data, the attention-only model and its training, with the
heads' scores recorded while it learns.

Every row repeats one random segment: a period P drawn from [min_period, max_period] and P
distinct random tokens, tiled to the row's length. After the first P tokens every token is the
one P positions back, so the model can predict it only by finding the previous occurrence of
the current token and copying the token after it (an induction head), and the first P tokens
cannot be predicted at all. The model is a
:class:`~minitransformer.modern.ModernTransformer` with RoPE and no feed-forward layer, trained
by :func:`~minitransformer.train.train_gpt` in seconds on a CPU. The scores are
:mod:`minitransformer.circuits`'.

Letters: B batch, T length, L layers, H heads, R records.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import torch
from torch import Tensor, nn

from ..circuits import attention_patterns, induction_score, per_position_loss, previous_token_score
from ..i18n import error
from ..modern import ModernConfig, ModernTransformer
from ..runtime import seed as current_seed
from ..train import train_gpt

__all__ = [
    "InductionRecipe",
    "INDUCTION_RECIPE",
    "InductionHistory",
    "periodic_batch",
    "copy_loss",
    "train_induction_model",
]


@dataclass(frozen=True)
class InductionRecipe:
    """Data, model and training settings of notebook 13's induction heads."""

    vocab_size: int = 32  # random tokens 0 … V − 1
    min_period: int = 6  # the repeated segment's length P, uniform in [min_period, max_period]
    max_period: int = 24
    length: int = 64  # tokens per row T
    d_model: int = 64
    n_heads: int = 2
    n_layers: int = 2
    # the best layer-1 induction score passed 0.5 at step 150–200 for seeds 0–11 (CI's CPU profile, one
    # thread; two threads gave the same weights bit for bit for seeds 0–6): 600 steps are three times the
    # slowest. With 400 the onsets were the same but the worst seed ended lower (induction 0.72)
    steps: int = 600
    batch_size: int = 32
    lr: float = 1e-2
    warmup: int = 50
    weight_decay: float = 0.01
    record_every: int = 25  # steps between two records of the history
    probe_size: int = 64  # rows of the fixed batch the history is measured on
    probe_seed: int = 1234  # its generator's seed: the same probe batch for every training seed

    def __post_init__(self):
        if not 1 <= self.min_period <= self.max_period < self.length:
            raise error(
                f"hace falta 1 ≤ min_period ≤ max_period < length, no {self.min_period}, {self.max_period}, "
                f"{self.length}",
                f"1 ≤ min_period ≤ max_period < length is needed, got {self.min_period}, {self.max_period}, "
                f"{self.length}",
            )
        if self.max_period > self.vocab_size:
            raise error(
                f"un segmento de {self.max_period} tokens distintos necesita un vocabulario de al menos ese tamaño, "
                f"no {self.vocab_size}",
                f"a segment of {self.max_period} distinct tokens needs a vocabulary at least that large, "
                f"got {self.vocab_size}",
            )

    def config(self) -> ModernConfig:
        """The model: RoPE, RMSNorm, attention-only blocks (``feed_forward="none"``)."""
        return ModernConfig(
            vocab_size=self.vocab_size,
            d_model=self.d_model,
            n_heads=self.n_heads,
            n_layers=self.n_layers,
            max_len=self.length,
            feed_forward="none",
            positional="rope",
        )

    def probe(self) -> tuple[Tensor, Tensor]:
        """The fixed batch the history is measured on: (probe_size, T) tokens and their periods."""
        return periodic_batch(self, self.probe_size, torch.Generator().manual_seed(self.probe_seed))


INDUCTION_RECIPE = InductionRecipe()


def periodic_batch(recipe: InductionRecipe, batch_size: int, generator: torch.Generator) -> tuple[Tensor, Tensor]:
    """Rows that repeat a segment of P distinct random tokens, P uniform in the recipe's range.

    Shapes: -> tokens (B, T), periods (B,).
    """
    periods = torch.randint(recipe.min_period, recipe.max_period + 1, (batch_size,), generator=generator)  # (B,)
    rows = []
    for P in periods.tolist():
        segment = torch.randperm(recipe.vocab_size, generator=generator)[:P]  # (P,) distinct tokens
        rows.append(segment.repeat(recipe.length // P + 1)[: recipe.length])  # (T,)
    return torch.stack(rows), periods  # (B, T), (B,)


def copy_loss(losses: Tensor, periods: Tensor) -> float:
    """The mean loss on the repeated part: the predictions of tokens t + 1 ≥ P, which a copy can
    get right. Shapes: losses (B, T − 1) per position (:func:`~minitransformer.circuits.per_position_loss`),
    periods (B,)."""
    t = torch.arange(losses.size(-1), device=losses.device)  # (T-1,)
    repeated = (t[None, :] + 1 >= periods.to(losses.device)[:, None]).float()  # (B, T-1)
    return float((losses * repeated).sum() / repeated.sum())


@dataclass
class InductionHistory:
    """What happened during training: the loss of every step, and every ``record_every`` steps
    (step 0 is before training) the copy loss and every head's two scores on the probe batch."""

    loss: list[float] = field(default_factory=list)  # training loss of every step (all positions)
    steps: list[int] = field(default_factory=list)  # the recorded steps
    copy_loss: list[float] = field(default_factory=list)  # loss on the repeated part of the probe batch
    previous_token: list[Tensor] = field(default_factory=list)  # (L, H) per record
    induction: list[Tensor] = field(default_factory=list)  # (L, H) per record
    seconds: float = 0.0  # wall-clock time of the training, records included

    def onset(self, threshold: float = 0.5, layer: int = 1) -> int | None:
        """The first recorded step at which some head of ``layer`` has an induction score above
        ``threshold`` (None: never)."""
        for step, scores in zip(self.steps, self.induction):
            if float(scores[layer].max()) > threshold:
                return step
        return None

    def loss_halfway(self) -> int:
        """The first recorded step at which the copy loss is below halfway between its first and
        last records: where the loss's drop happens, to compare with :meth:`onset`."""
        half = (self.copy_loss[0] + self.copy_loss[-1]) / 2
        return next(step for step, loss in zip(self.steps, self.copy_loss) if loss < half)


def _record(history: InductionHistory, step: int, model: nn.Module, tokens: Tensor, periods: Tensor) -> None:
    patterns = attention_patterns(model, tokens)
    history.steps.append(step)
    history.copy_loss.append(copy_loss(per_position_loss(model, tokens), periods))
    history.previous_token.append(torch.stack([previous_token_score(p) for p in patterns]).cpu())  # (L, H)
    history.induction.append(torch.stack([induction_score(p, periods) for p in patterns]).cpu())  # (L, H)


def train_induction_model(
    seed: int | None = None,
    recipe: InductionRecipe = INDUCTION_RECIPE,
    device: torch.device | str | None = None,
    progress: bool = True,
) -> tuple[ModernTransformer, InductionHistory]:
    """Train the attention-only model from scratch under ``seed`` (default: the seed in force) on
    :func:`periodic_batch` rows, recording the history every ``recipe.record_every`` steps.

    Returns ``(model, history)``; the model is in eval mode.
    """
    seed = current_seed() if seed is None else seed
    torch.manual_seed(seed)
    model = ModernTransformer(recipe.config())
    if device is not None:
        model.to(device)
    device = next(model.parameters()).device
    tokens, periods = recipe.probe()
    tokens, periods = tokens.to(device), periods.to(device)
    generator = torch.Generator().manual_seed(seed)
    history = InductionHistory()
    start = time.perf_counter()
    _record(history, 0, model, tokens, periods)

    def record(step: int, model: nn.Module) -> None:
        if step % recipe.record_every == 0 or step == recipe.steps:
            _record(history, step, model, tokens, periods)

    history.loss = train_gpt(
        model,
        lambda: periodic_batch(recipe, recipe.batch_size, generator)[0],
        recipe.steps,
        lr=recipe.lr,
        warmup=recipe.warmup,
        weight_decay=recipe.weight_decay,
        device=device,
        progress=progress,
        callback=record,
    )
    history.seconds = time.perf_counter() - start
    return model.eval(), history
