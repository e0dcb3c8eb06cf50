"""Figures about training: the learning-rate schedule, loss curves, accuracy by length.

The measurements they draw live in :mod:`minitransformer.analysis`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.figure import Figure

from ..analysis import accuracy_by_digits
from ..i18n import tr
from .style import localise, to_numpy

__all__ = [
    "plot_lr_schedule",
    "plot_losses",
    "plot_accuracy_by_digits",
]


def plot_lr_schedule(
    curves: Mapping[str, Sequence[float]],
    lang: str = "es",
    peaks: Mapping[str, int] | None = None,
    title: str | None = None,
) -> Figure:
    """Learning rate against the step, one line per schedule.

    Args:
        curves: label -> learning rate at steps 1, 2, … (a list or a 1-D tensor).
        peaks: label -> step of the peak (the end of the warm-up), marked with a dot.
    """
    fig, ax = plt.subplots(figsize=(8, 4.5), layout="constrained")
    for label, lrs in curves.items():
        y = to_numpy(lrs)
        steps = np.arange(1, len(y) + 1)
        (line,) = ax.plot(steps, y, label=label, lw=2)
        if peaks and label in peaks:
            p = peaks[label]
            ax.plot([p], [y[p - 1]], "o", color=line.get_color(), ms=7)
    ax.set_xlabel(tr(lang, "paso de entrenamiento", "training step"))
    ax.set_ylabel(tr(lang, "tasa de aprendizaje", "learning rate"))
    ax.ticklabel_format(axis="y", style="sci", scilimits=(-3, 3))
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    ax.legend()
    ax.set_title(title if title is not None else tr(lang, "Calentamiento y decaimiento (warm-up)", "Warm-up and decay"))
    return localise(fig, lang)


def _running_mean(y: np.ndarray, window: int) -> np.ndarray:
    window = max(1, min(window, len(y)))
    kernel = np.ones(window) / window
    return np.convolve(y, kernel, mode="valid")


def plot_losses(
    curves: Mapping[str, Sequence[float]],
    lang: str = "es",
    val: Mapping[str, tuple[Sequence[int], Sequence[float]]] | None = None,
    hlines: Mapping[str, float] | None = None,
    smooth: int = 25,
    log_y: bool = False,
    title: str | None = None,
) -> Figure:
    """Training losses per step (faint) with their running mean over ``smooth`` steps.

    Args:
        curves: label -> loss at steps 1, 2, ….
        val: label -> (steps, losses) measured on held-out data, drawn as dots.
        hlines: label -> a reference value drawn as a dashed horizontal line (e.g. ln V).
    """
    fig, ax = plt.subplots(figsize=(8, 4.5), layout="constrained")
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for i, (label, losses) in enumerate(curves.items()):
        y, c = to_numpy(losses), colors[i % len(colors)]
        steps = np.arange(1, len(y) + 1)
        ax.plot(steps, y, color=c, alpha=0.25, lw=1)
        m = _running_mean(y, smooth)
        ax.plot(np.arange(len(y) - len(m) + 1, len(y) + 1), m, color=c, lw=2, label=label)
    for j, (label, (steps, losses)) in enumerate((val or {}).items()):
        c = colors[(len(curves) + j) % len(colors)]
        ax.plot(list(steps), to_numpy(losses), "o-", color=c, ms=4, lw=1.2, label=label)
    for label, value in (hlines or {}).items():
        ax.axhline(value, ls="--", color="0.35", lw=1.5)
        ax.annotate(
            label,
            (1.0, value),
            xycoords=("axes fraction", "data"),
            xytext=(-4, -4),
            textcoords="offset points",
            ha="right",
            va="top",
            color="0.25",
        )
    if log_y:
        ax.set_yscale("log")
    else:
        ax.set_ylim(bottom=0)
    ax.set_xlabel(tr(lang, "paso de entrenamiento", "training step"))
    ax.set_ylabel(tr(lang, "pérdida (entropía cruzada)", "loss (cross-entropy)"))
    ax.grid(alpha=0.3)
    ax.legend(loc="center right")
    ax.set_title(title if title is not None else tr(lang, "Curva de pérdida", "Loss curve"))
    return localise(fig, lang)


def plot_accuracy_by_digits(
    results: Mapping[str, tuple[Sequence[int], Sequence[bool]]], lang: str = "es", title: str | None = None
) -> Figure:
    """Exact-match accuracy per number of digits, one group of bars per label.

    Args:
        results: label -> (numbers, correct flags), e.g. {"greedy": (...), "beam": (...)}.
    """
    labels = list(results)
    fig, ax = plt.subplots(figsize=(9 + 0.5 * max(0, len(labels) - 2), 4.5), layout="constrained")
    width = 0.8 / max(1, len(labels))
    digits: list[int] = []
    for i, label in enumerate(labels):
        table = accuracy_by_digits(*results[label])
        digits = list(table)
        acc = [100 * r / t for r, t in table.values()]
        x = np.arange(len(digits)) + (i - (len(labels) - 1) / 2) * width
        bars = ax.bar(x, acc, width, label=label)
        texts = [f"{a:.1f}".removesuffix(".0") for a in acc]  # localise below writes 12,5 in Spanish
        ax.bar_label(bars, labels=texts, fontsize=10, padding=3, rotation=90 if len(labels) > 2 else 0)
    ax.set_xticks(range(len(digits)), labels=[str(d) for d in digits])
    ax.set_xlabel(tr(lang, "cifras del número", "digits in the number"))
    ax.set_ylabel(tr(lang, "acierto exacto (%)", "exact match (%)"))
    ax.set_ylim(0, 125 if len(labels) > 2 else 112)
    ax.set_yticks(range(0, 101, 20))
    fig.legend(loc="outside right upper")
    ax.set_title(
        title if title is not None else tr(lang, "Acierto por longitud del número", "Accuracy by length of the number")
    )
    return localise(fig, lang)
