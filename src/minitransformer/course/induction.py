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

import math
import time
from dataclasses import dataclass, field

import torch
from torch import Tensor, nn

from ..circuits import (
    attention_patterns,
    composition_scores,
    in_context_score,
    induction_score,
    per_position_loss,
    previous_token_score,
)
from ..i18n import error
from ..modern import ModernConfig, ModernTransformer
from ..runtime import eval_mode
from ..runtime import seed as current_seed
from ..train import train_gpt

__all__ = [
    "InductionRecipe",
    "INDUCTION_RECIPE",
    "InductionHistory",
    "periodic_batch",
    "copy_loss",
    "copyable",
    "best_guess_loss",
    "seen_mass",
    "train_induction_model",
    "measure_run",
    "seed_record",
    "CLAIMS",
    "COMMON",
    "check_claims",
    "MARGINS",
    "tightest",
    "named_heads",
    "repeated_random_tokens",
    "head_scores",
    "local_gpt2_small",
    "SEED_RECORD",
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
    icl_early: int = 4  # the in-context score's two positions: no row can copy at the early one,
    icl_late: int = 62  # every row has at least two copies of its segment behind the late one
    kept_rows: int = 4  # the probe's first rows whose attention patterns the history keeps at every record

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

        if not (0 <= self.icl_early < self.icl_late < self.length - 1 and 1 <= self.kept_rows <= self.probe_size):
            raise error(
                f"hace falta 0 ≤ icl_early < icl_late < length − 1 y 1 ≤ kept_rows ≤ probe_size, no {self.icl_early}, "
                f"{self.icl_late}, {self.kept_rows}",
                f"0 ≤ icl_early < icl_late < length − 1 and 1 ≤ kept_rows ≤ probe_size are needed, got {self.icl_early}, "
                f"{self.icl_late}, {self.kept_rows}",
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
    """The mean loss of the predictions a copy can make: at every position t ≥ P, whose token already
    occurred at t − P, the prediction of token t + 1, the one that followed it there. (At t = P − 1 the
    next token is the segment's first again, but the current token has not occurred before: nothing
    in the context says the segment ends there, and no copy can predict it.)
    Shapes: losses (B, T − 1) per position (:func:`~minitransformer.circuits.per_position_loss`),
    periods (B,)."""
    repeated = copyable(losses.size(-1) + 1, periods).to(losses.device).float()  # (B, T-1)
    return float((losses * repeated).sum() / repeated.sum())


def copyable(T: int, periods: Tensor) -> Tensor:
    """Which predictions a copy can make: position t < T − 1 of each row, predicting token t + 1, with
    t ≥ P. Shapes: periods (B,) -> (B, T − 1) booleans."""
    t = torch.arange(T - 1, device=periods.device)  # (T-1,)
    return t[None, :] >= periods[:, None]  # (B, T-1)


def best_guess_loss(recipe: InductionRecipe, position: int) -> float:
    """The loss of the best possible prediction at a position where no row can copy yet (t + 1 < the
    shortest period): the next token is one of the segment's not yet seen, each as likely,
    ln(V − t − 1). Below ln V: a prediction that bets on the tokens already seen does worse than guessing."""
    if not 0 <= position < recipe.min_period - 1:
        raise error(
            f"position debe estar en [0, {recipe.min_period - 1}), donde ninguna fila puede copiar, no {position}",
            f"position must lie in [0, {recipe.min_period - 1}), where no row can copy, got {position}",
        )
    return math.log(recipe.vocab_size - position - 1)


@torch.no_grad()
def seen_mass(model: nn.Module, tokens: Tensor, upto: int) -> Tensor:
    """At each position t < ``upto``, the probability the model gives the next token being one already seen in the row
    (tokens 0 … t), averaged over the rows. Where no row can copy yet (t + 1 < the shortest period) those tokens are
    certain **not** to come next: guessing gives them (t + 1) / V, the best possible 0. Eval mode.
    Shapes: tokens (B, T) -> (upto,)."""
    with eval_mode(model):
        probs = model(tokens[:, :upto]).float().softmax(-1)  # (B, upto, V)
    seen = torch.zeros_like(probs, dtype=torch.bool)
    for t in range(upto):
        seen[:, t].scatter_(-1, tokens[:, : t + 1], True)
    return (probs * seen).sum(-1).mean(0).cpu()  # (upto,)


@dataclass
class InductionHistory:
    """What happened during training: the loss of every step, and every ``record_every`` steps
    (step 0 is before training) the copy loss, the in-context score and every head's two scores on the
    probe batch, and the attention patterns of its first ``recipe.kept_rows`` rows (what a step picker
    draws without training again)."""

    loss: list[float] = field(default_factory=list)  # training loss of every step (all positions)
    steps: list[int] = field(default_factory=list)  # the recorded steps
    copy_loss: list[float] = field(default_factory=list)  # loss of the copyable predictions of the probe batch
    in_context: list[float] = field(default_factory=list)  # in-context score (late − early loss) per record
    early_loss: list[float] = field(default_factory=list)  # mean loss at the early position (no row can copy)
    early_seen: list[float] = field(default_factory=list)  # probability on tokens already seen, at the early position
    q_composition: list[Tensor] = field(default_factory=list)  # (H, H) block 0 → block 1 Q-composition per record
    previous_token: list[Tensor] = field(default_factory=list)  # (L, H) per record
    induction: list[Tensor] = field(default_factory=list)  # (L, H) per record
    patterns: list[Tensor] = field(default_factory=list)  # (L, H, kept_rows, T, T) per record: the probe's first rows
    tokens_seen: int = 0  # training tokens: steps × batch × length
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


def _record(
    history: InductionHistory, step: int, model: nn.Module, tokens: Tensor, periods: Tensor, recipe: InductionRecipe
) -> None:
    patterns = attention_patterns(model, tokens)
    losses = per_position_loss(model, tokens)  # (B, T-1)
    history.steps.append(step)
    history.copy_loss.append(copy_loss(losses, periods))
    history.in_context.append(in_context_score(losses, recipe.icl_early, recipe.icl_late))
    history.early_loss.append(float(losses[:, recipe.icl_early].mean()))
    history.early_seen.append(float(seen_mass(model, tokens, recipe.icl_early + 1)[-1]))
    if recipe.n_layers >= 2:
        history.q_composition.append(composition_scores(model, "q").cpu())
    history.previous_token.append(torch.stack([previous_token_score(p) for p in patterns]).cpu())  # (L, H)
    history.induction.append(torch.stack([induction_score(p, periods) for p in patterns]).cpu())  # (L, H)
    history.patterns.append(torch.stack([p[: recipe.kept_rows].transpose(0, 1) for p in patterns]).cpu())


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
    _record(history, 0, model, tokens, periods, recipe)

    def record(step: int, model: nn.Module) -> None:
        if step % recipe.record_every == 0 or step == recipe.steps:
            _record(history, step, model, tokens, periods, recipe)

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
    history.tokens_seen = recipe.steps * recipe.batch_size * recipe.length
    return model.eval(), history


SEED_RECORD = "induction_seeds.json"


def measure_run(model: nn.Module, history: InductionHistory, recipe: InductionRecipe = INDUCTION_RECIPE) -> dict:
    """Every number notebook 13 asserts about a trained model, as plain Python values: what
    ``tools/induction_seeds.py`` stores for each seed, the notebook's thresholds checked against it.
    (L, H) tables are nested lists, row: the block, column: the head."""
    from .. import circuits as c

    device = next(model.parameters()).device
    tokens, periods = recipe.probe()
    tokens, periods = tokens.to(device), periods.to(device)
    L, H = recipe.n_layers, recipe.n_heads
    heads = [(layer, head) for layer in range(L) for head in range(H)]

    def table(values: dict) -> list:
        return [[round(float(values[layer, head]), 4) for head in range(H)] for layer in range(L)]

    def loss_of() -> float:
        return copy_loss(c.per_position_loss(model, tokens), periods)

    losses = c.per_position_loss(model, tokens)  # (B, T-1)
    patterns = c.attention_patterns(model, tokens)
    uniform = c.uniform_pattern(recipe.length, device).expand(tokens.size(0), -1, -1, -1)
    previous = torch.stack([c.previous_token_score(p) for p in patterns]).cpu()
    induction = torch.stack([c.induction_score(p, periods) for p in patterns]).cpu()
    means = c.head_outputs_mean(model, periodic_batch(recipe, 256, torch.Generator().manual_seed(99))[0].to(device))
    zero, mean = {}, {}
    for layer, head in heads:
        with c.ablate_heads(model, {(layer, head): "zero"}):
            zero[layer, head] = loss_of()
        with c.ablate_heads(model, {(layer, head): means[layer, head]}):
            mean[layer, head] = loss_of()
    last = L - 1
    with c.ablate_heads(model, {(last, h): "zero" for h in range(H)}):
        both_zero = loss_of()
    with c.ablate_heads(model, {(last, h): means[last, h] for h in range(H)}):
        both_mean = loss_of()

    def removed(source: list, kind: str) -> list:
        logits, maps = c.run_with_removed(model, tokens, source, (1, kind))
        scores = c.induction_score(maps[1], periods).cpu().tolist()
        return [round(s, 4) for s in scores] + [round(copy_loss(c.next_token_losses(logits, tokens), periods), 4)]

    dla, _ = c.direct_logit_attribution(model, tokens)  # (B, T-1, L, H)
    # what each head writes into the logit of the token before the current one, at t ≥ 1: never the next one
    before = torch.cat([tokens[:, :1], tokens[:, :-2]], dim=1)  # (B, T-1): token t − 1 (t = 0: left out below)
    on_previous = c.direct_logit_attribution(model, tokens, targets=before)[0][:, 1:]  # (B, T-2, L, H)

    def after_zero(layer: int, head: int) -> list:
        with c.ablate_heads(model, {(layer, head): "zero"}):
            maps = c.attention_patterns(model, tokens)
        return [round(float(s), 4) for s in c.induction_score(maps[1], periods)]

    large, large_periods = periodic_batch(recipe, 512, torch.Generator().manual_seed(2024))
    large, large_periods = large.to(device), large_periods.to(device)

    def large_zero(layer: int, head: int) -> float:
        with c.ablate_heads(model, {(layer, head): "zero"}):
            return copy_loss(c.per_position_loss(model, large), large_periods)

    mask = copyable(recipe.length, periods)
    offsets = range(recipe.min_period - 1, recipe.max_period)  # t − s = P − 1 for every period
    block0 = [(0, h) for h in range(H)]
    generator = torch.Generator().manual_seed(0)
    D, Dh = recipe.d_model, recipe.d_model // recipe.n_heads
    by_position = losses.mean(0).cpu()
    return {
        "copy_loss_start": round(history.copy_loss[0], 4),
        "copy_loss_end": round(history.copy_loss[-1], 4),
        "onset": history.onset(),
        "halfway": history.loss_halfway(),
        "previous_rise": c.steepest_step(history.steps, [float(s[0].max()) for s in history.previous_token]),
        "in_context_fall": c.steepest_step(history.steps, history.in_context, falling=True),
        "in_context_end": round(history.in_context[-1], 4),
        "in_context_start": round(history.in_context[0], 4),
        "loss_at_start": [round(float(v), 4) for v in by_position[: recipe.min_period - 1]],
        "seen_at_start": [round(float(v), 4) for v in seen_mass(model, tokens, recipe.min_period - 1)],
        "previous": table(previous),
        "induction": table(induction),
        "uniform_previous": round(float(c.previous_token_score(uniform)), 4),
        "uniform_induction": round(float(c.induction_score(uniform, periods)), 4),
        "ov_diagonal": table({k: c.diagonal_score(c.ov_circuit(model, *k)) for k in heads}),
        "ov_eigenvalues": table({k: c.positive_eigenvalue_score(c.ov_circuit(model, *k)) for k in heads}),
        "qk_diagonal_min": [
            round(min(c.diagonal_score(c.qk_circuit(model, 1, h, d, through=block0)) for d in offsets), 4)
            for h in range(H)
        ],
        "qk_diagonal_min_each": [
            [
                round(min(c.diagonal_score(c.qk_circuit(model, 1, h, d, through=[(0, h0)])) for d in offsets), 4)
                for h0 in range(H)
            ]
            for h in range(H)
        ],
        "qk_diagonal_direct_max": [
            round(max(c.diagonal_score(c.qk_circuit(model, 1, h, d)) for d in offsets), 4) for h in range(H)
        ],
        "direct_logit": table({(layer, head): dla[..., layer, head][mask].mean() for layer, head in heads}),
        "copy_loss_zero": table(zero),
        "copy_loss_mean": table(mean),
        "copy_loss_both_zero": round(both_zero, 4),
        "copy_loss_both_mean": round(both_mean, 4),
        "removed_block0": {kind: removed(block0, kind) for kind in ("q", "k", "v")},
        "removed_one_from_keys": [removed([(0, h)], "k") for h in range(H)],
        "removed_one_from_queries": [removed([(0, h)], "q") for h in range(H)],
        "removed_one_from_values": [removed([(0, h)], "v") for h in range(H)],
        "induction_after_zero": [after_zero(0, h) for h in range(H)],
        "copy_loss_zero_large": table({k: large_zero(*k) for k in heads}),
        "previous_logit": table({k: on_previous[..., k[0], k[1]].mean() for k in heads}),
        "curves": {
            "steps": list(history.steps),
            "in_context": [round(v, 4) for v in history.in_context],
            "early_loss": [round(v, 4) for v in history.early_loss],
            "early_seen": [round(v, 4) for v in history.early_seen],
            "copy_loss": [round(v, 4) for v in history.copy_loss],
            "previous": [round(float(s[0].max()), 4) for s in history.previous_token],
            "induction": [round(float(s[1].max()), 4) for s in history.induction],
            "q_composition_max": [round(float(q.max()), 4) for q in history.q_composition],
        },
        "composition": {kind: c.composition_scores(model, kind).tolist() for kind in ("q", "k", "v")},
        "composition_elhage": {kind: c.composition_scores(model, kind, offset=0).tolist() for kind in ("q", "k")},
        "composition_baseline": {kind: c.composition_baseline(D, Dh, kind, generator=generator) for kind in "qkv"},
    }


def seed_record() -> dict:
    """The stored record of ``tools/induction_seeds.py``: the command, the machine, the development
    and verification seeds, and every seed's :func:`measure_run`."""
    import json
    from importlib.resources import files

    return json.loads((files("minitransformer") / "reference_runs" / SEED_RECORD).read_text(encoding="utf-8"))


def repeated_random_tokens(vocab_size: int, rows: int, length: int, generator: torch.Generator) -> Tensor:
    """The field's standard probe for induction heads (Olsson et al., 2022): ``length`` random token ids, drawn
    uniformly from the vocabulary, then the same ids again. In the second copy an induction head attends to the
    token after the current one's earlier occurrence. Shapes: -> (rows, 2 · length)."""
    if length < 2 or rows < 1:
        raise error(
            f"hacen falta rows ≥ 1 y length ≥ 2, no {rows} y {length}",
            f"rows ≥ 1 and length ≥ 2 are needed, got {rows} and {length}",
        )
    first = torch.randint(0, vocab_size, (rows, length), generator=generator)  # (rows, length)
    return torch.cat([first, first], dim=1)


def head_scores(model: nn.Module, tokens: Tensor) -> dict[str, Tensor | float]:
    """Every head's prefix-matching score and previous-token score on ``tokens`` (any model whose forward takes
    ``return_attention=True``: ModernTransformer, GPT), with a uniform causal head's scores on the same tokens.
    Returns ``prefix`` and ``previous`` (L, H) and the uniform head's ``uniform_prefix`` and ``uniform_previous``."""
    from .. import circuits as c

    patterns = c.attention_patterns(model, tokens)
    B, T = tokens.shape
    uniform = c.uniform_pattern(T, tokens.device).expand(B, -1, -1, -1)
    return {
        "prefix": torch.stack([c.prefix_matching_score(p, tokens) for p in patterns]).cpu(),
        "previous": torch.stack([c.previous_token_score(p) for p in patterns]).cpu(),
        "uniform_prefix": float(c.prefix_matching_score(uniform, tokens)),
        "uniform_previous": float(c.previous_token_score(uniform)),
    }


def local_gpt2_small() -> nn.Module | None:
    """GPT-2 small (Radford et al., 2019) in the course's :class:`~minitransformer.gpt.GPT`, if its weights are
    already on this machine (the Hugging Face cache, ``local_files_only``: nothing is downloaded); None if not.
    Where the cache has no GPT-2 at all, ``transformers`` is not even imported (seconds saved)."""
    import os
    from pathlib import Path

    home = Path(os.environ.get("HF_HOME", Path.home() / ".cache" / "huggingface"))
    caches = {Path(os.environ[v]) for v in ("HF_HUB_CACHE", "TRANSFORMERS_CACHE") if os.environ.get(v)} | {home / "hub"}
    if not any(
        (cache / "models--gpt2").is_dir() or (cache / "models--openai-community--gpt2").is_dir() for cache in caches
    ):
        return None
    try:
        from transformers import GPT2LMHeadModel

        hf = GPT2LMHeadModel.from_pretrained("gpt2", local_files_only=True)
    except (OSError, ValueError, ImportError):
        return None
    from ..hf_import import from_gpt2

    return from_gpt2(hf)


def named_heads(run: dict) -> dict:
    """The heads a run names: by their scores (the best previous-token head of block 0, the best induction head
    of block 1) and by what removing them does (the block-0 and block-1 head whose zero ablation costs most)."""
    prev, ind, zero = run["previous"], run["induction"], run["copy_loss_zero"]

    def best(row):
        return max(range(len(row)), key=row.__getitem__)

    return {"prev": best(prev[0]), "ind": best(ind[1]), "prev_removal": best(zero[0]), "ind_removal": best(zero[1])}


def _between_none_and_both(run: dict) -> bool:
    ind = named_heads(run)["ind"]
    none_score, none_loss = run["induction"][1][ind], run["copy_loss_end"]
    both_score, both_loss = run["removed_block0"]["k"][ind], run["removed_block0"]["k"][-1]
    return all(
        both_score < one[ind] < none_score and none_loss < one[-1] < both_loss for one in run["removed_one_from_keys"]
    )


# Every claim notebook 13 asserts on its own run (the thresholds as its cells write them): each must hold on every
# verification seed of the stored record (tests/test_circuits.py checks it). name -> (Spanish, English, test).
CLAIMS = {
    "learns": (
        "aprende: pérdida de copia ≥ 3,3 al empezar, ≤ 0,15 al final",
        "learns: copy loss ≥ 3.3 at the start, ≤ 0.15 at the end",
        lambda r: r["copy_loss_start"] >= 3.3 and r["copy_loss_end"] <= 0.15,
    ),
    "phase": (
        "cambio de fase: inicio ≤ 300, medio camino, subida del token anterior y caída del aprendizaje en "
        "contexto a ≤ 50 pasos del inicio",
        "phase change: onset ≤ 300; halfway, previous token's rise and in-context learning's fall ≤ 50 steps "
        "from the onset",
        lambda r: (
            r["onset"] is not None
            and r["onset"] <= 300
            and all(abs(r[k] - r["onset"]) <= 50 for k in ("halfway", "previous_rise", "in_context_fall"))
        ),
    ),
    "scores": (
        "puntuaciones: token anterior ≥ 0,3 y ≥ 2 × uniforme; inducción ≥ 0,8 y ≥ 5 × uniforme",
        "scores: previous token ≥ 0.3 and ≥ 2 × uniform; induction ≥ 0.8 and ≥ 5 × uniform",
        lambda r: (
            max(r["previous"][0]) >= max(0.3, 2 * r["uniform_previous"])
            and max(r["induction"][1]) >= max(0.8, 5 * r["uniform_induction"])
        ),
    ),
    "in_context": (
        "aprendizaje en contexto ≤ −3; antes de poder copiar, peor que adivinar en media",
        "in-context learning ≤ −3; before any copy is possible, worse than guessing on average",
        lambda r: r["in_context_end"] <= -3.0 and sum(r["loss_at_start"]) / len(r["loss_at_start"]) > math.log(32),
    ),
    "ov": (
        "circuito OV de la cabeza de inducción: diagonal ≥ 0,9, autovalores ≥ 0,9",
        "induction head's OV circuit: diagonal ≥ 0.9, eigenvalues ≥ 0.9",
        lambda r: (
            r["ov_diagonal"][1][named_heads(r)["ind"]] >= 0.9 and r["ov_eigenvalues"][1][named_heads(r)["ind"]] >= 0.9
        ),
    ),
    "qk": (
        "circuito QK a través de la cabeza de token anterior: diagonal ≥ 0,9 a toda distancia; directo ≤ 0,2",
        "QK circuit through the previous-token head: diagonal ≥ 0.9 at every distance; direct ≤ 0.2",
        lambda r: (
            r["qk_diagonal_min_each"][named_heads(r)["ind"]][named_heads(r)["prev"]] >= 0.9
            and r["qk_diagonal_direct_max"][named_heads(r)["ind"]] <= 0.2
        ),
    ),
    "removal": (
        "quitar: la del bloque 0 que más rompe ≥ 2; la de inducción ≥ 0,5 y menos que las dos del bloque 1, ≥ ln 32",
        "removal: the block-0 head that hurts most ≥ 2; the induction head ≥ 0.5 and less than both of block 1, ≥ ln 32",
        lambda r: (
            max(r["copy_loss_zero"][0]) >= 2.0
            and 0.5 <= r["copy_loss_zero"][1][named_heads(r)["ind"]] < r["copy_loss_both_zero"]
            and r["copy_loss_both_zero"] >= math.log(32)
        ),
    ),
    "direct": (
        "atribución directa: la mayor del bloque 1 ≥ 4 nats, cada una del bloque 0 ≤ 0,5 en valor absoluto",
        "direct attribution: block 1's largest ≥ 4 nats, each block-0 head ≤ 0.5 in absolute value",
        lambda r: max(r["direct_logit"][1]) >= 4.0 and max(abs(x) for x in r["direct_logit"][0]) <= 0.5,
    ),
    "paths": (
        "caminos: sin el bloque 0 en las claves, inducción ≤ 0,2 y pérdida ≥ 3",
        "paths: without block 0 in the keys, induction ≤ 0.2 and loss ≥ 3",
        lambda r: r["removed_block0"]["k"][named_heads(r)["ind"]] <= 0.2 and r["removed_block0"]["k"][-1] >= 3.0,
    ),
    "composition": (
        "composición: K de la pareja nombrada > 1,5 × aleatoria",
        "composition: the named pair's K > 1.5 × random",
        lambda r: (lambda n: r["composition"]["k"][n["prev"]][n["ind"]] > 1.5 * r["composition_baseline"]["k"])(
            named_heads(r)
        ),
    ),
    "both_induction": (
        "las dos cabezas del bloque 1 con inducción ≥ 0,5",
        "both block-1 heads with induction ≥ 0.5",
        lambda r: min(r["induction"][1]) >= 0.5,
    ),
    "block0_anti": (
        "circuitos OV del bloque 0 con autovalores negativos",
        "block 0's OV circuits with negative eigenvalues",
        lambda r: max(r["ov_eigenvalues"][0]) < 0,
    ),
}

# What holds in most runs but not all (the notebook says which is the common case and shows the other).
COMMON = {
    "both_previous": (
        "las dos del bloque 0 miran al anterior más que una uniforme",
        "both block-0 heads look at the previous token more than a uniform one",
        lambda r: min(r["previous"][0]) > r["uniform_previous"],
    ),
    "prev_agree": (
        "el token anterior por puntuación es el que más rompe",
        "the previous-token head by score is the one whose removal breaks most",
        lambda r: named_heads(r)["prev"] == named_heads(r)["prev_removal"],
    ),
    "ind_agree": (
        "la inducción por puntuación es la que más rompe",
        "the induction head by score is the one whose removal breaks most",
        lambda r: named_heads(r)["ind"] == named_heads(r)["ind_removal"],
    ),
    "one_from_keys": (
        "quitar una cabeza del bloque 0 de las claves queda entre no quitar nada y quitar las dos",
        "removing one block-0 head from the keys lands between removing none and both",
        _between_none_and_both,
    ),
    "early_each": (
        "antes de poder copiar, peor que lo mejor posible, ln(31 − t), en cada posición",
        "before any copy is possible, worse than the best possible, ln(31 − t), at every position",
        lambda r: all(loss > math.log(31 - t) for t, loss in enumerate(r["loss_at_start"])),
    ),
    "mean_like_zero": (
        "la ablación a la media a ≤ 0,2 nats de la ablación a cero, en cada cabeza y en las dos del bloque 1",
        "mean ablation within 0.2 nats of zero ablation, for each head and for both of block 1",
        lambda r: (
            all(abs(z - m) <= 0.2 for zs, ms in zip(r["copy_loss_zero"], r["copy_loss_mean"]) for z, m in zip(zs, ms))
            and abs(r["copy_loss_both_zero"] - r["copy_loss_both_mean"]) <= 0.2
        ),
    ),
    "k_largest": (
        "composición K de la pareja nombrada mayor que su Q y su V",
        "the named pair's K-composition larger than its Q and V",
        lambda r: (
            lambda n: (
                r["composition"]["k"][n["prev"]][n["ind"]]
                > max(r["composition"]["q"][n["prev"]][n["ind"]], r["composition"]["v"][n["prev"]][n["ind"]])
            )
        )(named_heads(r)),
    ),
    "prev_lowers_previous": (
        "la de token anterior baja directamente el logit del token anterior",
        "the previous-token head lowers the previous token's logit directly",
        lambda r: r["previous_logit"][0][named_heads(r)["prev"]] < 0,
    ),
    "bets_on_seen": (
        "antes de poder copiar, más probabilidad que adivinar en los tokens ya vistos, posiciones 1 a 4",
        "before any copy is possible, more probability than guessing on the tokens already seen, positions 1 to 4",
        lambda r: all(r["seen_at_start"][t] > (t + 1) / 32 for t in range(1, len(r["seen_at_start"]))),
    ),
    "shelf": (
        "pasos 25 a 100: aprendizaje en contexto < 0, pérdida en la posición 4 > ln 32, tokens ya vistos > 5/32",
        "steps 25 to 100: in-context learning < 0, loss at position 4 > ln 32, tokens already seen > 5/32",
        lambda r: all(
            icl < 0 and early > math.log(32) and seen > 5 / 32
            for step, icl, early, seen in zip(
                r["curves"]["steps"], r["curves"]["in_context"], r["curves"]["early_loss"], r["curves"]["early_seen"]
            )
            if 25 <= step <= 100
        ),
    ),
    "qk_both": (
        "circuito QK a través de las dos cabezas del bloque 0 juntas: diagonal ≥ 0,9 a toda distancia",
        "QK circuit through both block-0 heads together: diagonal ≥ 0.9 at every distance",
        lambda r: r["qk_diagonal_min"][named_heads(r)["ind"]] >= 0.9,
    ),
    "prev_agree_keys": (
        "el token anterior por puntuación es el que más rompe quitado solo de las claves",
        "the previous-token head by score is the one whose removal from the keys alone breaks most",
        lambda r: (
            named_heads(r)["prev"] == max(range(len(r["previous"][0])), key=lambda h: r["removed_one_from_keys"][h][-1])
        ),
    ),
    "prev_removal_stable": (
        "la cabeza del bloque 0 que más rompe es la misma con 512 filas que con las 64 del lote fijo",
        "the block-0 head whose removal breaks most is the same on 512 rows as on the fixed batch's 64",
        lambda r: (
            named_heads(r)["prev_removal"]
            == max(range(len(r["previous"][0])), key=r["copy_loss_zero_large"][0].__getitem__)
        ),
    ),
    "paths_qv": (
        "sin el bloque 0 en las consultas o en los valores, inducción ≥ 0,85 y pérdida ≤ 0,35",
        "without block 0 in the queries or the values, induction ≥ 0.85 and loss ≤ 0.35",
        lambda r: all(
            r["removed_block0"][k][named_heads(r)["ind"]] >= 0.85 and r["removed_block0"][k][-1] <= 0.35 for k in "qv"
        ),
    ),
    "one_from_qv": (
        "quitar una sola cabeza del bloque 0 de las consultas o de los valores deja la pérdida ≤ 0,35",
        "removing one block-0 head alone from the queries or the values leaves the loss ≤ 0.35",
        lambda r: all(one[-1] <= 0.35 for k in ("queries", "values") for one in r[f"removed_one_from_{k}"]),
    ),
    "q_below_random": (
        "toda composición Q por debajo de la de matrices aleatorias",
        "every Q-composition below that of random matrices",
        lambda r: max(max(row) for row in r["composition"]["q"]) < r["composition_baseline"]["q"],
    ),
}


# The thresholds of CLAIMS, each with the value it reads: the notebook prints the tightest value over the seeds (the
# margin). name -> (Spanish, English, value of one run, threshold, "≥" or "≤").
def _phase_gap(r: dict) -> float:
    if r["onset"] is None:
        return math.inf
    return max(abs(r[k] - r["onset"]) for k in ("halfway", "previous_rise", "in_context_fall"))


MARGINS = {
    "copy_start": ("pérdida de copia al empezar", "copy loss at the start", lambda r: r["copy_loss_start"], 3.3, "≥"),
    "copy_end": ("pérdida de copia al final", "copy loss at the end", lambda r: r["copy_loss_end"], 0.15, "≤"),
    "onset": ("inicio (paso)", "onset (step)", lambda r: math.inf if r["onset"] is None else r["onset"], 300, "≤"),
    "phase_gap": ("mayor distancia al inicio (pasos)", "largest distance from the onset (steps)", _phase_gap, 50, "≤"),
    "previous": ("mejor token anterior", "best previous token", lambda r: max(r["previous"][0]), 0.3, "≥"),
    "induction": ("mejor inducción", "best induction", lambda r: max(r["induction"][1]), 0.8, "≥"),
    "icl": ("aprendizaje en contexto", "in-context learning", lambda r: r["in_context_end"], -3.0, "≤"),
    "early_mean": (
        "pérdida media antes de poder copiar",
        "mean loss before any copy is possible",
        lambda r: sum(r["loss_at_start"]) / len(r["loss_at_start"]),
        math.log(32),
        "≥",
    ),
    "ov": (
        "OV de la de inducción (el menor de sus dos)",
        "the induction head's OV (the lower of its two)",
        lambda r: min(r["ov_diagonal"][1][named_heads(r)["ind"]], r["ov_eigenvalues"][1][named_heads(r)["ind"]]),
        0.9,
        "≥",
    ),
    "qk": (
        "QK a través de la de token anterior",
        "QK through the previous-token head",
        lambda r: r["qk_diagonal_min_each"][named_heads(r)["ind"]][named_heads(r)["prev"]],
        0.9,
        "≥",
    ),
    "qk_direct": ("QK directo", "direct QK", lambda r: r["qk_diagonal_direct_max"][named_heads(r)["ind"]], 0.2, "≤"),
    "removal_block0": (
        "quitar la del bloque 0 que más rompe",
        "removing the block-0 head that hurts most",
        lambda r: max(r["copy_loss_zero"][0]),
        2.0,
        "≥",
    ),
    "removal_ind": (
        "quitar la de inducción",
        "removing the induction head",
        lambda r: r["copy_loss_zero"][1][named_heads(r)["ind"]],
        0.5,
        "≥",
    ),
    "removal_both": (
        "quitar las dos del bloque 1",
        "removing both of block 1",
        lambda r: r["copy_loss_both_zero"],
        math.log(32),
        "≥",
    ),
    "direct_block1": (
        "atribución directa, la mayor del bloque 1",
        "direct attribution, block 1's largest",
        lambda r: max(r["direct_logit"][1]),
        4.0,
        "≥",
    ),
    "direct_block0": (
        "atribución directa del bloque 0, en valor absoluto",
        "block 0's direct attribution, in absolute value",
        lambda r: max(abs(x) for x in r["direct_logit"][0]),
        0.5,
        "≤",
    ),
    "keys_induction": (
        "inducción sin el bloque 0 en las claves",
        "induction without block 0 in the keys",
        lambda r: r["removed_block0"]["k"][named_heads(r)["ind"]],
        0.2,
        "≤",
    ),
    "keys_loss": (
        "pérdida sin el bloque 0 en las claves",
        "loss without block 0 in the keys",
        lambda r: r["removed_block0"]["k"][-1],
        3.0,
        "≥",
    ),
    "k_composition": (
        "composición K de la pareja / aleatoria",
        "the pair's K-composition / random",
        lambda r: (lambda n: r["composition"]["k"][n["prev"]][n["ind"]] / r["composition_baseline"]["k"])(
            named_heads(r)
        ),
        1.5,
        "≥",
    ),
    "both_induction": (
        "inducción de la menor del bloque 1",
        "induction of block 1's lesser head",
        lambda r: min(r["induction"][1]),
        0.5,
        "≥",
    ),
    "block0_eigenvalues": (
        "autovalores OV del bloque 0, el mayor",
        "block 0's OV eigenvalues, the larger",
        lambda r: max(r["ov_eigenvalues"][0]),
        0.0,
        "≤",
    ),
}


def tightest(runs: dict, name: str) -> tuple:
    """The seed whose value of ``MARGINS[name]`` is nearest its threshold, the value and the margin (≥ 0: holds)."""
    _, _, value, threshold, sense = MARGINS[name]
    sign = 1 if sense == "≥" else -1
    seed = min(runs, key=lambda s: sign * (value(runs[s]) - threshold))
    return seed, value(runs[seed]), sign * (value(runs[seed]) - threshold)


def check_claims(run: dict, table: dict = CLAIMS) -> dict[str, bool]:
    """Which claims of ``table`` (:data:`CLAIMS` or :data:`COMMON`) hold on one run's :func:`measure_run`."""
    return {name: bool(test(run)) for name, (_, _, test) in table.items()}
