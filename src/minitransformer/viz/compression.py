"""Figures of a language model measured as a compressor: bits per byte beside the baselines, and what a longer
run buys."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.figure import Figure

from ..i18n import decimal, tr
from .style import localise

__all__ = ["plot_bits_per_byte", "plot_compute_curve"]

_LANG_NAMES = {"es": ("español", "Spanish"), "en": ("inglés", "English")}


def _lang_name(lang: str, which: str) -> str:
    es, en = _LANG_NAMES.get(which, (which, which))
    return tr(lang, es, en)


def plot_bits_per_byte(
    scores: Mapping[str, Mapping[str, float]], lang: str = "es", highlight: str | None = None
) -> Figure:
    """Bits per byte of every method on each language's held-out text: one panel per language, one bar per
    method, best (fewest bits) at the bottom; ``highlight`` names the bar drawn in another colour.

    Args:
        scores: method -> {language: bits per byte}, every method with the same languages.
    """
    langs = list(next(iter(scores.values())))
    fig, axes = plt.subplots(1, len(langs), figsize=(6.2 * len(langs), 0.55 * len(scores) + 1.6), squeeze=False)
    top = max(v for row in scores.values() for v in row.values())
    for ax, which in zip(axes[0], langs):
        order = sorted(scores, key=lambda name: -scores[name][which])  # the best at the bottom
        values = [scores[name][which] for name in order]
        colours = ["tab:orange" if name == highlight else "tab:blue" for name in order]
        ax.barh(np.arange(len(order)), values, color=colours)
        for y, v in enumerate(values):
            ax.text(v + top * 0.01, y, decimal(v, 2, lang), va="center", fontsize=11)
        ax.set_yticks(np.arange(len(order)), order)
        ax.set_xlim(0, top * 1.15)
        ax.set_xlabel(tr(lang, "bits por byte (menos es mejor)", "bits per byte (fewer is better)"))
        ax.set_title(
            tr(lang, f"texto reservado, {_lang_name(lang, which)}", f"held-out text, {_lang_name(lang, which)}")
        )
    fig.tight_layout()
    return localise(fig, lang)


def plot_compute_curve(
    steps: Sequence[int],
    curves: Mapping[str, Sequence[float]],
    levels: Mapping[str, Mapping[str, float]],
    lang: str = "es",
    marker: int | None = None,
) -> Figure:
    """Held-out bits per byte against training steps, one panel per language, with each baseline's level drawn
    across; ``marker`` marks a step (the recipe's length).

    Args:
        steps: the steps measured.
        curves: language -> bits per byte at each of ``steps``.
        levels: baseline -> {language: bits per byte}.
    """
    langs = list(curves)
    fig, axes = plt.subplots(1, len(langs), figsize=(6.2 * len(langs), 4.6), squeeze=False, sharey=True)
    styles = ["--", ":", "-.", (0, (6, 2, 1, 2, 1, 2)), (0, (1, 3))]
    colours = ["tab:gray", "tab:green", "tab:purple", "tab:red", "tab:brown"]
    for ax, which in zip(axes[0], langs):
        ax.plot(steps, curves[which], marker="o", markersize=3, color="tab:orange", label=tr(lang, "modelo", "model"))
        for k, (name, level) in enumerate(levels.items()):
            ax.axhline(
                level[which],
                color=colours[k % len(colours)],
                linestyle=styles[k % len(styles)],
                linewidth=1.4,
                label=name,
            )
        if marker is not None:
            ax.axvline(marker, color="tab:orange", alpha=0.3, linewidth=6)
        ax.set_xlabel(tr(lang, "paso de entrenamiento", "training step"))
        ax.set_title(
            tr(lang, f"texto reservado, {_lang_name(lang, which)}", f"held-out text, {_lang_name(lang, which)}")
        )
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel(tr(lang, "bits por byte", "bits per byte"))
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=len(labels), fontsize=10, frameon=False)
    fig.tight_layout(rect=(0, 0.08, 1, 1))
    return localise(fig, lang)
