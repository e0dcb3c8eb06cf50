"""Figures about tokens: how tokenizers cut a sentence, what each language pays per word,
and what a sequence's length costs attention."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.figure import Figure
from matplotlib.patches import FancyBboxPatch

from ..i18n import integer, tr
from .style import localise, number_ticks

__all__ = ["plot_tokenisations", "plot_tokens_per_word", "plot_sequence_cost"]


def _shown(token: str) -> str:
    """A token as a box shows it: a space as ␣, a line break as ↵ (mathtext's $ kept literal)."""
    return token.replace(" ", "␣").replace("\n", "↵").replace("$", r"\$")


def plot_tokenisations(rows: Mapping[str, Sequence[str]], lang: str = "es", title: str | None = None) -> Figure:
    """The same text cut by several tokenizers: one row of boxes per tokenizer, one box per token.

    Args:
        rows: label -> the text of each token, in order (bytes of a cut character as ``\\xNN``).
    """
    items = list(rows.items())
    widths = [[max(len(_shown(t)), 1) * 0.62 + 0.5 for t in tokens] for _, tokens in items]
    longest = max((sum(w) for w in widths), default=1.0)
    fig, ax = plt.subplots(figsize=(min(18, 2.6 + 0.19 * longest), 0.75 * len(items) + 1.1), layout="constrained")
    colours = plt.get_cmap("tab20").colors
    texts = []  # the tokens' own text, added after localise: a token "0.5" is not a number to rewrite
    for r, ((_, tokens), row_widths) in enumerate(zip(items, widths)):
        y, x = len(items) - 1 - r, 0.0
        for k, (token, w) in enumerate(zip(tokens, row_widths)):
            box = FancyBboxPatch(
                (x + 0.06, y + 0.18),
                w - 0.12,
                0.64,
                boxstyle="round,pad=0,rounding_size=0.12",
                facecolor=colours[(2 * k + r) % len(colours)],
                edgecolor="0.35",
                linewidth=0.8,
            )
            ax.add_patch(box)
            texts.append((x + w / 2, y + 0.5, _shown(token)))
            x += w
        ax.text(x + 0.4, y + 0.5, f"{len(tokens)}", ha="left", va="center", fontsize=11, color="0.3")
    ax.set_xlim(0, longest + 3)
    ax.set_ylim(0, len(items))
    ax.set_yticks(np.arange(len(items)) + 0.5, [label for label, _ in reversed(items)])
    ax.set_xticks([])
    ax.tick_params(axis="y", length=0)
    for side in ("left", "bottom"):
        ax.spines[side].set_visible(False)
    ax.set_title(
        title if title is not None else tr(lang, "Un texto, varios tokenizadores", "One text, several tokenizers")
    )
    localise(fig, lang)
    for x, y, text in texts:
        ax.text(x, y, text, ha="center", va="center", fontsize=10, family="monospace")
    return fig


def plot_tokens_per_word(
    sizes: Sequence[int],
    curves: Mapping[str, Sequence[float]],
    lang: str = "es",
    points: Mapping[str, tuple[int, float]] | None = None,
    title: str | None = None,
) -> Figure:
    """Tokens per word against the vocabulary size, one line per (tokenizer, text).

    Args:
        sizes: the vocabulary sizes (x).
        curves: label -> tokens per word at each size; labels ending in the same text after
            "→" share a line style, labels starting the same share a colour.
        points: label -> (vocabulary size, tokens per word) of other tokenizers, drawn as markers.
    """
    fig, ax = plt.subplots(figsize=(9, 5.5), layout="constrained")
    trained = list(dict.fromkeys(label.split("→")[0].strip() for label in curves))
    texts = list(dict.fromkeys(label.split("→")[-1].strip() for label in curves))
    colours = plt.get_cmap("tab10").colors
    styles = ["-", "--", ":", "-."]
    for label, values in curves.items():
        colour = colours[trained.index(label.split("→")[0].strip()) % 10]
        style = styles[texts.index(label.split("→")[-1].strip()) % len(styles)]
        ax.plot(sizes, values, style, marker="o", ms=5, lw=2, color=colour, label=label)
    for k, (label, (size, value)) in enumerate((points or {}).items()):
        ax.plot([size], [value], "*^sD"[k % 4], ms=13, color="0.25", label=label)
    ax.set_xscale("log")
    ax.xaxis.set_major_formatter(plt.FuncFormatter(lambda x, _: integer(x) if x >= 1 else f"{x:g}"))
    ax.xaxis.set_minor_formatter(plt.NullFormatter())
    ticks = sorted({*sizes, *(s for s, _ in (points or {}).values())})
    ax.set_xticks(ticks)
    ax.tick_params(axis="x", labelrotation=30)
    ax.yaxis.set_major_formatter(number_ticks(lang))
    ax.set_ylim(bottom=1)
    ax.grid(alpha=0.3)
    ax.set_xlabel(tr(lang, "tamaño del vocabulario (tokens)", "vocabulary size (tokens)"))
    ax.set_ylabel(tr(lang, "tokens por palabra", "tokens per word"))
    ax.legend(fontsize=10, ncol=2)
    ax.set_title(title if title is not None else tr(lang, "Tokens por palabra", "Tokens per word"))
    return localise(fig, lang)


def plot_sequence_cost(
    names: Sequence[str], lengths: Sequence[int], vocab_sizes: Sequence[int], d_model: int, lang: str = "es"
) -> Figure:
    """For one text under several tokenizers: its length T, the T² attention scores of one head (the whole text as
    one sequence), the T · V logits of the output and the V · d_model numbers of the embedding table, as bars on
    linear scales."""
    lengths_ = np.asarray(lengths, dtype=float)
    vocab_ = np.asarray(vocab_sizes, dtype=float)
    panels = [
        (tr(lang, "longitud T (tokens)", "length T (tokens)"), lengths_),
        (
            tr(
                lang,
                "puntuaciones de atención T²\n(una cabeza, una sola secuencia)",
                "attention scores T²\n(one head, one sequence)",
            ),
            lengths_**2,
        ),
        (tr(lang, "logits de la salida T · V", "output logits T · V"), lengths_ * vocab_),
        (f"embedding V · d (d = {d_model})", vocab_ * d_model),  # the same words in both languages
    ]
    fig, axes = plt.subplots(1, 4, figsize=(19, 0.45 * len(names) + 2.4), layout="constrained", sharey=True)
    y = np.arange(len(names))[::-1]
    colours = plt.get_cmap("viridis")(np.linspace(0.15, 0.85, len(names)))
    for ax, (label, values) in zip(axes, panels):
        ax.barh(y, values, color=colours)
        ax.set_xlim(0, values.max() * 1.45)
        for yi, v in zip(y, values):
            ax.text(v + values.max() * 0.02, yi, integer(round(v)), va="center", fontsize=10)
        ax.set_xticks([])  # the bars carry their numbers
        ax.spines["bottom"].set_visible(False)
        ax.set_title(label, fontsize=12)
    axes[0].set_yticks(y, list(names))
    fig.suptitle(tr(lang, "Lo que cuesta la longitud de la secuencia", "What a sequence’s length costs"))
    return localise(fig, lang)
