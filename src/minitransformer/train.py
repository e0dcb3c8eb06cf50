"""Training: the warm-up learning-rate schedule, label smoothing, the training loop and
checkpoints. One loop trains every model: the translator by default, and any model through its
hooks (:func:`train_gpt`, next-token training of a decoder-only model with :func:`lm_loss`).
(The course's recipes: ``course.translator``, ``course.counting``, ``course.ablation``.)

Letters: B batch, T target length, V target vocabulary.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import os
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .data import Batch, NumberTranslation, Vocab
from .i18n import decimal, decimal_commas, error, say
from .model import Transformer, TransformerConfig
from .runtime import default_device, eval_mode

__all__ = [
    "noam_lr",
    "NoamSchedule",
    "label_smoothed_cross_entropy",
    "History",
    "train",
    "validation_loss",
    "lm_loss",
    "train_gpt",
    "TrainedModel",
    "save_checkpoint",
    "load_checkpoint",
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
        raise error(
            "un vocabulario de un solo token no tiene nada que predecir",
            "a vocabulary of one token has nothing to predict",
        )
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

    loss: list[float] = field(default_factory=list)  # training loss (label-smoothed by default)
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
    def from_dict(cls, d: dict) -> History:
        return cls(**d)


def train(
    model: nn.Module,
    next_batch: Callable[[], Batch | Tensor],
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
    callback: Callable[[int, nn.Module], None] | None = None,
    device: torch.device | str | None = None,
    progress: bool = True,
    desc: str | None = None,
    loss_fn: Callable[[nn.Module, Batch | Tensor], Tensor] | None = None,
    make_optimizer: Callable[[Iterator[nn.Parameter]], torch.optim.Optimizer] | None = None,
    schedule: Callable[[int], float] | None = None,
) -> History:
    """Train ``model`` with Adam, the warm-up schedule, label smoothing and gradient clipping.

    Args:
        model: the Transformer, or any model ``loss_fn`` knows (moved to ``device``).
        next_batch: returns the next training :class:`~minitransformer.data.Batch` (or
            whatever ``loss_fn`` takes, with a ``.to(device)``).
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

    Hooks, to train another model (:func:`train_gpt`) with the same loop:
        loss_fn: ``loss_fn(model, batch)`` -> the scalar training loss (default: the
            translator's label-smoothed loss of ``batch.tgt_out`` given ``batch.src, batch.tgt_in``).
        make_optimizer: ``make_optimizer(parameters)`` -> the optimiser (default: Adam with ``lr=1.0``).
        schedule: multiplier of the optimiser's learning rate at each step, counted from 0
            (default: :class:`NoamSchedule`, which with ``lr=1.0`` is :func:`noam_lr` itself).

    Returns:
        the :class:`History`.
    """
    device = torch.device(device) if device is not None else next(model.parameters()).device
    model.to(device)

    def translator_loss(model: nn.Module, batch: Batch) -> Tensor:
        logits = model(batch.src, batch.tgt_in)  # (B, T, V)
        return label_smoothed_cross_entropy(logits, batch.tgt_out, label_smoothing, model.config.pad_id)

    def adam(parameters: Iterator[nn.Parameter]) -> torch.optim.Optimizer:
        # foreach: one call per step for all the tensors, the same numbers as one call per tensor
        return torch.optim.Adam(parameters, lr=1.0, betas=betas, eps=1e-9, foreach=True)

    loss_fn = loss_fn or translator_loss
    optimizer = (make_optimizer or adam)(model.parameters())
    schedule = schedule or NoamSchedule(model.config.d_model, warmup, lr_factor)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, schedule)
    history = History()
    val_batch = val_batch.to(device) if val_batch is not None else None
    if keep_best and val_batch is None:
        raise error("keep_best necesita un val_batch", "keep_best needs a val_batch")
    best_loss, best_state = math.inf, None
    start, cpu_start = time.perf_counter(), time.process_time()
    bar = _ProgressBar(steps, desc if desc is not None else say("entrenamiento", "training"), progress)
    for step in bar:
        model.train()
        loss = loss_fn(model, next_batch().to(device))
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        norm = torch.nn.utils.clip_grad_norm_(model.parameters(), clip_norm if clip_norm else math.inf)
        history.lr.append(optimizer.param_groups[0]["lr"])
        optimizer.step()
        scheduler.step()
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
            bar.set_postfix_str(f"{say('pérdida', 'loss')}={decimal(history.loss[-1], 3)}")
    bar.finish()
    if best_state is not None:
        model.load_state_dict(best_state)
    model.eval()
    history.seconds = time.perf_counter() - start
    history.cpu_seconds = time.process_time() - cpu_start
    return history


class _ProgressBar:
    """A ``tqdm`` bar over the steps 1..``steps`` (a widget in a notebook, text elsewhere).

    In a notebook the widget is shown with a display id and shown again, finished, by
    :meth:`finish`: a saved notebook then keeps the bar at 100 % with its last loss, not the
    empty bar it was drawn with. The bar shows no rate (``it/s``, with its decimal point).
    """

    FORMAT = "{l_bar}{bar}| {n_fmt}/{total_fmt} [{elapsed}<{remaining}{postfix}]"

    def __init__(self, steps: int, desc: str, enabled: bool):
        from tqdm.auto import tqdm

        widget = enabled and any(c.__module__ == "tqdm.notebook" for c in tqdm.__mro__)
        extra = {"display": False} if widget else {}
        self.bar = tqdm(
            range(1, steps + 1), desc=desc, disable=not enabled, mininterval=1.0, bar_format=self.FORMAT, **extra
        )
        self.handle = None
        if widget:
            from IPython.display import display

            self.handle = display(self.bar.container, display_id=True)

    def __iter__(self) -> Iterator[int]:
        return iter(self.bar)

    def set_postfix_str(self, text: str) -> None:
        self.bar.set_postfix_str(text, refresh=False)

    def finish(self) -> None:
        self.bar.close()
        if self.handle is not None:  # the same widget, with the finished bar as its text
            bundle = getattr(self.bar.container, "_repr_mimebundle_", dict)()
            self.handle.update({**bundle, "text/plain": str(self.bar)}, raw=True)


class LiveCurve:
    """Curves redrawn while a model trains: in a notebook one figure, updated in place at every
    :meth:`update` and kept at its last drawing by :meth:`finish`; anywhere else (or disabled) nothing.

    The figure goes out as a PNG alone, without a text version: a saved notebook keeps the last
    drawing, and a regression check that compares text finds nothing in it that timing could change.

    Args:
        enabled: draw at all.
        labels: the curves' keys and their legends, in drawing order.
        ylabel: the vertical axis's label.
        steps: the last step, the horizontal axis's end.
    """

    def __init__(self, enabled: bool, labels: dict[str, str], ylabel: str, steps: int):
        self.labels, self.ylabel, self.steps = labels, ylabel, steps
        self.points: dict[str, tuple[list[int], list[float]]] = {key: ([], []) for key in labels}
        self.handle = None
        if enabled:
            from IPython import get_ipython

            shell = get_ipython()
            self.enabled = shell is not None and type(shell).__name__ == "ZMQInteractiveShell"
        else:
            self.enabled = False

    def update(self, step: int, values: dict[str, float]) -> None:
        for key, value in values.items():
            self.points[key][0].append(step)
            self.points[key][1].append(value)
        if self.enabled:
            self._draw()

    def figure(self):
        """The figure as it stands: every curve so far, its last value in the legend, the numbers written the
        package's language's way (3,5 in Spanish)."""
        import matplotlib.pyplot as plt
        from matplotlib.ticker import FuncFormatter

        fig, ax = plt.subplots(figsize=(8, 3.6))
        for key, label in self.labels.items():
            x, y = self.points[key]
            if y:
                ax.plot(x, y, marker="o", markersize=3, label=f"{label}: {decimal(y[-1], 2)}")
        ax.set_xlim(0, self.steps)
        ax.set_xlabel(say("paso", "step"))
        ax.set_ylabel(self.ylabel)
        ax.grid(alpha=0.3)
        ax.legend(loc="upper right")
        ax.yaxis.set_major_formatter(FuncFormatter(lambda value, _: decimal_commas(f"{value:g}")))
        fig.tight_layout()
        return fig

    def _draw(self) -> None:
        import io

        import matplotlib.pyplot as plt
        from IPython.display import display

        fig = self.figure()
        buffer = io.BytesIO()
        fig.savefig(buffer, format="png", dpi=80)
        plt.close(fig)
        bundle = {"image/png": buffer.getvalue()}
        if self.handle is None:
            self.handle = display(bundle, raw=True, display_id=True)
        else:
            self.handle.update(bundle, raw=True)

    def finish(self) -> None:
        """Nothing more to draw: the figure stays as it was last drawn."""
        self.handle = None


@torch.no_grad()
def validation_loss(model: Transformer, batch: Batch) -> float:
    """Plain (unsmoothed) cross-entropy of a batch, in eval mode."""
    with eval_mode(model):
        logits = model(batch.src, batch.tgt_in)  # (B, T, V)
    return F.cross_entropy(logits.flatten(0, 1), batch.tgt_out.flatten(), ignore_index=model.config.pad_id).item()


# ---------------------------------------------------------------------------------------
# Language models: next-token prediction on the same loop
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
    callback: Callable[[int, nn.Module], None] | None = None,
) -> list[float]:
    """Train a language model on next-token prediction.

    Args:
        model: maps tokens (B, T) to logits (B, T, V) and has ``config.pad_id``.
        next_batch: returns the next (B, T) batch of padded lines.
        steps: optimiser steps (AdamW; linear warm-up for ``warmup`` steps, then cosine
            decay to a tenth of ``lr``).
        callback: called as ``callback(step, model)`` after every optimiser step (as :func:`train`'s).

    Returns:
        the training loss of every step.
    """

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
        callback=callback,
        device=device,
        progress=progress,
    )
    return history.loss


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
    snapshots: dict[int, dict[str, Tensor]] = field(default_factory=dict)  # step -> weights

    def snapshot(self, step: int) -> TrainedModel:
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
        "snapshots": {int(k): {n: t.detach().cpu() for n, t in v.items()} for k, v in trained.snapshots.items()},
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
        raise error(f"{path} no es un archivo {CHECKPOINT_FORMAT}", f"{path} is not a {CHECKPOINT_FORMAT} file")
    model = Transformer(TransformerConfig(**payload["config"]))
    model.load_state_dict(payload["state_dict"])
    model.to(device if device is not None else default_device()).eval()
    meta = payload["meta"]
    history = History.from_dict(payload["history"]) if payload["history"] is not None else None
    data = NumberTranslation(meta["seed"]) if meta.get("task") == "number_translation" else None
    return TrainedModel(
        model,
        Vocab.from_list(payload["src_vocab"]),
        Vocab.from_list(payload["tgt_vocab"]),
        history,
        meta,
        data,
        dict(payload.get("snapshots", {})),
    )
