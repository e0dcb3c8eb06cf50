"""Figures of data parallelism: how far two ranks drift from one process, step by step, and the loss curves."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.figure import Figure

from ..i18n import error, tr
from .style import localise

__all__ = ["plot_drift"]


def plot_drift(
    differences: Mapping[str, Sequence[float]],
    losses: Mapping[str, Sequence[float]],
    band: tuple[Sequence[float], Sequence[float]],
    lang: str = "es",
) -> Figure:
    """Two panels against the optimiser step (from 1): the largest parameter difference between the ranks' run
    and one process's, per optimiser (log scale); and the loss of each run, with the band other seeds span.

    Args:
        differences: optimiser -> the largest absolute difference after each step.
        losses: run -> its loss at each step.
        band: the lowest and highest loss of the other seeds at each step.
    """
    lengths = {len(v) for v in [*differences.values(), *losses.values(), *band]}
    if len(lengths) != 1:
        raise error("todas las series deben tener un valor por paso", "every series must have one value per step")
    steps = np.arange(1, lengths.pop() + 1)
    fig, (left, right) = plt.subplots(1, 2, figsize=(12.0, 4.4))
    for (name, values), colour in zip(differences.items(), ["tab:red", "tab:blue", "tab:green"]):
        left.semilogy(
            steps,
            np.maximum(np.asarray(values, dtype=float), 1e-12),
            marker="o",
            markersize=3,
            color=colour,
            label=name,
        )
    left.set_xlabel(tr(lang, "paso del optimizador", "optimiser step"))
    left.set_ylabel(tr(lang, "mayor diferencia de un parámetro", "largest difference of a parameter"))
    left.set_title(tr(lang, "2 procesos frente a 1", "2 ranks against 1 process"))
    left.legend()
    right.fill_between(steps, band[0], band[1], color="0.85", label=tr(lang, "otras semillas", "other seeds"))
    for (name, values), style in zip(losses.items(), ["-", "--"]):
        right.plot(steps, values, linestyle=style, linewidth=2, label=name)
    right.set_xlabel(tr(lang, "paso del optimizador", "optimiser step"))
    right.set_ylabel(tr(lang, "pérdida (nats por token)", "loss (nats per token)"))
    right.set_title(tr(lang, "la pérdida con AdamW", "the loss with AdamW"))
    right.legend()
    fig.tight_layout()
    return localise(fig, lang)
