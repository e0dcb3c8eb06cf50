"""Attention heads in static figures: every head at once, alignments, head scores.

The static matplotlib figures draw the maps anywhere (slides, PDF, GitHub). The maps always come
from the model's own forward pass (:func:`translator_attention`,
``Transformer.forward(..., return_attention=True)`` or ``Encoder.forward``): nothing here
recomputes attention. bertviz's interactive views of the same maps, and their offline
JavaScript, are :mod:`~minitransformer.viz.bertviz`.

Letters: L layers, B batch, H heads, T query (target) length, S key (source) length,
Dh d_head.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import matplotlib.pyplot as plt
import numpy as np
import torch
from matplotlib.figure import Figure
from torch import Tensor, nn

from ..analysis import stack_maps
from ..i18n import error, tr
from ..model import AttentionMaps
from ..runtime import eval_mode
from .attention import heatmap
from .style import localise, to_numpy

__all__ = [
    "translator_attention",
    "plot_head_grid",
    "plot_alignment",
    "plot_head_scores",
    "plot_score_breakdown",
]


# --------------------------------------------------------------------------- the maps


@torch.no_grad()
def translator_attention(model: nn.Module, src: Tensor, tgt: Tensor) -> AttentionMaps:
    """Every attention map of one forward pass of a :class:`~minitransformer.model.Transformer`.

    Runs ``model(src, tgt, return_attention=True)`` in ``eval()`` mode (no dropout) and
    restores the model's mode afterwards.

    Shapes: src (B, S), tgt (B, T) -> maps: encoder L × (B, H, S, S), decoder_self
    L × (B, H, T, T), cross L × (B, H, T, S).
    """
    with eval_mode(model):
        _, maps = model(src, tgt, return_attention=True)
    return maps


# --------------------------------------------------------------------------- static figures


def plot_head_grid(
    maps: Sequence[Tensor],
    keys: Sequence[str],
    queries: Sequence[str] | None = None,
    *,
    index: int = 0,
    layers: Sequence[int] | None = None,
    heads: Sequence[int] | None = None,
    pairs: Sequence[tuple[int, int]] | None = None,
    lang: str = "es",
    title: str | None = None,
) -> Figure:
    """A grid of heatmaps, one row per layer and one column per head.

    Args:
        maps: one map per layer, (B, H, T, S) or (H, T, S).
        keys, queries: token labels of the columns and rows (queries default to keys);
            the maps are cut to their lengths (padding at the end is left out).
        index: which example of the batch.
        layers, heads: which layers and heads to draw (default: all).
        pairs: instead of ``layers`` × ``heads``, these (layer, head) pairs in one row.
    """
    queries = keys if queries is None else queries
    w = stack_maps(maps, index)[:, :, : len(queries), : len(keys)]  # (L, H, T, S)
    if pairs is not None:
        grid = [[(layer, head) for layer, head in pairs]]
    else:
        layers = list(range(w.size(0))) if layers is None else list(layers)
        heads = list(range(w.size(1))) if heads is None else list(heads)
        grid = [[(layer, head) for head in heads] for layer in layers]
    nrows, ncols = len(grid), len(grid[0])
    n = max(len(keys), len(queries))
    cell = max(1.9, 0.17 * n + 0.9)
    label_room = 0.09 * max(len(t) for t in list(keys) + list(queries)) + 0.5
    fig, axes = plt.subplots(
        nrows,
        ncols,
        figsize=(cell * ncols + label_room + 0.9, cell * nrows + label_room + 0.4),
        squeeze=False,
        layout="constrained",
    )
    fontsize = 10 if n <= 10 or nrows * ncols <= 4 else 8
    im = None
    for r, row in enumerate(grid):
        for c, (layer, head) in enumerate(row):
            ax = axes[r, c]
            im = heatmap(w[layer, head], ax, vmin=0.0, vmax=1.0, annotate=False)
            if r == nrows - 1:
                ax.set_xticks(
                    range(len(keys)),
                    labels=list(keys),
                    rotation=70,
                    ha="right",
                    fontsize=fontsize,
                    rotation_mode="anchor",
                )
            else:
                ax.set_xticks([])
            if c == 0:
                ax.set_yticks(range(len(queries)), labels=list(queries), fontsize=fontsize)
                if pairs is None:
                    ax.set_ylabel(tr(lang, f"capa {layer}", f"layer {layer}"), fontsize=12)
            else:
                ax.set_yticks([])
            if pairs is not None:
                ax.set_title(tr(lang, f"capa {layer}, cabeza {head}", f"layer {layer}, head {head}"), fontsize=12)
            elif r == 0:
                ax.set_title(tr(lang, f"cabeza {head}", f"head {head}"), fontsize=12)
    fig.colorbar(im, ax=axes, shrink=min(0.8, 0.3 + 0.15 * nrows), pad=0.01)
    if title:
        fig.suptitle(title, fontsize=14)
    return localise(fig, lang)


def _draw_lines(ax, weights: np.ndarray, left: Sequence[str], right: Sequence[str], lang: str) -> None:
    """bertviz-like picture: queries on the left, keys on the right, one line per pair."""
    T, S = weights.shape
    n = max(T, S)
    y_left = [n - 1 - i * (n - 1) / max(T - 1, 1) if T > 1 else (n - 1) / 2 for i in range(T)]
    y_right = [n - 1 - j * (n - 1) / max(S - 1, 1) if S > 1 else (n - 1) / 2 for j in range(S)]
    for i in range(T):
        for j in range(S):
            a = float(weights[i, j])
            if a < 0.02:
                continue
            ax.plot(
                [0.08, 0.92],
                [y_left[i], y_right[j]],
                color="tab:blue",
                alpha=min(1.0, 0.15 + 0.85 * a),
                linewidth=0.5 + 5.5 * a,
                solid_capstyle="round",
            )
    for i, t in enumerate(left):
        ax.text(0.05, y_left[i], t, ha="right", va="center", fontsize=12)
    for j, t in enumerate(right):
        ax.text(0.95, y_right[j], t, ha="left", va="center", fontsize=12)
    ax.text(0.05, n - 0.2, tr(lang, "consultas", "queries"), ha="right", va="bottom", fontsize=10, color="0.4")
    ax.text(0.95, n - 0.2, tr(lang, "claves", "keys"), ha="left", va="bottom", fontsize=10, color="0.4")
    ax.set_xlim(-0.6, 1.6)
    ax.set_ylim(-0.6, n + 0.4)
    ax.axis("off")


def plot_alignment(
    weights: Tensor | Sequence[Tensor],
    src_tokens: Sequence[str] | Sequence[Sequence[str]],
    tgt_tokens: Sequence[str] | Sequence[Sequence[str]],
    *,
    lang: str = "es",
    titles: Sequence[str] | None = None,
    title: str | None = None,
) -> Figure:
    """Cross-attention between target (English) and source (Spanish) words.

    One row per example: on the left the lines of bertviz's head view (queries on the left,
    keys on the right, thicker = more attention), on the right the same weights as a
    heatmap with their values.

    Args:
        weights: (T, S) map of one example, or a list of them (one per example).
        src_tokens, tgt_tokens: the words of the keys (columns) and queries (rows), or a
            list of word lists (one per example). The maps are cut to their lengths.
        titles: one title per example.
    """
    if isinstance(weights, Tensor) and weights.dim() == 2:
        weights, src_tokens, tgt_tokens = [weights], [src_tokens], [tgt_tokens]
        titles = None if titles is None else list(titles)
    examples = [to_numpy(w)[: len(t), : len(s)] for w, s, t in zip(weights, src_tokens, tgt_tokens)]
    n_ex = len(examples)
    if not n_ex or not (n_ex == len(src_tokens) == len(tgt_tokens)):
        raise error(
            "da tantos mapas de pesos como listas de tokens de origen y de destino",
            "give as many weight maps as lists of source and target tokens",
        )
    widest = max(max(w.shape) for w in examples)
    row_h = max(2.6, 0.45 * widest + 1.1)
    hm_w = max(3.6, 0.75 * max(w.shape[1] for w in examples) + 2.4)
    fig, axes = plt.subplots(
        n_ex,
        2,
        figsize=(5.2 + hm_w, row_h * n_ex + (0.5 if title else 0.0)),
        squeeze=False,
        layout="constrained",
        gridspec_kw={"width_ratios": [5.2, hm_w]},
    )
    im = None
    for r, (w, s, t) in enumerate(zip(examples, src_tokens, tgt_tokens)):
        _draw_lines(axes[r, 0], w, list(t), list(s), lang)
        im = heatmap(w, axes[r, 1], list(s), list(t), vmin=0.0, vmax=1.0, annotate=True)
        for value in axes[r, 1].texts:  # inside the cells: nothing for the layout to measure
            value.set_in_layout(False)
        axes[r, 1].set_xlabel(tr(lang, "claves: palabras en español", "keys: Spanish words"))
        axes[r, 1].set_ylabel(tr(lang, "consultas", "queries"))
        if titles is not None:
            axes[r, 0].set_title(titles[r], fontsize=13, loc="left")
    fig.colorbar(im, ax=axes[:, 1], shrink=0.8 if n_ex == 1 else 0.5)
    if title:
        fig.suptitle(title, fontsize=14)
    return localise(fig, lang)


def plot_head_scores(
    values: Tensor | Sequence[Tensor],
    *,
    titles: Sequence[str] | None = None,
    mark: Sequence[tuple[int, int]] | None = None,
    lang: str = "es",
    title: str | None = None,
    ncols: int = 2,
    vmax: float | None = None,
) -> Figure:
    """One number per (layer, head) as a heatmap, for one or several panels.

    Args:
        values: (L, H) or a list of (L, H) tensors (e.g. how much "it" attends to "animal").
        titles: one title per panel.
        mark: (layer, head) pairs to outline with a red box in every panel.
        ncols: panels per row.
        vmax: top of the colour scale (default: the largest value).

    Values of both signs get a diverging scale centred on 0 (red above, blue below), so that a negative
    value never shares the colour of 0.
    """
    panels = [values] if isinstance(values, Tensor) and values.dim() == 2 else list(values)
    arrays = [to_numpy(v) for v in panels]
    L, H = arrays[0].shape
    ncols = min(ncols, len(arrays))
    nrows = -(-len(arrays) // ncols)
    top = vmax if vmax is not None else max(float(a.max()) for a in arrays)
    bottom = min(0.0, *(float(a.min()) for a in arrays))
    if bottom < 0:  # both signs: a scale symmetric about 0
        top = max(top, -bottom)
        bottom, cmap = -top, "RdBu_r"
    else:
        cmap = "viridis"
    fig, axes = plt.subplots(
        nrows,
        ncols,
        figsize=(0.62 * H * ncols + 1.8, (0.5 * L + 1.3) * nrows + (0.4 if title else 0)),
        squeeze=False,
        layout="constrained",
    )
    im = None
    for k, ax in enumerate(axes.flat):
        if k >= len(arrays):
            ax.axis("off")
            continue
        im = heatmap(arrays[k], ax, cmap=cmap, vmin=bottom, vmax=top, annotate=True, fmt="{:.2f}")
        for t in ax.texts:  # values inside the cells: they never widen the layout, so it need not measure them
            t.set_fontsize(8)
            t.set_in_layout(False)
        ax.set_xticks(range(H), labels=[str(h) for h in range(H)], rotation=0, ha="center")
        ax.set_yticks(range(L), labels=[str(layer) for layer in range(L)])
        ax.set_xlabel(tr(lang, "cabeza", "head"))
        ax.set_ylabel(tr(lang, "capa", "layer"))
        if titles is not None:
            ax.set_title(titles[k], fontsize=13)
        for layer, head in mark or []:
            ax.add_patch(plt.Rectangle((head - 0.5, layer - 0.5), 1, 1, fill=False, edgecolor="red", linewidth=2.5))
    fig.colorbar(im, ax=axes, shrink=0.8)
    if title:
        fig.suptitle(title, fontsize=14)
    return localise(fig, lang)


def plot_score_breakdown(
    q: Tensor,
    k: Tensor,
    keys: Sequence[str],
    query: str,
    *,
    lang: str = "es",
    title: str | None = None,
) -> Figure:
    """How one query and every key combine into attention (what bertviz's neuron view shows).

    Left, q ⊙ k_j dimension by dimension (with q on top); middle, each row summed and
    divided by √Dh (the score); right, the softmax of the scores (the attention weights).

    Shapes: q (Dh,), k (S, Dh).
    """
    qn, kn = to_numpy(q), to_numpy(k)
    if qn.ndim != 1 or kn.ndim != 2 or kn.shape[1] != qn.shape[0]:
        raise error(
            f"se esperaban q (Dh,) y k (S, Dh), no {qn.shape} y {kn.shape}",
            f"expected q (Dh,) and k (S, Dh), got {qn.shape} and {kn.shape}",
        )
    S, Dh = kn.shape
    if len(keys) != S:
        raise error(f"{len(keys)} tokens de clave para {S} claves", f"{len(keys)} key tokens for {S} keys")
    prod = qn[None, :] * kn  # (S, Dh)
    scores = prod.sum(axis=1) / math.sqrt(Dh)  # (S,)
    weights = np.exp(scores - scores.max())
    weights /= weights.sum()
    fig = plt.figure(figsize=(max(9.0, 0.22 * Dh + 7.5), 0.36 * S + 2.6), layout="constrained")
    gs = fig.add_gridspec(2, 3, height_ratios=[1.2, S], width_ratios=[max(4.0, 0.22 * Dh), 1.6, 1.6])
    ax_q = fig.add_subplot(gs[0, 0])
    ax_p = fig.add_subplot(gs[1, 0])
    ax_s = fig.add_subplot(gs[1, 1], sharey=ax_p)
    ax_w = fig.add_subplot(gs[1, 2], sharey=ax_p)
    lim = float(np.abs(qn).max())
    ax_q.imshow(qn[None, :], cmap="RdBu_r", vmin=-lim, vmax=lim, aspect="auto")
    quote = (lambda t: f"«{t}»") if lang == "es" else (lambda t: f"“{t}”")
    ax_q.set_yticks([0], labels=[f"q {quote(query)}"])
    ax_q.set_xticks([])
    ax_q.set_title(
        tr(lang, "consulta q y productos q ⊙ k por dimensión", "query q and products q ⊙ k per dimension"), fontsize=12
    )
    plim = float(np.abs(prod).max())
    im = ax_p.imshow(prod, cmap="RdBu_r", vmin=-plim, vmax=plim, aspect="auto")
    ax_p.set_yticks(range(S), labels=[f"k {quote(t)}" for t in keys])
    step = 4 if Dh > 16 else 1
    ax_p.set_xticks(range(0, Dh, step))
    ax_p.set_xlabel(tr(lang, "dimensión de la cabeza", "head dimension"))
    fig.colorbar(
        im,
        ax=ax_p,
        location="bottom",
        shrink=0.6,
        aspect=30,
        pad=0.02,
        label=tr(lang, "q ⊙ k (rojo > 0, azul < 0)", "q ⊙ k (red > 0, blue < 0)"),
    )
    colours = ["tab:red" if s > 0 else "tab:blue" for s in scores]
    ax_s.barh(range(S), scores, color=colours)
    ax_s.axvline(0, color="0.3", linewidth=0.8)
    ax_s.set_title(tr(lang, "puntuación\nΣ / √d_head", "score\nΣ / √d_head"), fontsize=12)
    ax_s.tick_params(axis="y", labelleft=False)
    ax_w.barh(range(S), weights, color="tab:green")
    ax_w.set_xlim(0, 1)
    ax_w.set_title(tr(lang, "peso\nsoftmax", "weight\nsoftmax"), fontsize=12)
    ax_w.tick_params(axis="y", labelleft=False)
    for i, v in enumerate(weights):
        ax_w.text(min(v + 0.03, 0.72), i, f"{v:.2f}", va="center", fontsize=9)
    ax_p.set_ylim(S - 0.5, -0.5)
    if title:
        fig.suptitle(title, fontsize=14)
    return localise(fig, lang)
