"""Figures about generation: next-token distributions under sampling filters, validity
against diversity, and the time per generation step with and without the key-value cache."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.figure import Figure

from ..i18n import decimal, tr
from .style import localise, number_ticks, to_numpy

__all__ = ["plot_next_token", "plot_validity_diversity", "plot_step_times"]


def plot_next_token(
    distributions: Mapping[str, Sequence[float]],
    tokens: Sequence[str],
    lang: str = "es",
    top: int = 12,
    title: str | None = None,
    shade_kept: bool = False,
) -> Figure:
    """Bar charts of next-token distributions side by side, one panel per distribution, each
    drawn in front of the first one (in grey), so that what a knob moves or removes shows.

    Args:
        distributions: label -> probabilities over the vocabulary (V,); the first one is the
            original: it orders the tokens (its ``top`` most likely are shown in every panel)
            and is drawn behind the others.
        tokens: the vocabulary's tokens, in id order.
        shade_kept: in the panels after the first, shade the tokens shown that the distribution
            keeps (probability above 0): the set a filter keeps.
    """
    items = [(label, to_numpy(p)) for label, p in distributions.items()]
    original = items[0][1]
    order = np.argsort(-original, kind="stable")[:top]
    n = len(items)
    cols = min(n, 3)
    rows = (n + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(4.6 * cols, 3.8 * rows), layout="constrained", squeeze=False)
    x = np.arange(len(order))
    highest = max(float(p[order].max()) for _, p in items)
    for i, (ax, (label, p)) in enumerate(zip(axes.flat, items)):
        if i:  # the original behind: a removed token keeps only its grey bar
            ax.bar(x, original[order], color="lightgray", label=items[0][0])
        removed = (p[order] == 0) & (original[order] > 0)
        if i and shade_kept:
            kept_shown = np.flatnonzero(p[order] > 0)
            runs = np.split(kept_shown, np.flatnonzero(np.diff(kept_shown) > 1) + 1)
            for run in runs:  # one band per run of neighbouring kept tokens, behind the bars
                if run.size:
                    ax.axvspan(run[0] - 0.5, run[-1] + 0.5, color="tab:green", alpha=0.12, lw=0, zorder=0)
        ax.bar(x, p[order], width=0.55 if i else 0.8, color="tab:blue", label=tr(lang, "después", "after"))
        ax.plot(x[removed], np.zeros(int(removed.sum())), "x", color="tab:red", ms=7, mew=2)  # removed: a red cross
        ax.set_xticks(x, [tokens[j] for j in order], rotation=60, ha="right", fontsize=10)
        ax.set_ylim(0, 1.15 * highest)
        ax.set_title(label, fontsize=12)
        ax.grid(axis="y", alpha=0.3)
        ax.yaxis.set_major_formatter(number_ticks(lang))
        shown, kept, vocab = p[order].sum(), int((p > 0).sum()), int((original > 0).sum())
        note = tr(lang, f"{top} primeros: {decimal(shown, 2, lang)}", f"top {top}: {decimal(shown, 2, lang)}")
        if kept < vocab:  # a filter: how many tokens it keeps, shown or not
            note += tr(lang, f"\nquedan {kept} de {vocab}", f"\n{kept} of {vocab} kept")
        ax.text(
            0.98,
            0.95,
            note,
            transform=ax.transAxes,
            ha="right",
            va="top",
            fontsize=10,
        )
    for ax in axes.flat[n:]:
        ax.axis("off")
    for ax in axes[:, 0]:
        ax.set_ylabel(tr(lang, "probabilidad", "probability"))
    if n > 1:
        handles, labels = axes.flat[1].get_legend_handles_labels()
        cross = plt.Line2D([], [], color="tab:red", marker="x", ls="", ms=7, mew=2)
        handles, labels = [*handles, cross], [*labels, tr(lang, "quitado por el filtro", "removed by the filter")]
        if shade_kept:
            handles.append(plt.Rectangle((0, 0), 1, 1, color="tab:green", alpha=0.12, lw=0))
            labels.append(tr(lang, "lo que queda", "what is kept"))
        fig.legend(handles, labels, loc="outside lower center", ncols=len(labels), fontsize=11)
    fig.suptitle(
        title if title is not None else tr(lang, "Distribución del siguiente token", "Next-token distribution")
    )
    return localise(fig, lang)


def plot_validity_diversity(
    results: Mapping[str, tuple[float, float]],
    lang: str = "es",
    title: str | None = None,
    ceiling: float | None = None,
) -> Figure:
    """One point per sampling setting: share of valid lines against share of distinct lines.

    Args:
        results: label -> (validity, diversity), both in [0, 1].
        ceiling: the share of distinct lines the corpus itself gives (a dashed vertical line).
    """
    fig, ax = plt.subplots(figsize=(8, 5.5), layout="constrained")
    markers = "osD^vP*X"
    for i, (label, (validity, diversity)) in enumerate(results.items()):
        ax.plot([diversity * 100], [validity * 100], markers[i % len(markers)], ms=11, label=label)
    if ceiling is not None:
        ax.axvline(
            ceiling * 100,
            color="gray",
            ls="--",
            lw=1.5,
            label=tr(lang, "diversidad del corpus", "the corpus's diversity"),
        )
    ax.legend(loc="lower left", fontsize=11)  # a legend, not labels: close points stay readable
    ax.set_xlabel(tr(lang, "líneas distintas (%)", "distinct lines (%)"))
    ax.set_ylabel(tr(lang, "líneas válidas (%)", "valid lines (%)"))
    ax.set_xlim(-3, 105)
    ax.grid(alpha=0.3)
    ax.xaxis.set_major_formatter(number_ticks(lang))
    ax.yaxis.set_major_formatter(number_ticks(lang))
    ax.set_title(title if title is not None else tr(lang, "Validez frente a diversidad", "Validity against diversity"))
    return localise(fig, lang)  # the labels' numbers too: τ = 0,5


def plot_step_times(
    lengths: Sequence[int],
    times: Mapping[str, Sequence[float]],
    lang: str = "es",
    title: str | None = None,
    batch: int = 1,
) -> Figure:
    """Milliseconds per generation step against the sequence length, one line per method.

    Args:
        lengths: the length of the sequence at each step.
        times: label -> seconds per step at each length.
        batch: sequences generated together (each step writes one token for each).
    """
    fig, ax = plt.subplots(figsize=(8, 5), layout="constrained")
    x = np.asarray(lengths)
    for label, t in times.items():
        ax.plot(x, to_numpy(t) * 1000, "o-", lw=2, ms=4, label=label)
    ax.set_xlabel(tr(lang, "longitud de la secuencia (tokens)", "sequence length (tokens)"))
    each = (
        tr(lang, "un token", "one token")
        if batch == 1
        else tr(lang, f"{batch} secuencias, un token cada una", f"{batch} sequences, one token each")
    )
    ax.set_ylabel(tr(lang, f"ms por paso ({each})", f"ms per step ({each})"))
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    ax.yaxis.set_major_formatter(number_ticks(lang))
    ax.legend()
    ax.set_title(
        title
        if title is not None
        else tr(lang, "Tiempo por paso, con y sin caché", "Time per step, with and without the cache")
    )
    return fig
