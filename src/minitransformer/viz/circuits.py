"""Figures of the circuits heads form: the phase change of training (the copy loss falling as the heads'
scores rise), the loss against the position in the context, and the attention patterns of the heads found."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.figure import Figure

from ..i18n import decimal, error, tr
from .attention import heatmap
from .style import localise, to_numpy

__all__ = ["plot_phase_change", "plot_scores_at_step", "plot_loss_by_position", "plot_head_patterns", "plot_circuits"]


def plot_phase_change(
    steps: Sequence[int],
    copy_loss: Sequence[float],
    induction: Sequence,
    previous_token: Sequence,
    lang: str = "es",
    onset: int | None = None,
    halfway: int | None = None,
    in_context: Sequence[float] | None = None,
) -> Figure:
    """The copy loss against training steps (top), with ``in_context`` the in-context learning score (late minus
    early loss) in a panel below it, and every head's induction score (solid) and previous-token score (dashed) on
    the same steps (bottom); ``onset`` and ``halfway`` are marked on every panel.

    Args:
        steps: the recorded steps (R,).
        copy_loss: the loss on the repeated part at each record (R,).
        induction, previous_token: one (L, H) tensor per record: each head's score.
        onset: the step a head's induction score first passed the threshold.
        halfway: the step the copy loss first fell below halfway.
    """
    steps = np.asarray(steps)
    ind = np.stack([to_numpy(s) for s in induction])  # (R, L, H)
    prev = np.stack([to_numpy(s) for s in previous_token])  # (R, L, H)
    _, L, H = ind.shape
    if in_context is None:
        fig, (top, bottom) = plt.subplots(2, 1, figsize=(9, 6.4), sharex=True, height_ratios=(1, 1.25))
        panels = [top, bottom]
    else:
        fig, (top, middle, bottom) = plt.subplots(3, 1, figsize=(9, 8.2), sharex=True, height_ratios=(1, 0.8, 1.25))
        middle.plot(steps, in_context, marker="o", markersize=3, color="tab:purple")
        middle.axhline(0, color="0.5", linewidth=1)
        middle.set_ylabel(tr(lang, "aprendizaje en\ncontexto (nats)", "in-context\nlearning (nats)"))
        panels = [top, middle, bottom]
    top.plot(steps, copy_loss, marker="o", markersize=3, color="black")
    top.set_ylabel(tr(lang, "pérdida de copia (nats)", "copy loss (nats)"))
    top.set_title(tr(lang, "El cambio de fase", "The phase change"))
    colours = plt.get_cmap("tab10")
    for layer in range(L):
        for head in range(H):
            colour = colours(layer * H + head)
            bottom.plot(
                steps,
                ind[:, layer, head],
                color=colour,
                linewidth=2,
                label=tr(lang, f"inducción {layer}.{head}", f"induction {layer}.{head}"),
            )
            bottom.plot(
                steps,
                prev[:, layer, head],
                color=colour,
                linewidth=1.3,
                linestyle="--",
                label=tr(lang, f"token anterior {layer}.{head}", f"previous token {layer}.{head}"),
            )
    bottom.set_ylim(-0.02, 1.02)
    bottom.set_ylabel(tr(lang, "puntuación de la cabeza", "head score"))
    bottom.set_xlabel(tr(lang, "paso de entrenamiento", "training step"))
    marks = [
        (onset, ":", tr(lang, "inducción > 0,5", "induction > 0.5")),
        (halfway, "-.", tr(lang, "pérdida a medio camino", "loss halfway")),
    ]
    for step, style, label in marks:
        if step is None:
            continue
        for ax in panels:
            ax.axvline(step, color="tab:red", linestyle=style, linewidth=1.5, label=label if ax is top else None)
    for ax in panels:
        ax.grid(alpha=0.3)
    localise(fig, lang)
    # the legends after localise: a head's name "1.0" is not a number to rewrite
    if onset is not None or halfway is not None:
        top.legend(loc="upper right", fontsize=10)
    bottom.legend(loc="center left", bbox_to_anchor=(1.01, 0.5), fontsize=9)
    fig.tight_layout()
    return fig


def plot_scores_at_step(
    steps: Sequence[int],
    copy_loss: Sequence[float],
    in_context: Sequence[float],
    induction: Sequence,
    previous_token: Sequence,
    step: int,
    head: tuple[int, int],
    lang: str = "es",
    uniform: tuple[float, float] | None = None,
    onset: int | None = None,
) -> Figure:
    """One head's scores (top) and the copy loss and in-context learning score (bottom) against the training steps,
    as in :func:`plot_phase_change`, with ``step`` marked by a vertical line and its values by dots and written in
    the legends: what a training-step picker shows beside the head's pattern at that step.

    Args:
        steps: the recorded steps (R,); ``step`` must be one of them.
        copy_loss, in_context: one value per record (R,).
        induction, previous_token: one (L, H) tensor per record: each head's score.
        head: (layer, head) of the head drawn.
        uniform: the uniform head's (induction, previous-token) scores, drawn across the top panel.
        onset: the step a head's induction score first passed the threshold, marked on both panels.
    """
    steps = [int(s) for s in steps]
    if step not in steps:
        raise error(f"el paso {step} no es uno de los registrados", f"step {step} is not one of the recorded steps")
    r = steps.index(step)
    _, L, H = np.stack([to_numpy(s) for s in induction]).shape
    layer, h = head
    if not (0 <= layer < L and 0 <= h < H):
        raise error(
            f"la cabeza ({layer}, {h}) no existe: hay {L} bloques de {H} cabezas",
            f"head ({layer}, {h}) does not exist: there are {L} blocks of {H} heads",
        )
    ind = np.stack([to_numpy(s) for s in induction])[:, layer, h]  # (R,)
    prev = np.stack([to_numpy(s) for s in previous_token])[:, layer, h]  # (R,)
    loss, icl = np.asarray(copy_loss, dtype=float), np.asarray(in_context, dtype=float)
    colour = plt.get_cmap("tab10")(layer * H + h)  # the head's colour in plot_phase_change

    def value(x: float) -> str:  # the reader's way, with a true minus sign as on the ticks
        return decimal(x, 2, lang).replace("-", "\u2212")

    name = f"{layer}.{h}"
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(6.6, 4.9), sharex=True)
    top.plot(steps, ind, color=colour, linewidth=2.2, label=tr(lang, f"inducción {name}", f"induction {name}"))
    top.plot(
        steps,
        prev,
        color=colour,
        linewidth=1.5,
        linestyle="--",
        label=tr(lang, f"token anterior {name}", f"previous token {name}"),
    )
    labels = [value(ind[r]), value(prev[r])]
    if uniform is not None:
        top.axhline(
            uniform[0], color="0.45", linewidth=1.3, label=tr(lang, "uniforme (inducción)", "uniform (induction)")
        )
        top.axhline(
            uniform[1],
            color="0.45",
            linewidth=1.1,
            linestyle="--",
            label=tr(lang, "uniforme (token anterior)", "uniform (previous token)"),
        )
        labels += [value(uniform[0]), value(uniform[1])]
    top.plot([step, step], [ind[r], prev[r]], linestyle="none", marker="o", markersize=7, color=colour)
    top.set_ylim(-0.02, 1.02)
    top.set_ylabel(tr(lang, "puntuación", "score"))
    bottom.plot(steps, loss, color="black", linewidth=1.8, label=tr(lang, "pérdida de copia", "copy loss"))
    bottom.plot(
        steps, icl, color="tab:purple", linewidth=1.8, label=tr(lang, "aprendizaje en contexto", "in-context learning")
    )
    bottom.plot([step, step], [loss[r], icl[r]], linestyle="none", marker="o", markersize=7, color="0.2")
    bottom.axhline(0, color="0.5", linewidth=1)
    bottom.set_ylabel("nats")
    bottom.set_xlabel(tr(lang, "paso de entrenamiento", "training step"))
    bottom_labels = [value(loss[r]), value(icl[r])]
    for ax in (top, bottom):
        ax.axvline(step, color="0.3", linewidth=4, alpha=0.35)  # a band: the onset's dotted line shows on it
        if onset is not None:
            ax.axvline(
                onset,
                color="tab:red",
                linestyle=":",
                linewidth=1.6,
                zorder=3,  # over the step's line when the step is the onset
                label=tr(lang, "inicio (inducción > 0,5)", "onset (induction > 0.5)") if ax is bottom else None,
            )
        ax.grid(alpha=0.3)
    if onset is not None:
        bottom_labels.append(tr(lang, f"paso {onset}", f"step {onset}"))
    localise(fig, lang)
    # the legends after localise: a head's name "1.0" is not a number to rewrite; each entry ends with its value
    for ax, values in ((top, labels), (bottom, bottom_labels)):
        handles, texts = ax.get_legend_handles_labels()
        ax.legend(
            handles,
            [f"{text}: {v}" for text, v in zip(texts, values)],
            loc="center left",
            bbox_to_anchor=(1.01, 0.5),
            fontsize=11,
        )
    top.set_title(tr(lang, f"cabeza {name} en el paso {step}", f"head {name} at step {step}"))
    fig.tight_layout()
    return fig


def plot_loss_by_position(
    curves: Mapping[str, Sequence[float]],
    lang: str = "es",
    early: int | None = None,
    late: int | None = None,
    level: float | None = None,
) -> Figure:
    """The loss of predicting the next token against the position in the context, one line per curve;
    ``early`` and ``late`` (the in-context score's two positions) are marked, ``level`` (the loss of a uniform
    guess, ln V) drawn across.

    Args:
        curves: name -> the mean loss at each position t (predicting token t + 1).
    """
    fig, ax = plt.subplots(figsize=(8, 4.2))
    for name, values in curves.items():
        ax.plot(np.arange(len(values)), to_numpy(values), marker="o", markersize=2.5, label=name)
    if level is not None:
        ax.axhline(
            level,
            color="0.4",
            linestyle="--",
            linewidth=1.2,
            label=tr(lang, "adivinar al azar (ln V)", "uniform guess (ln V)"),
        )
    marks = ((early, tr(lang, "temprana", "early"), 4, "left"), (late, tr(lang, "tardía", "late"), -4, "right"))
    for position, name, dx, side in marks:
        if position is not None:
            ax.axvline(position, color="tab:red", linestyle=":", linewidth=1.5)
            ax.annotate(
                name,
                (position, 0.5),
                xycoords=("data", "axes fraction"),
                xytext=(dx, 0),
                textcoords="offset points",
                color="tab:red",
                fontsize=10,
                ha=side,
            )
    ax.set_xlabel(tr(lang, "posición t en el contexto", "position t in the context"))
    ax.set_ylabel(tr(lang, "pérdida al predecir el token t + 1 (nats)", "loss predicting token t + 1 (nats)"))
    ax.set_title(tr(lang, "Aprender del contexto", "Learning from the context"))
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    ax.legend(loc="upper center", fontsize=10)
    fig.tight_layout()
    return localise(fig, lang)


def plot_head_patterns(
    patterns: Sequence,
    titles: Sequence[str],
    lang: str = "es",
    period: int | None = None,
) -> Figure:
    """Each head's attention pattern on one sequence (rows: the query position, columns: the key position), side
    by side; with ``period`` a dashed line marks where a repeated segment starts again.

    Args:
        patterns: one (T, T) matrix per head.
        titles: one title per head, drawn as given (a head's name "1.0" keeps its point).
    """
    fig, axes = plt.subplots(1, len(patterns), figsize=(5.2 * len(patterns), 4.9), squeeze=False)
    for ax, pattern in zip(axes[0], patterns):
        im = heatmap(pattern, ax, cmap="Blues", vmin=0, vmax=1, annotate=False)
        T = to_numpy(pattern).shape[-1]
        if period is not None:
            for k in range(period, T, period):
                ax.axhline(k - 0.5, color="tab:orange", linestyle="--", linewidth=1)
                ax.axvline(k - 0.5, color="tab:orange", linestyle="--", linewidth=1)
        ax.set_xlabel(tr(lang, "posición de la clave", "key position"))
        ax.set_ylabel(tr(lang, "posición de la consulta", "query position"))
    fig.colorbar(im, ax=axes[0].tolist(), shrink=0.85, label=tr(lang, "peso de atención", "attention weight"))
    localise(fig, lang)
    for ax, title in zip(axes[0], titles):  # after localise: a head's name "1.0" is not a number to rewrite
        ax.set_title(title)
    return fig


def plot_circuits(
    matrices: Sequence,
    titles: Sequence[str],
    lang: str = "es",
    xlabel: str | Sequence[str] | None = None,
    ylabel: str | None = None,
) -> Figure:
    """Square circuits read from the weights (a head's OV or QK circuit, V × V), side by side, each in a diverging
    colour scale centred on zero and scaled to its own largest entry (the pattern, not the size, is compared).

    Args:
        matrices: one (V, V) matrix per panel.
        titles: one title per panel, drawn as given (a head's name "1.0" keeps its point).
        xlabel, ylabel: the axes' names (by default, an OV circuit's: the logit raised, the token attended to);
            ``xlabel`` may give one per panel. The rows' name is written on the first panel only.
    """
    n = len(matrices)
    xlabels = [xlabel] * n if xlabel is None or isinstance(xlabel, str) else list(xlabel)
    fig, axes = plt.subplots(1, n, figsize=(4.2 * n + 0.8, 4.2), squeeze=False)
    for i, (ax, matrix) in enumerate(zip(axes[0], matrices)):
        m = to_numpy(matrix)
        scale = float(np.abs(m).max()) or 1.0
        im = ax.imshow(m / scale, cmap="RdBu_r", vmin=-1, vmax=1)
        ax.set_xlabel(xlabels[i] or tr(lang, "logit que sube", "logit raised"))
        if i == 0:
            ax.set_ylabel(ylabel or tr(lang, "token atendido", "token attended to"))
        ticks = list(range(0, m.shape[0], 8))
        ax.set_xticks(ticks)
        ax.set_yticks(ticks)
    fig.colorbar(
        im,
        ax=axes[0].tolist(),
        shrink=0.85,
        label=tr(lang, "entrada / la mayor en valor absoluto", "entry / largest in absolute value"),
    )
    localise(fig, lang)
    for ax, title in zip(axes[0], titles):  # after localise: a head's name "1.0" is not a number to rewrite
        ax.set_title(title, fontsize=11)
    return fig
