"""Figures of positional encodings: tables, waves, similarity between positions, rotations."""

from __future__ import annotations

from collections.abc import Sequence

import matplotlib.pyplot as plt
import numpy as np
from matplotlib import patheffects
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from ..i18n import check_lang, error, tr
from .attention import heatmap
from .style import localise, to_numpy

__all__ = [
    "plot_encoding",
    "plot_encodings",
    "plot_waves",
    "plot_encoding_at",
    "plot_similarity",
    "plot_similarities",
    "plot_rotation_matrix",
    "plot_permuted_attention",
]


def _encoding_on(ax: Axes, table: np.ndarray, lang: str, title: str | None, vmax: float):
    im = ax.imshow(table, cmap="RdBu_r", vmin=-vmax, vmax=vmax, aspect="auto", interpolation="nearest")
    ax.set_xlabel(tr(lang, "dimensión", "dimension"))
    ax.set_ylabel(tr(lang, "posición", "position"))
    if title:
        ax.set_title(title)
    ax.spines[:].set_visible(False)
    return im


def _matrix_on(ax: Axes, m: np.ndarray, vmin: float | None, vmax: float | None):
    # "nearest": one flat block per cell, sharp on a projector and small once stored as PNG
    im = ax.imshow(m, cmap="viridis", vmin=vmin, vmax=vmax, aspect="auto", interpolation="nearest")
    ax.spines[:].set_visible(False)
    return im


def plot_encoding(pe, lang: str = "es", title: str | None = None) -> Figure:
    """A positional table as a heatmap: pe (T, D), one row per position."""
    check_lang(lang)
    table = to_numpy(pe)
    fig, ax = plt.subplots(figsize=(9.0, 5.0), layout="constrained")
    vmax = max(1.0, float(np.abs(table).max()))
    im = _encoding_on(
        ax,
        table,
        lang,
        title
        if title is not None
        else tr(lang, "Codificación posicional sinusoidal", "Sinusoidal positional encoding"),
        vmax,
    )
    fig.colorbar(im, ax=ax, shrink=0.85, label=tr(lang, "valor", "value"))
    return localise(fig, lang)


def plot_encodings(tables: Sequence, titles: Sequence[str], lang: str = "es", shared_scale: bool = True) -> Figure:
    """Several positional tables side by side: each (T, D)."""
    check_lang(lang)
    arrays = [to_numpy(t) for t in tables]
    fig, axes = plt.subplots(
        1, len(arrays), figsize=(5.6 * len(arrays) + 0.8, 4.8), squeeze=False, layout="constrained"
    )
    top = max(float(np.abs(a).max()) for a in arrays)
    for ax, table, title in zip(axes[0], arrays, titles):
        vmax = top if shared_scale else float(np.abs(table).max())
        im = _encoding_on(ax, table, lang, title, vmax)
        if not shared_scale:
            fig.colorbar(im, ax=ax, shrink=0.85)
    if shared_scale:
        fig.colorbar(im, ax=axes[0].tolist(), shrink=0.85, label=tr(lang, "valor", "value"))
    return localise(fig, lang)


def _waves_on(ax: Axes, table: np.ndarray, dims: Sequence[int], lang: str) -> None:
    positions = np.arange(table.shape[0])
    for d in dims:
        ax.plot(positions, table[:, d], lw=2.0, label=tr(lang, f"dimensión {d}", f"dimension {d}"))
    ax.set_xlabel(tr(lang, "posición", "position"))
    ax.set_ylabel(tr(lang, "valor", "value"))
    ax.set_ylim(-1.15, 1.15)
    ax.axhline(0.0, color="0.6", lw=0.8, zorder=0)


def plot_waves(pe, dims: Sequence[int], lang: str = "es", title: str | None = None) -> Figure:
    """Chosen columns of a positional table against the position: pe (T, D)."""
    check_lang(lang)
    table = to_numpy(pe)
    fig, ax = plt.subplots(figsize=(10.0, 4.6), layout="constrained")
    _waves_on(ax, table, dims, lang)
    ax.legend(loc="center left", bbox_to_anchor=(1.01, 0.5), frameon=False)
    ax.set_title(
        title
        if title is not None
        else tr(
            lang,
            "Cada dimensión es una onda de distinta frecuencia",
            "Each dimension is a wave of a different frequency",
        )
    )
    return localise(fig, lang)


def plot_encoding_at(pe, position: int, pair: int, lang: str = "es") -> Figure:
    """One position and one frequency of a sinusoidal table pe (T, D), side by side: the table with the
    position's row and the pair's two columns (2i, 2i+1) outlined, and the pair's waves with the position's
    values marked. The frequency of pair i is read off the table's width: ω_i = 10000^(-2i/D)."""
    check_lang(lang)
    table = to_numpy(pe)
    T, D = table.shape
    if not (0 <= position < T and 0 <= pair < D // 2):
        raise error(
            f"la posición debe estar en [0, {T - 1}] y el par en [0, {D // 2 - 1}], no {position} y {pair}",
            f"the position must lie in [0, {T - 1}] and the pair in [0, {D // 2 - 1}], got {position} and {pair}",
        )
    dims = [2 * pair, 2 * pair + 1]
    fig, (left, right) = plt.subplots(1, 2, figsize=(13.0, 5.0), width_ratios=[1.0, 1.15], layout="constrained")
    im = _encoding_on(left, table, lang, tr(lang, "La tabla", "The table"), max(1.0, float(np.abs(table).max())))
    fig.colorbar(im, ax=left, shrink=0.85)
    halo = [patheffects.withStroke(linewidth=4.5, foreground="white")]  # visible on red and on blue
    left.axhline(position, color="black", lw=2, path_effects=halo)
    left.add_patch(
        plt.Rectangle((dims[0] - 0.5, -0.5), 2, T, fill=False, edgecolor="black", linewidth=2, path_effects=halo)
    )
    _waves_on(right, table, dims, lang)
    right.axvline(position, color="black", lw=1.2, ls="--")
    for d, color in zip(dims, ("C0", "C1")):
        value = float(table[position, d])
        right.plot([position], [value], "o", color=color, ms=9, zorder=3)
        right.annotate(
            f"{value:.2f}",
            (position, value),
            xytext=(10, 0),
            textcoords="offset points",
            va="center",
            fontsize=13,
            color=color,
            bbox={"boxstyle": "round,pad=0.15", "facecolor": "white", "edgecolor": "none", "alpha": 0.85},
            zorder=4,
        )
    right.legend(loc="upper center", bbox_to_anchor=(0.5, -0.14), ncols=2, frameon=False)
    omega = 10000 ** (-2 * pair / D)
    wavelength = 2 * np.pi / omega
    right.set_title(
        tr(
            lang,
            f"Par {pair}: ω = {omega:.4g}, una vuelta cada {wavelength:.1f} posiciones",
            f"Pair {pair}: ω = {omega:.4g}, one turn every {wavelength:.1f} positions",
        )
    )
    fig.suptitle(
        tr(
            lang,
            f"Posición {position}: sus valores en las dimensiones {dims[0]} y {dims[1]}",
            f"Position {position}: its values in dimensions {dims[0]} and {dims[1]}",
        )
    )
    return localise(fig, lang)


def plot_similarity(sim, lang: str = "es", row: int | None = None, title: str | None = None) -> Figure:
    """Similarity between positions, sim (T, T); with ``row``, also that row as a curve."""
    check_lang(lang)
    m = to_numpy(sim)
    ncols = 1 if row is None else 2
    fig, axes = plt.subplots(1, ncols, figsize=(6.4 * ncols, 5.2), squeeze=False, layout="constrained")
    ax = axes[0, 0]
    im = _matrix_on(ax, m, None, None)
    ax.set_xlabel(tr(lang, "posición", "position"))
    ax.set_ylabel(tr(lang, "posición", "position"))
    ax.set_title(title if title is not None else tr(lang, "Similitud entre posiciones", "Similarity between positions"))
    fig.colorbar(im, ax=ax, shrink=0.85)
    if row is not None:
        ax.axhline(row, color="white", lw=1.2, ls="--")
        ax2 = axes[0, 1]
        ax2.plot(np.arange(m.shape[1]), m[row], lw=2.0, color="C0")
        ax2.axvline(row, color="0.5", lw=1.0, ls="--")
        ax2.set_xlabel(tr(lang, "posición", "position"))
        ax2.set_ylabel(tr(lang, "similitud", "similarity"))
        ax2.set_title(tr(lang, f"Fila de la posición {row}", f"Row of position {row}"))
    return localise(fig, lang)


def plot_similarities(
    matrices: Sequence, titles: Sequence[str], lang: str = "es", vmin: float | None = None, vmax: float | None = None
) -> Figure:
    """Several similarity matrices side by side, on one colour scale: each (T, T)."""
    check_lang(lang)
    arrays = [to_numpy(m) for m in matrices]
    lo = min(float(a.min()) for a in arrays) if vmin is None else vmin
    hi = max(float(a.max()) for a in arrays) if vmax is None else vmax
    fig, axes = plt.subplots(
        1, len(arrays), figsize=(4.6 * len(arrays) + 1.0, 4.9), squeeze=False, layout="constrained"
    )
    for ax, m, title in zip(axes[0], arrays, titles):
        im = _matrix_on(ax, m, lo, hi)
        ax.set_xlabel(tr(lang, "posición", "position"))
        ax.set_title(title, fontsize=13)
    axes[0, 0].set_ylabel(tr(lang, "posición", "position"))
    fig.colorbar(im, ax=axes[0].tolist(), shrink=0.85, label=tr(lang, "similitud", "similarity"))
    return localise(fig, lang)


def plot_rotation_matrix(m, lang: str = "es", title: str | None = None) -> Figure:
    """A (small) square matrix with its values written in the cells, e.g. the shift M_k."""
    check_lang(lang)
    a = to_numpy(m)
    size = 0.62 * a.shape[0] + 1.8
    fig, ax = plt.subplots(figsize=(size + 1.0, size), layout="constrained")
    im = ax.imshow(a, cmap="RdBu_r", vmin=-1.0, vmax=1.0)
    for (i, j), v in np.ndenumerate(a):
        if v != 0:
            ax.text(
                j,
                i,
                f"{abs(v) if round(v, 2) == 0 else v:.2f}",
                ha="center",
                va="center",
                fontsize=10,
                color="white" if abs(v) > 0.6 else "black",
            )
    ax.set_xticks(range(a.shape[1]))
    ax.set_yticks(range(a.shape[0]))
    ax.set_xlabel(tr(lang, "columna (dimensión de entrada)", "column (input dimension)"))
    ax.set_ylabel(tr(lang, "fila (dimensión de salida)", "row (output dimension)"))
    ax.spines[:].set_visible(False)
    ax.set_title(title if title is not None else tr(lang, "Matriz de desplazamiento", "Shift matrix"))
    fig.colorbar(im, ax=ax, shrink=0.8)
    return localise(fig, lang)


def plot_permuted_attention(
    weights, tokens: Sequence[str], weights_perm, tokens_perm: Sequence[str], lang: str = "es"
) -> Figure:
    """Attention weights of a sentence and of its permutation, side by side: each (T, T)."""
    check_lang(lang)
    pairs = [(to_numpy(weights), list(tokens)), (to_numpy(weights_perm), list(tokens_perm))]
    n = len(pairs[0][1])
    cell = 0.75 * n + 1.6
    fig, axes = plt.subplots(1, 2, figsize=(2 * cell + 1.2, cell), layout="constrained")
    titles = (tr(lang, "Frase original", "Original sentence"), tr(lang, "Frase permutada", "Permuted sentence"))
    for ax, (w, toks), title in zip(axes, pairs, titles):
        im = heatmap(w, ax, toks, toks, vmin=0.0, vmax=float(max(p[0].max() for p in pairs)), annotate=True)
        ax.set_xlabel(tr(lang, "claves (keys)", "keys"))
        ax.set_ylabel(tr(lang, "consultas (queries)", "queries"))
        ax.set_title(title)
    fig.colorbar(im, ax=axes.tolist(), shrink=0.8)
    return localise(fig, lang)
