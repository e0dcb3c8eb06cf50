"""Figures of the modern Transformer: RoPE's scores, the cost of attention, the ablation."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch
from matplotlib.ticker import NullFormatter

from ..attention_cost import power_law_fit
from ..course.ablation import Verdict, verdicts
from ..i18n import check_lang, error, tr
from .style import localise, number_ticks, to_numpy

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
    return localise(fig, lang)


def plot_attention_cost(
    lengths: Sequence[int],
    times: Mapping[str, Sequence[float]],
    memory: Mapping[str, Sequence[float]],
    lang: str = "es",
) -> Figure:
    """Time (ms, measured) and memory (MiB, computed from the tensors' shapes) of attention against
    the sequence length, log-log.

    Args:
        lengths: the lengths T measured.
        times: label -> milliseconds per call at each length.
        memory: label -> MiB at each length.
    Each time curve gets its least-squares line in log-log (:func:`~minitransformer.attention_cost.power_law_fit`),
    dashed, its slope in the legend (2 would be ∝ T²).
    """
    check_lang(lang)
    T = np.asarray(lengths, dtype=float)
    fig, axes = plt.subplots(1, 2, figsize=(12, 5), layout="constrained")
    panels = [
        (
            axes[0],
            times,
            tr(lang, "tiempo por llamada (ms)", "time per call (ms)"),
            tr(lang, "Tiempo (medido)", "Time (measured)"),
        ),
        (
            axes[1],
            memory,
            tr(lang, "memoria (MiB)", "memory (MiB)"),
            tr(lang, "Memoria (calculada: elementos × bytes)", "Memory (computed: elements × bytes)"),
        ),
    ]
    for ax, curves, ylabel, title in panels:
        for label, ys in curves.items():
            (line,) = ax.plot(T, to_numpy(ys), "o-", lw=2, label=label)
            if curves is times:
                slope, factor = power_law_fit(T, to_numpy(ys))
                ax.plot(
                    T,
                    factor * T**slope,
                    "--",
                    color=line.get_color(),
                    alpha=0.7,
                    label=tr(lang, f"ajuste: pendiente {slope:.2f}", f"fit: slope {slope:.2f}"),
                )
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xticks(T, [str(int(t)) for t in T])
        ax.yaxis.set_major_formatter(number_ticks(lang))
        ax.set_xlabel(tr(lang, "longitud de la secuencia T", "sequence length T"))
        ax.set_ylabel(ylabel)
        ax.set_title(title)
        ax.grid(alpha=0.3, which="both")
        ax.legend(fontsize="small")
    return localise(fig, lang)


_CALL_COLOURS = {"worse": "#fc9272", "better": "#a1d99b", "undecided": "#d9d9d9"}


def plot_ablation(
    results: Mapping[str, Sequence[float]],
    labels: Mapping[str, str],
    floor: float,
    lang: str = "es",
    title: str | None = None,
) -> Figure:
    """Held-out loss above the corpus's floor per variant: each seed a dot, the mean a bar, coloured
    by the verdict of :func:`~minitransformer.course.ablation.verdicts` against the modern model.

    Args:
        results: variant name -> held-out loss per seed (the seeds in the same order for every variant).
        labels: variant name -> the label to show.
        floor: the corpus's floor, subtracted from every loss (log scale).
    """
    check_lang(lang)
    names = list(results)
    calls = verdicts(dict(results))
    excess = {n: to_numpy(results[n]) - floor for n in names}
    if min(float(v.min()) for v in excess.values()) <= 0:
        raise error(
            "una pérdida no queda por encima del suelo: no cabe en la escala logarítmica",
            "a loss is not above the floor: it does not fit the log scale",
        )
    fig, ax = plt.subplots(figsize=(9, 0.5 * len(names) + 2), layout="constrained")
    y = np.arange(len(names))[::-1]
    for yi, n in zip(y, names):
        call = calls[n].call if n in calls else None
        ax.barh(yi, float(np.mean(excess[n])), color=_CALL_COLOURS.get(call, "#9ecae1"), height=0.6)
        ax.plot(excess[n], np.full(len(excess[n]), yi), "o", color="#08519c", ms=4)
    ax.set_yticks(y, [labels.get(n, n) for n in names])
    ax.set_xscale("log")
    low = min(float(v.min()) for v in excess.values())
    ax.set_xlim(left=10 ** np.floor(np.log10(low)))  # from the decade below the smallest excess: its tick shows
    ax.xaxis.set_major_formatter(number_ticks(lang))
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.set_xlabel(
        tr(lang, "pérdida en líneas no vistas − suelo (nats/token)", "loss on unseen lines − floor (nats/token)")
    )
    handles = [
        Patch(color=_CALL_COLOURS["worse"], label=Verdict("", 0, 0, 0, 0, 0, "worse").label(lang)),
        Patch(color=_CALL_COLOURS["better"], label=Verdict("", 0, 0, 0, 0, 0, "better").label(lang)),
        Patch(color=_CALL_COLOURS["undecided"], label=Verdict("", 0, 0, 0, 0, 0, "undecided").label(lang)),
        Patch(color="#9ecae1", label=tr(lang, "referencia", "reference")),
        Line2D([], [], ls="", marker="o", color="#08519c", ms=4, label=tr(lang, "una semilla", "one seed")),
    ]
    fig.legend(handles=handles, loc="outside lower center", ncols=len(handles), fontsize="small", frameon=False)
    ax.set_title(
        title if title is not None else tr(lang, "Ablación: un cambio cada vez", "Ablation: one change at a time")
    )
    ax.grid(alpha=0.3, axis="x", which="both")
    return localise(fig, lang)
