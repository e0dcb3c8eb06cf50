"""The course's Spanish → English number translator: its recipe, training, the reference
run shipped in the package, and its evaluation.

Letters: B batch, T target length, V target vocabulary.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import Tensor

from .. import runtime
from ..data import Batch, NumberTranslation, spell_number
from ..decoding import beam_search, greedy_decode
from ..model import Transformer, TransformerConfig
from ..runtime import default_device, set_seed
from ..train import TrainedModel, load_checkpoint, save_checkpoint, train

__all__ = [
    "NumberRecipe",
    "NUMBER_RECIPE",
    "train_number_translator",
    "default_checkpoint_path",
    "load_or_train_number_translator",
    "REFERENCE_FILE",
    "REFERENCE_SNAPSHOTS",
    "reference_translator",
    "NumberResults",
    "evaluate_numbers",
    "random_target_batches",
]

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
    steps: int = 450
    batch_size: int = 64
    warmup: int = 100  # steps of linear warm-up in noam_lr
    lr_factor: float = 0.5  # peak learning rate 0.5 · 64^-0.5 · 100^-0.5 ≈ 0.0063
    label_smoothing: float = 0.1
    clip_norm: float = 1.0
    eval_every: int = 50  # validation loss every 50 steps; the model keeps its best weights
    task_version: int = 2  # NumberTranslation's sampling; a change makes old checkpoints retrain

    def config(self, data: NumberTranslation) -> TransformerConfig:
        return TransformerConfig(
            src_vocab_size=len(data.src_vocab),
            tgt_vocab_size=len(data.tgt_vocab),
            d_model=self.d_model,
            n_heads=self.n_heads,
            d_ff=self.d_ff,
            n_layers=self.n_layers,
            dropout=self.dropout,
            max_len=64,
            pad_id=data.src_vocab.pad_id,
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
        model,
        lambda: data.train_batch(recipe.batch_size),
        recipe.steps,
        warmup=recipe.warmup,
        lr_factor=recipe.lr_factor,
        label_smoothing=recipe.label_smoothing,
        clip_norm=recipe.clip_norm,
        val_batch=data.batch(data.splits["val"]),
        eval_every=recipe.eval_every,
        keep_best=True,
        callback=keep_snapshot if snapshot_steps else None,
        device=device,
        progress=progress,
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
        if (
            trained is not None
            and trained.meta.get("seed") == seed
            and trained.meta.get("recipe") == dataclasses.asdict(recipe)
        ):
            return trained
    trained = train_number_translator(seed, device, progress, recipe)
    save_checkpoint(path, trained)
    return trained


# The reference run: 07's recipe trained with seed 0 on 2 CPU threads, shipped inside
# the package with its snapshot after 100 steps. Notebooks analyse it when a lesson
# needs one run's exact numbers; the student's own run, on another machine or seed, behaves
# the same but its numbers differ. Rebuilt by tools/make_reference.py.
REFERENCE_FILE = "number_translator_seed0.pt"
REFERENCE_SNAPSHOTS = (100,)


def reference_translator(device: torch.device | str | None = None) -> TrainedModel:
    """The course's reference number translator (see ``REFERENCE_FILE``), with its snapshots."""
    from importlib.resources import as_file, files

    with as_file(files("minitransformer") / "reference_runs" / REFERENCE_FILE) as path:
        return load_checkpoint(path, device)


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
        return [
            (n, spell_number(n, "es"), p, r)
            for n, p, r, ok in zip(self.numbers, self.predictions, self.references, self.correct)
            if not ok
        ]


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
