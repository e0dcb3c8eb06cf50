"""Heatmaps of attention weights, head grids and masks."""

from __future__ import annotations

from collections.abc import Sequence

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from ..i18n import tr, without_negative_zero
from .style import localise, to_numpy

__all__ = ["heatmap", "plot_attention", "plot_heads", "plot_mask", "plot_masks", "plot_scaling"]


def _labels_fit(ax: Axes, labels: Sequence[str]) -> bool:
    """Whether the labels fit side by side under ``ax`` without rotating them (an estimate from
    the axes' width in the figure and the tick font's size: a character is about 0.6 em wide)."""
    if not labels:
        return True
    size = ax.get_xticklabels()[0].get_fontsize() if ax.get_xticklabels() else 10.0
    width = ax.get_position().width * ax.figure.get_figwidth() * 72  # points
    needed = max(len(s) for s in labels) * 0.6 * size + 0.4 * size  # points per label, with a gap
    return needed * len(labels) <= width


def heatmap(
    matrix,
    ax: Axes,
    xlabels: Sequence[str] | None = None,
    ylabels: Sequence[str] | None = None,
    cmap: str = "viridis",
    vmin: float | None = None,
    vmax: float | None = None,
    annotate: bool | None = None,
    fmt: str = "{:.2f}",
    fontsize: float = 9,
):
    """Draw one matrix on ``ax`` (rows = queries, columns = keys); returns the image."""
    m = to_numpy(matrix)
    im = ax.imshow(m, cmap=cmap, vmin=vmin, vmax=vmax, aspect="auto")
    if xlabels is not None:
        ax.set_xticks(range(len(xlabels)), labels=list(xlabels))
        fits = _labels_fit(ax, [str(x) for x in xlabels])
        for label in ax.get_xticklabels():
            label.set(
                rotation=0 if fits else 45,
                ha="center" if fits else "right",
                rotation_mode="default" if fits else "anchor",
            )
    if ylabels is not None:
        ax.set_yticks(range(len(ylabels)), labels=list(ylabels))
    if annotate is None:
        annotate = m.size <= 100
    if annotate:
        for (i, j), v in np.ndenumerate(m):
            r, g, b, _ = im.cmap(im.norm(v))
            light = 0.299 * r + 0.587 * g + 0.114 * b > 0.5  # dark text on a light cell, light text on a dark one
            text = without_negative_zero(fmt.format(v))  # a tiny negative reads 0.00, not -0.00
            ax.text(j, i, text, ha="center", va="center", fontsize=fontsize, color="black" if light else "white")
    ax.spines[:].set_visible(False)
    return im


def plot_attention(
    weights,
    keys: Sequence[str] | None = None,
    queries: Sequence[str] | None = None,
    lang: str = "es",
    title: str | None = None,
    annotate: bool | None = None,
) -> Figure:
    """One attention map: weights (T, S), rows = queries, columns = keys."""
    w = to_numpy(weights)
    # large enough to read on a projector: about an inch per key and 0.8 inch per query
    size = (min(13.0, max(6.5, 0.95 * w.shape[1] + 3.0)), min(10.0, max(4.8, 0.8 * w.shape[0] + 2.0)))
    fig, ax = plt.subplots(figsize=size, layout="constrained")
    im = heatmap(w, ax, keys, queries, vmin=0.0, vmax=1.0, annotate=annotate, fontsize=12)
    ax.set_xlabel(tr(lang, "claves (keys)", "keys"))
    ax.set_ylabel(tr(lang, "consultas (queries)", "queries"))
    ax.set_title(title if title is not None else tr(lang, "Pesos de atención", "Attention weights"))
    fig.colorbar(im, ax=ax, shrink=0.8)
    return localise(fig, lang)


def plot_heads(
    weights,
    keys: Sequence[str] | None = None,
    queries: Sequence[str] | None = None,
    lang: str = "es",
    title: str | None = None,
    ncols: int = 4,
    titles: Sequence[str] | None = None,
    annotate: bool = False,
) -> Figure:
    """A grid with one heatmap per head: weights (H, T, S).

    ``titles`` replaces the panels' "head h" titles (e.g. to compare a right and a wrong
    computation side by side); ``annotate`` writes each weight in its cell.
    """
    w = to_numpy(weights)
    n_heads = w.shape[0]
    ncols = min(ncols, n_heads)
    nrows = -(-n_heads // ncols)
    cell = max(2.2, 0.35 * max(w.shape[1:]) + 1.0)
    fig, axes = plt.subplots(
        nrows, ncols, figsize=(cell * ncols + 0.8, cell * nrows + 0.6), squeeze=False, layout="constrained"
    )
    for h, ax in enumerate(axes.flat):
        if h >= n_heads:
            ax.axis("off")
            continue
        show_x = keys if h // ncols == nrows - 1 or h + ncols >= n_heads else None
        show_y = queries if h % ncols == 0 else None
        im = heatmap(w[h], ax, show_x, show_y, vmin=0.0, vmax=1.0, annotate=annotate)
        if show_x is None:
            ax.set_xticks([])
        if show_y is None:
            ax.set_yticks([])
        name = titles[h] if titles is not None else tr(lang, f"cabeza {h}", f"head {h}")
        ax.set_title(name, fontsize=12)
        if h // ncols == nrows - 1 or h + ncols >= n_heads:
            ax.set_xlabel(tr(lang, "claves", "keys"))
        if h % ncols == 0:
            ax.set_ylabel(tr(lang, "consultas", "queries"))
    fig.colorbar(im, ax=axes, shrink=0.6)
    if title:
        fig.suptitle(title)
    return localise(fig, lang)


def plot_mask(
    mask,
    keys: Sequence[str] | None = None,
    queries: Sequence[str] | None = None,
    lang: str = "es",
    title: str | None = None,
    ax: Axes | None = None,
) -> Figure:
    """A boolean mask (T, S) as a matrix: filled = may attend, empty = blocked."""
    m = to_numpy(mask).astype(bool)
    if ax is None:
        size = (max(3.5, 0.5 * m.shape[1] + 2.0), max(3.0, 0.5 * m.shape[0] + 1.2))
        fig, ax = plt.subplots(figsize=size, layout="constrained")
    else:
        fig = ax.figure
    ax.imshow(m, cmap="Blues", vmin=-0.3, vmax=1.0, aspect="equal")
    for (i, j), v in np.ndenumerate(m):
        ax.text(j, i, "✓" if v else "·", ha="center", va="center", color="white" if v else "0.5", fontsize=11)
    ax.set_xticks(
        range(m.shape[1]),
        labels=list(keys) if keys is not None else range(m.shape[1]),
        rotation=60 if keys is not None else 0,
        ha="right" if keys is not None else "center",
    )
    ax.set_yticks(range(m.shape[0]), labels=list(queries) if queries is not None else range(m.shape[0]))
    ax.set_xlabel(tr(lang, "claves (keys)", "keys"))
    ax.set_ylabel(tr(lang, "consultas (queries)", "queries"))
    ax.spines[:].set_visible(False)
    ax.set_title(title if title is not None else tr(lang, "Máscara (✓ = puede atender)", "Mask (✓ = may attend)"))
    return localise(fig, lang)


def plot_masks(
    masks: Sequence,
    titles: Sequence[str] | None = None,
    keys: Sequence[str] | None = None,
    queries: Sequence[str] | None = None,
    lang: str = "es",
) -> Figure:
    """Several masks (each (T, S), or anything that squeezes to it) side by side."""
    mats = [to_numpy(m).astype(bool) for m in masks]
    mats = [m.reshape(m.shape[-2:]) if m.ndim > 2 else m for m in mats]
    T, S = mats[0].shape
    cell = max(2.8, 0.5 * max(T, S) + 1.4)
    fig, axes = plt.subplots(
        1, len(mats), figsize=(cell * len(mats) + 0.4, cell + 0.6), squeeze=False, layout="constrained"
    )
    for i, (m, ax) in enumerate(zip(mats, axes.flat)):
        name = titles[i] if titles is not None else None
        plot_mask(m, keys, queries, lang=lang, title=name or "", ax=ax)
        if i > 0:
            ax.set_ylabel("")
    return localise(fig, lang)


def plot_scaling(
    d_ks: Sequence[int],
    var_raw: Sequence[float],
    var_scaled: Sequence[float],
    max_raw: Sequence[float],
    max_scaled: Sequence[float],
    lang: str = "es",
) -> Figure:
    """Why attention scales by 1/√d_k: two panels over d_k.

    Left, the variance of q·k without and with the scale (log-log); right, the mean largest
    softmax weight of a row of scores without and with the scale.
    """
    d = np.asarray(d_ks, dtype=float)
    fig, (left, right) = plt.subplots(1, 2, figsize=(11.0, 4.3), layout="constrained")
    raw_label = tr(lang, r"sin escalar: $q \cdot k$", r"unscaled: $q \cdot k$")
    scaled_label = tr(lang, r"escalado: $q \cdot k / \sqrt{d_k}$", r"scaled: $q \cdot k / \sqrt{d_k}$")
    left.loglog(d, to_numpy(var_raw), "o-", color="C3", label=raw_label)
    left.loglog(d, to_numpy(var_scaled), "s-", color="C0", label=scaled_label)
    left.loglog(
        d, d, ":", color="0.5", lw=2.5, zorder=3, label=tr(lang, "recta: varianza = $d_k$", "line: variance = $d_k$")
    )
    left.set_xlabel("$d_k$")
    left.set_ylabel(tr(lang, "varianza de la puntuación", "variance of the score"))
    left.set_title(tr(lang, "La varianza crece con $d_k$", "The variance grows with $d_k$"))
    left.legend(fontsize=10)
    right.semilogx(d, to_numpy(max_raw), "o-", color="C3", label=raw_label)
    right.semilogx(d, to_numpy(max_scaled), "s-", color="C0", label=scaled_label)
    right.set_ylim(0.0, 1.05)
    right.set_xlabel("$d_k$")
    right.set_ylabel(tr(lang, "peso máximo de la fila (media)", "largest weight in the row (mean)"))
    right.set_title(tr(lang, "Sin escala, la softmax se satura", "Without the scale, softmax saturates"))
    right.legend(fontsize=10, loc="lower right")
    for ax in (left, right):
        ax.minorticks_off()
        ax.set_xticks(d, labels=[str(int(x)) for x in d])
        ax.grid(alpha=0.3)
    return localise(fig, lang)
