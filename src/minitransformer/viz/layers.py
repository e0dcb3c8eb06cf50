"""Figures for the encoder block: layer normalisation, activations, depth and scale."""

from __future__ import annotations

from collections.abc import Sequence

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.figure import Figure

from ..i18n import tr
from .style import localise, to_numpy

__all__ = ["plot_layer_norm", "plot_activations", "plot_depth_scale"]


def plot_layer_norm(before, after, labels: Sequence[str] | None = None, lang: str = "es") -> Figure:
    """The features of a few tokens before and after layer normalisation.

    Shapes: before and after (N, D): one row of dots per token, one dot per feature; the
    bar marks each token's mean and its extent ±1 standard deviation.
    """
    b, a = to_numpy(before), to_numpy(after)
    n = b.shape[0]
    labels = list(labels) if labels is not None else [f"token {i}" for i in range(n)]
    fig, axes = plt.subplots(1, 2, figsize=(11.0, 1.5 + 0.9 * n), sharey=True, layout="constrained")
    titles = (
        tr(
            lang,
            "antes de normalizar:\ncada token con su propia escala",
            "before normalising:\neach token on its own scale",
        ),
        tr(lang, "después:\nmedia 0 y desviación estándar 1", "after:\nmean 0 and standard deviation 1"),
    )
    rng = np.random.default_rng(0)
    for ax, m, title in zip(axes, (b, a), titles):
        for i in range(n):
            jitter = rng.uniform(-0.12, 0.12, size=m.shape[1])
            ax.scatter(m[i], np.full(m.shape[1], i) + jitter, s=14, alpha=0.6, color=f"C{i}")
            mu, sd = m[i].mean(), m[i].std()
            bar = ax.errorbar(mu, i, xerr=sd, fmt="|", color="black", capsize=6, markersize=18, lw=2)
        ax.axvline(0.0, color="0.6", lw=1, ls=":")
        ax.set_title(title)
        ax.set_xlabel(tr(lang, "valor de cada característica", "value of each feature"))
        ax.grid(axis="x", alpha=0.3)
    axes[0].set_yticks(range(n), labels=labels)
    axes[0].set_ylim(n - 0.5, -0.5)
    bar_label = tr(lang, "media ± 1 desviación estándar de cada token", "mean ± 1 standard deviation of each token")
    fig.legend([bar], [bar_label], loc="outside lower center", frameon=False)
    return localise(fig, lang)


def plot_activations(x, curves: dict[str, object], lang: str = "es") -> Figure:
    """Activation functions over the same inputs. Shapes: x (N,), each curve (N,)."""
    xs = to_numpy(x)
    fig, ax = plt.subplots(figsize=(6.5, 4.2), layout="constrained")
    for i, (name, y) in enumerate(curves.items()):
        ax.plot(xs, to_numpy(y), lw=2.5, color=f"C{i}", label=name, ls="-" if i == 0 else "--")
    ax.axhline(0.0, color="0.6", lw=1)
    ax.axvline(0.0, color="0.6", lw=1)
    ax.set_xlabel("x")
    ax.set_ylabel(tr(lang, "activación(x)", "activation(x)"))
    ax.set_title(tr(lang, "Funciones de activación", "Activation functions"))
    ax.grid(alpha=0.3)
    ax.legend()
    return localise(fig, lang)


def plot_depth_scale(post_ln, pre_ln, lang: str = "es") -> Figure:
    """Standard deviation of the residual stream after each layer, post-LN and pre-LN.

    Shapes: post_ln and pre_ln (N,), one value per layer (layer 1 first).
    """
    post, pre = to_numpy(post_ln), to_numpy(pre_ln)
    layers = np.arange(1, len(post) + 1)
    fig, ax = plt.subplots(figsize=(7.0, 4.3), layout="constrained")
    ax.plot(layers, post, "o-", color="C0", label=tr(lang, "post-LN (el artículo, BERT)", "post-LN (the paper, BERT)"))
    pre_label = tr(lang, "pre-LN (antes de la normalización final)", "pre-LN (before the final normalisation)")
    ax.plot(layers, pre, "s-", color="C3", label=pre_label)
    ax.set_xlabel(tr(lang, "capa", "layer"))
    ax.set_ylabel(tr(lang, "desviación estándar de x", "standard deviation of x"))
    ax.set_title(tr(lang, "Escala del flujo residual con la profundidad", "Scale of the residual stream with depth"))
    ax.set_ylim(0.0, max(float(pre.max()), float(post.max())) * 1.15)
    ax.grid(alpha=0.3)
    ax.legend(loc="lower right")
    return localise(fig, lang)
