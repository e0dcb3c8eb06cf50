"""Training: the warm-up learning-rate schedule, label smoothing, the training loop,
checkpoints, and the recipe of the course's Spanish → English number translator.

Letters: B batch, T target length, V target vocabulary.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import os
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Sequence

import torch
import torch.nn.functional as F
from torch import Tensor

from .data import Batch, NumberTranslation, Vocab, spell_number
from .decoding import beam_search, greedy_decode
from .model import Transformer, TransformerConfig
from . import runtime
from .i18n import error, say
from .runtime import default_device, set_seed

__all__ = [
    "noam_lr",
    "NoamSchedule",
    "label_smoothed_cross_entropy",
    "History",
    "train",
    "TrainedModel",
    "save_checkpoint",
    "load_checkpoint",
    "NumberRecipe",
    "NUMBER_RECIPE",
    "train_number_translator",
    "load_or_train_number_translator",
    "default_checkpoint_path",
    "evaluate_numbers",
    "NumberResults",
    "random_target_batches",
    "validation_loss",
]

# ---------------------------------------------------------------------------------------
# Learning rate and loss
# ---------------------------------------------------------------------------------------


def noam_lr(step: int, d_model: int, warmup: int, factor: float = 1.0) -> float:
    """The paper's schedule: factor · d_model^-0.5 · min(step^-0.5, step · warmup^-1.5).

    Linear warm-up for ``warmup`` steps, then decay ∝ 1/√step; ``step`` counts from 1.
    """
    if step < 1:
        raise error(f"los pasos se cuentan desde 1, no {step}", f"steps count from 1, got {step}")
    return factor * d_model**-0.5 * min(step**-0.5, step * warmup**-1.5)


class NoamSchedule:
    """``noam_lr`` as a multiplier for ``torch.optim.lr_scheduler.LambdaLR``
    (use it with the optimiser's ``lr=1.0``). Its argument counts from 0."""

    def __init__(self, d_model: int, warmup: int, factor: float = 1.0):
        self.d_model, self.warmup, self.factor = d_model, warmup, factor

    def __call__(self, step: int) -> float:
        return noam_lr(step + 1, self.d_model, self.warmup, self.factor)


def label_smoothed_cross_entropy(
    logits: Tensor, target: Tensor, smoothing: float = 0.0, ignore_index: int = 0
) -> Tensor:
    """Mean cross-entropy against the smoothed target (1 - ε)·one_hot + ε/V, over the
    positions whose target is not ``ignore_index``.

    The same definition as ``F.cross_entropy(..., label_smoothing=ε, ignore_index=...)``:
    the ε/V goes to every class, the padding class included.

    Shapes: logits (B, T, V), target (B, T) -> scalar.
    """
    if logits.size(-1) < 2:
        raise error("un vocabulario de un solo token no tiene nada que predecir", "a vocabulary of one token has nothing to predict")
    logp = torch.log_softmax(logits.float(), dim=-1)  # (B, T, V)
    nll = -logp.gather(-1, target[..., None]).squeeze(-1)  # (B, T)
    uniform = -logp.mean(dim=-1)  # (B, T): cross-entropy against the uniform distribution
    loss = (1.0 - smoothing) * nll + smoothing * uniform  # (B, T)
    keep = target != ignore_index  # (B, T)
    return (loss * keep).sum() / keep.sum().clamp(min=1)


# ---------------------------------------------------------------------------------------
# The training loop
# ---------------------------------------------------------------------------------------


@dataclass
class History:
    """What happened during training, one entry per step (``val_*`` every ``eval_every``)."""

    loss: list[float] = field(default_factory=list)  # training loss (label-smoothed)
    lr: list[float] = field(default_factory=list)  # learning rate used at the step
    grad_norm: list[float] = field(default_factory=list)  # before clipping
    val_step: list[int] = field(default_factory=list)
    val_loss: list[float] = field(default_factory=list)  # plain cross-entropy, no smoothing
    best_step: int = 0  # with keep_best: the step whose weights the model ends with
    seconds: float = 0.0  # wall-clock time of the loop
    cpu_seconds: float = 0.0  # CPU time of this process (all threads) during the loop

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "History":
        return cls(**d)


def train(
    model: Transformer,
    next_batch: Callable[[], Batch],
    steps: int,
    *,
    warmup: int = 400,
    lr_factor: float = 1.0,
    label_smoothing: float = 0.1,
    clip_norm: float | None = 1.0,
    betas: tuple[float, float] = (0.9, 0.98),
    val_batch: Batch | None = None,
    eval_every: int = 100,
    keep_best: bool = False,
    callback: Callable[[int, Transformer], None] | None = None,
    device: torch.device | str | None = None,
    progress: bool = True,
    desc: str | None = None,
) -> History:
    """Train ``model`` with Adam, the warm-up schedule, label smoothing and gradient clipping.

    Args:
        model: the Transformer (moved to ``device``).
        next_batch: returns the next training :class:`~minitransformer.data.Batch`.
        steps: optimiser steps.
        warmup, lr_factor: the schedule :func:`noam_lr` (peak at step ``warmup``).
        label_smoothing: ε of :func:`label_smoothed_cross_entropy`.
        clip_norm: largest global gradient norm (``None``: no clipping).
        betas: Adam's (β₁, β₂); the paper's are (0.9, 0.98), with ε = 1e-9.
        val_batch: optional batch whose loss is recorded every ``eval_every`` steps.
        keep_best: end with the weights of the lowest validation loss (needs ``val_batch``),
            so that a late spike of the loss cannot spoil the final model.
        callback: called as ``callback(step, model)`` after every optimiser step.
        device: where to train (default: the model's device).
        progress: show a ``tqdm`` progress bar.

    Returns:
        the :class:`History`.
    """
    from tqdm.auto import tqdm

    device = torch.device(device) if device is not None else next(model.parameters()).device
    model.to(device)
    pad_id = model.config.pad_id
    optimizer = torch.optim.Adam(model.parameters(), lr=1.0, betas=betas, eps=1e-9)
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, NoamSchedule(model.config.d_model, warmup, lr_factor))
    history = History()
    val_batch = val_batch.to(device) if val_batch is not None else None
    if keep_best and val_batch is None:
        raise error("keep_best necesita un val_batch", "keep_best needs a val_batch")
    best_loss, best_state = math.inf, None
    start, cpu_start = time.perf_counter(), time.process_time()
    desc = desc if desc is not None else say("entrenamiento", "training")
    bar = tqdm(range(1, steps + 1), desc=desc, disable=not progress, mininterval=1.0)
    for step in bar:
        model.train()
        batch = next_batch().to(device)
        logits = model(batch.src, batch.tgt_in)  # (B, T, V)
        loss = label_smoothed_cross_entropy(logits, batch.tgt_out, label_smoothing, pad_id)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        norm = torch.nn.utils.clip_grad_norm_(model.parameters(), clip_norm if clip_norm else math.inf)
        history.lr.append(optimizer.param_groups[0]["lr"])
        optimizer.step()
        schedule.step()
        history.loss.append(loss.item())
        history.grad_norm.append(float(norm))
        if val_batch is not None and (step % eval_every == 0 or step == steps):
            history.val_step.append(step)
            history.val_loss.append(validation_loss(model, val_batch))
            if keep_best and history.val_loss[-1] < best_loss:
                best_loss, history.best_step = history.val_loss[-1], step
                best_state = {k: v.detach().clone() for k, v in model.state_dict().items()}
        if callback is not None:
            callback(step, model)
        if step % 50 == 0 or step == steps:
            bar.set_postfix(loss=f"{history.loss[-1]:.3f}", refresh=False)
    bar.close()
    if best_state is not None:
        model.load_state_dict(best_state)
    model.eval()
    history.seconds = time.perf_counter() - start
    history.cpu_seconds = time.process_time() - cpu_start
    return history


@torch.no_grad()
def validation_loss(model: Transformer, batch: Batch) -> float:
    """Plain (unsmoothed) cross-entropy of a batch, in eval mode."""
    was_training = model.training
    model.eval()
    logits = model(batch.src, batch.tgt_in)  # (B, T, V)
    loss = F.cross_entropy(logits.flatten(0, 1), batch.tgt_out.flatten(), ignore_index=model.config.pad_id)
    model.train(was_training)
    return loss.item()


# ---------------------------------------------------------------------------------------
# Checkpoints
# ---------------------------------------------------------------------------------------

CHECKPOINT_FORMAT = "minitransformer-checkpoint-1"


@dataclass
class TrainedModel:
    """A trained translator: the model, its vocabularies and how it was made."""

    model: Transformer
    src_vocab: Vocab
    tgt_vocab: Vocab
    history: History | None = None
    meta: dict = field(default_factory=dict)  # primitive values only (recipe, seed, …)
    data: NumberTranslation | None = None  # the task, when it is the number translator
    snapshots: dict[int, dict[str, Tensor]] = field(default_factory=dict)  # step -> weights (not saved)

    def snapshot(self, step: int) -> "TrainedModel":
        """The same translator with the weights it had after ``step`` (see ``snapshots``)."""
        model = Transformer(self.model.config).to(next(self.model.parameters()).device)
        model.load_state_dict(self.snapshots[step])
        return TrainedModel(model.eval(), self.src_vocab, self.tgt_vocab, None, dict(self.meta), self.data)

    def translate(self, texts: Sequence[str], beam_size: int = 1) -> list[str]:
        """Translate sentences (words separated by spaces)."""
        from .decoding import translate

        return translate(self.model, texts, self.src_vocab, self.tgt_vocab, beam_size)


def save_checkpoint(path: str | os.PathLike, trained: TrainedModel) -> Path:
    """Write the state dict, the config, the vocabularies, the history and ``meta`` to ``path``.

    Only tensors and primitive containers are stored, so :func:`load_checkpoint` can use
    ``torch.load(weights_only=True)``. The file is written to a temporary file in the same
    folder and then renamed over ``path`` (``os.replace``): a reader never sees half a file.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    payload = {
        "format": CHECKPOINT_FORMAT,
        "config": dataclasses.asdict(trained.model.config),
        "state_dict": {k: v.detach().cpu() for k, v in trained.model.state_dict().items()},
        "src_vocab": trained.src_vocab.to_list(),
        "tgt_vocab": trained.tgt_vocab.to_list(),
        "history": trained.history.to_dict() if trained.history is not None else None,
        "meta": dict(trained.meta),
    }
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            torch.save(payload, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    return path


def load_checkpoint(path: str | os.PathLike, device: torch.device | str | None = None) -> TrainedModel:
    """Read a checkpoint written by :func:`save_checkpoint` (with ``weights_only=True``).

    Returns a :class:`TrainedModel` in eval mode on ``device`` (default: the GPU when there
    is one). For the number translator, ``data`` is the task rebuilt from its seed.
    """
    payload = torch.load(path, map_location="cpu", weights_only=True)
    if payload.get("format") != CHECKPOINT_FORMAT:
        raise ValueError(f"{path} is not a {CHECKPOINT_FORMAT} file")
    model = Transformer(TransformerConfig(**payload["config"]))
    model.load_state_dict(payload["state_dict"])
    model.to(device if device is not None else default_device()).eval()
    meta = payload["meta"]
    history = History.from_dict(payload["history"]) if payload["history"] is not None else None
    data = NumberTranslation(meta["seed"]) if meta.get("task") == "number_translation" else None
    return TrainedModel(model, Vocab.from_list(payload["src_vocab"]), Vocab.from_list(payload["tgt_vocab"]),
                        history, meta, data)


# ---------------------------------------------------------------------------------------
# The course's number translator
# ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class NumberRecipe:
    """Model and training settings of the Spanish → English number translator."""

    d_model: int = 64  # small: the whole training takes seconds on a CPU
    n_heads: int = 4
    d_ff: int = 256
    n_layers: int = 2  # encoder and decoder layers
    dropout: float = 0.0  # fresh numbers at every step: nothing to overfit
    steps: int = 1000
    batch_size: int = 64
    warmup: int = 200  # steps of linear warm-up in noam_lr
    lr_factor: float = 0.5  # peak learning rate 0.5 · 64^-0.5 · 200^-0.5 ≈ 0.0044
    label_smoothing: float = 0.1
    clip_norm: float = 1.0
    eval_every: int = 50  # validation loss every 50 steps; the model keeps its best weights
    task_version: int = 2  # NumberTranslation's sampling; a change makes old checkpoints retrain

    def config(self, data: NumberTranslation) -> TransformerConfig:
        return TransformerConfig(
            src_vocab_size=len(data.src_vocab), tgt_vocab_size=len(data.tgt_vocab),
            d_model=self.d_model, n_heads=self.n_heads, d_ff=self.d_ff, n_layers=self.n_layers,
            dropout=self.dropout, max_len=64, pad_id=data.src_vocab.pad_id,
        )


NUMBER_RECIPE = NumberRecipe()


def train_number_translator(
    seed: int | None = None,
    device: torch.device | str | None = None,
    progress: bool = True,
    recipe: NumberRecipe = NUMBER_RECIPE,
    snapshot_steps: Sequence[int] = (),
) -> TrainedModel:
    """Train the number translator from scratch under ``seed`` (default: the seed in force,
    :func:`runtime.seed`).

    The same seed, device kind, CPU kernels and thread count give the same model bit for bit;
    other set-ups give a model that behaves the same with slightly different numbers. The
    model ends with the weights of its lowest validation loss (``keep_best``).

    Args:
        snapshot_steps: steps whose weights are kept (on the CPU) in ``snapshots``, to look
            at the model on its way.

    Returns a :class:`TrainedModel` with ``data`` (the task and its splits) and ``history``.
    """
    seed = runtime.seed() if seed is None else seed
    device = torch.device(device) if device is not None else default_device()
    snapshots: dict[int, dict[str, Tensor]] = {}

    def keep_snapshot(step: int, model: Transformer) -> None:
        if step in snapshot_steps:
            snapshots[step] = {k: v.detach().cpu().clone() for k, v in model.state_dict().items()}

    set_seed(seed)
    data = NumberTranslation(seed)
    model = Transformer(recipe.config(data)).to(device)
    history = train(
        model, lambda: data.train_batch(recipe.batch_size), recipe.steps,
        warmup=recipe.warmup, lr_factor=recipe.lr_factor,
        label_smoothing=recipe.label_smoothing, clip_norm=recipe.clip_norm,
        val_batch=data.batch(data.splits["val"]), eval_every=recipe.eval_every, keep_best=True,
        callback=keep_snapshot if snapshot_steps else None, device=device, progress=progress,
        desc="es → en",
    )
    meta = {"task": "number_translation", "seed": seed, "recipe": dataclasses.asdict(recipe)}
    return TrainedModel(model, data.src_vocab, data.tgt_vocab, history, meta, data, snapshots)


def default_checkpoint_path(start: str | os.PathLike | None = None) -> Path:
    """``checkpoints/number_translator.pt`` in the repository that holds ``start`` (default:
    the working directory, e.g. ``notebooks/es``), or under ``start`` outside a repository."""
    start = Path(start or Path.cwd()).resolve()
    for folder in (start, *start.parents):
        if (folder / "pyproject.toml").exists() and (folder / "notebooks").is_dir():
            return folder / "checkpoints" / "number_translator.pt"
    return start / "checkpoints" / "number_translator.pt"


def load_or_train_number_translator(
    path: str | os.PathLike | None = None,
    seed: int | None = None,
    device: torch.device | str | None = None,
    progress: bool = True,
    recipe: NumberRecipe = NUMBER_RECIPE,
) -> TrainedModel:
    """Load the checkpoint at ``path`` if it holds this seed and recipe; otherwise train
    (deterministically) and save it there. ``path`` defaults to :func:`default_checkpoint_path`."""
    seed = runtime.seed() if seed is None else seed
    path = Path(path) if path is not None else default_checkpoint_path()
    if path.exists():
        try:
            trained = load_checkpoint(path, device)
        except Exception:  # an unreadable or older file: train again
            trained = None
        if (trained is not None and trained.meta.get("seed") == seed
                and trained.meta.get("recipe") == dataclasses.asdict(recipe)):
            return trained
    trained = train_number_translator(seed, device, progress, recipe)
    save_checkpoint(path, trained)
    return trained


# ---------------------------------------------------------------------------------------
# Evaluation and the random-target control
# ---------------------------------------------------------------------------------------


@dataclass
class NumberResults:
    """Translations of held-out numbers and whether each one is exactly right."""

    numbers: list[int]
    predictions: list[str]
    references: list[str]
    scores: list[float]  # model score log p(prediction | source)

    @property
    def correct(self) -> list[bool]:
        return [p == r for p, r in zip(self.predictions, self.references)]

    @property
    def accuracy(self) -> float:
        """Exact-match accuracy: the fraction of numbers translated word for word right."""
        return sum(self.correct) / len(self.numbers)

    def mistakes(self) -> list[tuple[int, str, str, str]]:
        """(number, Spanish, predicted, expected) for every wrong translation."""
        return [(n, spell_number(n, "es"), p, r)
                for n, p, r, ok in zip(self.numbers, self.predictions, self.references, self.correct) if not ok]


def evaluate_numbers(
    trained: TrainedModel, numbers: Sequence[int], beam_size: int = 1, batch_size: int = 1000
) -> NumberResults:
    """Translate ``numbers`` (greedy when ``beam_size`` is 1) and compare with the true spelling."""
    model, data = trained.model, trained.data or NumberTranslation(trained.meta.get("seed", 0))
    device = next(model.parameters()).device
    preds, scores = [], []
    for i in range(0, len(numbers), batch_size):
        src = data.source(numbers[i : i + batch_size]).to(device)  # (B, S)
        bos, eos = trained.tgt_vocab.bos_id, trained.tgt_vocab.eos_id
        out = greedy_decode(model, src, bos, eos) if beam_size == 1 else beam_search(model, src, bos, eos, beam_size)
        preds += [trained.tgt_vocab.decode(row) for row in out.tokens.cpu()]
        scores += out.scores.cpu().tolist()
    return NumberResults(list(numbers), preds, [spell_number(n, "en") for n in numbers], scores)


def random_target_batches(data: NumberTranslation, batch_size: int, rng: torch.Generator) -> Callable[[], Batch]:
    """Batches whose Spanish sources are real but whose targets are random words: every
    target token is drawn uniformly from the target vocabulary (without ``<pad>``), fresh
    at every step, with the length of the true target. There is nothing to learn: the
    best possible prediction is uniform, with loss ln(V - 1)."""
    V = len(data.tgt_vocab)

    def next_batch() -> Batch:
        batch = data.train_batch(batch_size)
        random_ids = torch.randint(1, V, batch.tgt_out.shape, generator=rng)  # (B, T)
        real = batch.tgt_out != data.tgt_vocab.pad_id  # (B, T)
        tgt_out = torch.where(real, random_ids, batch.tgt_out)  # (B, T)
        tgt_in = torch.cat([batch.tgt_in[:, :1], tgt_out[:, :-1]], dim=1)  # (B, T)
        return Batch(batch.src, tgt_in.masked_fill(~real, data.tgt_vocab.pad_id), tgt_out)

    return next_batch
