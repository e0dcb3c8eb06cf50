"""Figures of the modern Transformer: RoPE's scores, the cost of attention, the ablation."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.figure import Figure
from matplotlib.ticker import NullFormatter

from ..i18n import check_lang, tr
from .style import number_ticks, to_numpy

__all__ = ["plot_rope_scores", "plot_attention_cost", "plot_ablation"]


def plot_rope_scores(scores, lang: str = "es", title: str | None = None) -> Figure:
    """q_m · k_n for every query position m (rows) and key position n (columns): scores (T, T)."""
    check_lang(lang)
    m = to_numpy(scores)
    fig, ax = plt.subplots(figsize=(6.5, 5.5), layout="constrained")
    vmax = float(np.abs(m).max())
    im = ax.imshow(m, cmap="RdBu_r", vmin=-vmax, vmax=vmax, interpolation="nearest")
    ax.set_xlabel(tr(lang, "posición n de la clave", "key position n"))
    ax.set_ylabel(tr(lang, "posición m de la consulta", "query position m"))
    ax.set_title(
        title
        if title is not None
        else tr(
            lang, "RoPE: $q_m \\cdot k_n$ solo depende de $n - m$", "RoPE: $q_m \\cdot k_n$ depends only on $n - m$"
        )
    )
    ax.spines[:].set_visible(False)
    cbar = fig.colorbar(im, ax=ax, shrink=0.85, label=tr(lang, "puntuación", "score"))
    cbar.ax.yaxis.set_major_formatter(number_ticks(lang))
    return fig


def plot_attention_cost(
    lengths: Sequence[int],
    times: Mapping[str, Sequence[float]],
    memory: Mapping[str, Sequence[float]],
    lang: str = "es",
) -> Figure:
    """Time (ms) and memory (MiB) of attention against the sequence length, log-log.

    Args:
        lengths: the lengths T measured.
        times: label -> milliseconds per call at each length.
        memory: label -> MiB at each length.
    A dashed line of slope 2 (∝ T²) goes through the first time curve's last point.
    """
    check_lang(lang)
    T = np.asarray(lengths, dtype=float)
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.8), layout="constrained")
    panels = [
        (axes[0], times, tr(lang, "tiempo por llamada (ms)", "time per call (ms)"), tr(lang, "Tiempo", "Time")),
        (axes[1], memory, tr(lang, "memoria (MiB)", "memory (MiB)"), tr(lang, "Memoria", "Memory")),
    ]
    for ax, curves, ylabel, title in panels:
        for label, ys in curves.items():
            ax.plot(T, to_numpy(ys), "o-", lw=2, label=label)
        if curves is times:
            first = to_numpy(next(iter(curves.values())))
            ax.plot(T, first[-1] * (T / T[-1]) ** 2, "--", color="grey", label="∝ $T^2$")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xticks(T, [str(int(t)) for t in T])
        ax.yaxis.set_major_formatter(number_ticks(lang))
        ax.set_xlabel(tr(lang, "longitud de la secuencia T", "sequence length T"))
        ax.set_ylabel(ylabel)
        ax.set_title(title)
        ax.grid(alpha=0.3, which="both")
        ax.legend()
    return fig


def plot_ablation(
    results: Mapping[str, Sequence[float]], labels: Mapping[str, str], lang: str = "es", title: str | None = None
) -> Figure:
    """Validation loss per variant: each seed as a dot, the mean as a bar.

    Args:
        results: variant name -> validation loss per seed.
        labels: variant name -> the label to show.
    """
    check_lang(lang)
    names = list(results)
    fig, ax = plt.subplots(figsize=(9, 0.55 * len(names) + 1.5), layout="constrained")
    y = np.arange(len(names))[::-1]
    means = [float(np.mean(results[n])) for n in names]
    ax.barh(y, means, color="#9ecae1", height=0.6)
    for yi, n in zip(y, names):
        values = to_numpy(results[n])
        ax.plot(values, np.full(len(values), yi), "o", color="#08519c", ms=5)
    ax.set_yticks(y, [labels.get(n, n) for n in names])
    ax.set_xscale("log")
    ticks = [
        t for t in (0.25, 0.5, 1, 2, 4, 8, 16, 32) if min(means) / 2 <= t <= 2 * max(max(results[n]) for n in names)
    ]
    ax.set_xticks(ticks)
    ax.xaxis.set_major_formatter(number_ticks(lang))
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.set_xlabel(
        tr(
            lang,
            "pérdida de validación (escala logarítmica; puntos: semillas)",
            "validation loss (log scale; dots: seeds)",
        )
    )
    ax.set_title(
        title if title is not None else tr(lang, "Ablación: un cambio cada vez", "Ablation: one change at a time")
    )
    ax.grid(alpha=0.3, axis="x", which="both")
    return fig
