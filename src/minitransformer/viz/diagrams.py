"""Architecture diagrams drawn with matplotlib: boxes, arrows and labels in either language.

Every function returns the figure. The colours are shared by all diagrams: attention in
orange, feed-forward in blue, add & norm in yellow, embeddings in pink, linear layers in
purple, softmax in green.
"""

from __future__ import annotations

from collections.abc import Sequence

import matplotlib as mpl
import matplotlib.pyplot as plt
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.patches import Circle, FancyBboxPatch

from ..i18n import check_lang, tr
from .style import localise

__all__ = [
    "COLORS",
    "draw_transformer",
    "draw_encoder_block",
    "draw_decoder_block",
]

# kind -> (fill, edge)
COLORS: dict[str, tuple[str, str]] = {
    "attention": ("#FAD9A5", "#C27410"),
    "feed_forward": ("#C3E1F6", "#2C78B0"),
    "add_norm": ("#F5F0A6", "#A39512"),
    "embedding": ("#F7CDD5", "#BF4561"),
    "linear": ("#DDD4F3", "#6A50B0"),
    "softmax": ("#CDEBC5", "#3C8C38"),
    "frame": ("#F3F3F3", "#A0A0A0"),
}
LINE = "#333333"
MUTED = "#555555"
FONT = 13

# Fixed style: the drawing does not depend on the caller's matplotlib settings.
_RC = {
    "font.family": "DejaVu Sans",
    "font.size": FONT,
    "mathtext.fontset": "dejavusans",
    "figure.dpi": 100,
    "savefig.dpi": 100,
    "savefig.facecolor": "white",
    "figure.facecolor": "white",
    "path.simplify": False,
}


# ---------------------------------------------------------------------------------------
# drawing primitives (data coordinates, y grows upwards)


def _canvas(width: float, height: float, scale: float = 0.62, bottom: float = 0.0) -> tuple[Figure, Axes]:
    interactive = mpl.is_interactive()  # leaving rc_context would reset it and hide later figures
    with plt.rc_context(_RC):
        fig = plt.figure(figsize=(width * scale, height * scale))
        ax = fig.add_axes((0.0, 0.0, 1.0, 1.0))
    mpl.interactive(interactive)
    ax.set_xlim(0, width)
    ax.set_ylim(bottom, bottom + height)
    ax.set_aspect("equal")
    ax.axis("off")
    return fig, ax


def _text(ax: Axes, x: float, y: float, text: str, size: float = FONT, **kw) -> None:
    kw.setdefault("ha", "center")
    kw.setdefault("va", "center")
    kw.setdefault("color", LINE)
    kw.setdefault("zorder", 5)
    ax.text(x, y, text, fontsize=size, family="DejaVu Sans", linespacing=1.15, **kw)


def _box(ax: Axes, cx: float, cy: float, w: float, h: float, text: str, kind: str, size: float = FONT) -> None:
    """A rounded box centred at (cx, cy)."""
    fill, edge = COLORS[kind]
    ax.add_patch(
        FancyBboxPatch(
            (cx - w / 2, cy - h / 2),
            w,
            h,
            boxstyle="round,pad=0,rounding_size=0.16",
            facecolor=fill,
            edgecolor=edge,
            linewidth=1.6,
            zorder=3,
        )
    )
    _text(ax, cx, cy, text, size=size, zorder=5)


def _frame(ax: Axes, x0: float, y0: float, x1: float, y1: float) -> None:
    fill, edge = COLORS["frame"]
    ax.add_patch(
        FancyBboxPatch(
            (x0, y0),
            x1 - x0,
            y1 - y0,
            boxstyle="round,pad=0,rounding_size=0.3",
            facecolor=fill,
            edgecolor=edge,
            linewidth=1.4,
            zorder=1,
        )
    )


def _line(
    ax: Axes, points: Sequence[tuple[float, float]], arrow: bool = True, color: str = LINE, lw: float = 1.6
) -> None:
    """A polyline; the last segment ends in an arrow head when ``arrow``."""
    pts = list(points)
    if len(pts) > 2 or not arrow:
        xs, ys = zip(*(pts[:-1] if arrow else pts))
        ax.plot(xs, ys, color=color, lw=lw, solid_capstyle="round", solid_joinstyle="round", zorder=2)
    if arrow:
        ax.annotate(
            "",
            xy=pts[-1],
            xytext=pts[-2],
            zorder=2,
            arrowprops=dict(arrowstyle="-|>", color=color, lw=lw, mutation_scale=16, shrinkA=0, shrinkB=0),
        )


def _dot(ax: Axes, x: float, y: float) -> None:
    ax.add_patch(Circle((x, y), 0.06, facecolor=LINE, edgecolor=LINE, zorder=4))


def _adder(ax: Axes, cx: float, cy: float, r: float = 0.24) -> None:
    """The ⊕ where the positional encoding is added."""
    ax.add_patch(Circle((cx, cy), r, facecolor="white", edgecolor=LINE, linewidth=1.6, zorder=3))
    ax.plot([cx - r * 0.62, cx + r * 0.62], [cy, cy], color=LINE, lw=1.6, zorder=4)
    ax.plot([cx, cx], [cy - r * 0.62, cy + r * 0.62], color=LINE, lw=1.6, zorder=4)


def _wave(ax: Axes, cx: float, cy: float, r: float = 0.3) -> None:
    """A circle holding a small sine wave: the positional encoding."""
    import numpy as np

    ax.add_patch(Circle((cx, cy), r, facecolor="white", edgecolor=LINE, linewidth=1.6, zorder=3))
    t = np.linspace(-1, 1, 60)
    ax.plot(cx + 0.72 * r * t, cy + 0.4 * r * np.sin(np.pi * t * 1.5), color=LINE, lw=1.5, zorder=4)


# ---------------------------------------------------------------------------------------
# labels


def _labels(lang: str) -> dict[str, str]:
    es = check_lang(lang) == "es"
    return {
        "mha": "Atención\nmulticabeza" if es else "Multi-Head\nAttention",
        "masked": "Atención multicabeza\nenmascarada" if es else "Masked Multi-Head\nAttention",
        "cross": "Atención cruzada\nmulticabeza" if es else "Multi-Head\nCross-Attention",
        "add_norm": "Suma y normalización" if es else "Add & Norm",
        "ff": "Red prealimentada\n(feed-forward)" if es else "Feed\nForward",
        "in_emb": "Embedding\nde entrada" if es else "Input\nEmbedding",
        "out_emb": "Embedding\nde salida" if es else "Output\nEmbedding",
        "pe": "Codificación\nposicional" if es else "Positional\nEncoding",
        "inputs": "Entradas" if es else "Inputs",
        "outputs": "Salidas (desplazadas\na la derecha)" if es else "Outputs\n(shifted right)",
        "linear": "Lineal" if es else "Linear",
        "softmax": "Softmax",
        "probs": "Probabilidades de salida" if es else "Output Probabilities",
        "encoder": "Codificador" if es else "Encoder",
        "decoder": "Decodificador" if es else "Decoder",
        "enc_out": "salida del\ncodificador" if es else "encoder\noutput",
    }


# ---------------------------------------------------------------------------------------
# shared pieces

_BW = 3.9  # width of a sub-layer box
_AH = 1.1  # height of an attention / feed-forward box
_NH = 0.62  # height of an add & norm box


def _self_attention_inputs(
    ax: Axes, cx: float, y_from: float, y_box: float, spread: float = 1.0, qkv: bool = False, size: float = FONT - 2
) -> float:
    """One stream split into the three inputs (Q, K, V) of the box whose bottom is at ``y_box``.

    Returns the y of the split point.
    """
    y_split = y_box - 0.38
    _line(ax, [(cx, y_from), (cx, y_split)], arrow=False)
    _line(ax, [(cx - spread, y_split), (cx + spread, y_split)], arrow=False)
    _dot(ax, cx, y_split)
    for i, dx in enumerate((-spread, 0.0, spread)):
        _line(ax, [(cx + dx, y_split), (cx + dx, y_box)])
        if qkv:
            _text(ax, cx + dx + 0.17, y_split + 0.2, "VKQ"[i], size=size, style="italic", color=MUTED)
    return y_split


def _residual(ax: Axes, x_branch: float, y_branch: float, x_side: float, y_target: float, x_box_edge: float) -> None:
    """The residual path: from a branch point, around the sub-layer, into the add & norm box."""
    _dot(ax, x_branch, y_branch)
    _line(ax, [(x_branch, y_branch), (x_side, y_branch), (x_side, y_target), (x_box_edge, y_target)])


def _sublayer_stack(
    ax: Axes, cx: float, y0: float, kinds: Sequence[str], L: dict[str, str], residual_side: str, gap: float = 0.5
) -> dict[str, float]:
    """Draw sub-layers (each followed by add & norm) upwards from ``y0``.

    Returns the y positions of interest: the bottom of each sub-layer ("bottom_i"), the
    branch point below it ("branch_i") and the top of the stack ("top").
    """
    side = -1 if residual_side == "left" else 1
    x_side = cx + side * (_BW / 2 + 0.38)
    edge = cx + side * _BW / 2
    y = y0
    info: dict[str, float] = {}
    for i, kind in enumerate(kinds):
        bottom = y + (1.05 if i == 0 else 0.75)
        branch = y + 0.25
        info[f"bottom_{i}"], info[f"branch_{i}"] = bottom, branch
        box_kind = "feed_forward" if kind == "ff" else "attention"
        _box(ax, cx, bottom + _AH / 2, _BW, _AH, L[kind], box_kind)
        norm_y = bottom + _AH + gap + _NH / 2
        _box(ax, cx, norm_y, _BW, _NH, L["add_norm"], "add_norm", size=FONT - 0.5)
        _line(ax, [(cx, bottom + _AH), (cx, norm_y - _NH / 2)])
        _residual(ax, cx if kind != "cross" else cx + 1.1, branch, x_side, norm_y, edge)
        y = norm_y + _NH / 2
        info[f"norm_top_{i}"] = y
    info["top"] = y
    return info


def _repeated(ax: Axes, cx: float, y0: float, top: float, side: str, gap: float) -> None:
    """The grey frame around one layer and its "N×" (repeated N times), on the residual's ``side``."""
    left, right = (0.75, 0.3) if side == "left" else (0.3, 0.75)
    _frame(ax, cx - _BW / 2 - left, y0 + 0.05, cx + _BW / 2 + right, top + 0.3)
    x = cx - _BW / 2 - gap if side == "left" else cx + _BW / 2 + gap
    _text(ax, x, (y0 + top) / 2, "N×", size=FONT + 5, ha="right" if side == "left" else "left")


# ---------------------------------------------------------------------------------------
# the diagrams


def _encoder_column(ax: Axes, cx: float, y0: float, L: dict[str, str], qkv: bool = False) -> dict[str, float]:
    info = _sublayer_stack(ax, cx, y0, ["mha", "ff"], L, residual_side="left")
    _self_attention_inputs(ax, cx, y0, info["bottom_0"], qkv=qkv)
    _line(ax, [(cx, info["norm_top_0"]), (cx, info["bottom_1"])])
    _dot(ax, cx, info["branch_1"])
    return info


def _decoder_column(
    ax: Axes, cx: float, y0: float, L: dict[str, str], x_memory: float, y_memory: float, qkv: bool = False
) -> dict[str, float]:
    info = _sublayer_stack(ax, cx, y0, ["masked", "cross", "ff"], L, residual_side="right")
    _self_attention_inputs(ax, cx, y0, info["bottom_0"], qkv=qkv)
    # cross-attention: Q from below (right), K and V from the encoder (left)
    xq, xk, xv = cx + 1.1, cx - 0.1, cx - 1.1
    _line(ax, [(xq, info["norm_top_0"]), (xq, info["bottom_1"])])
    y_kv = info["bottom_1"] - 0.3
    _line(ax, [(x_memory, y_memory), (x_memory, y_kv), (xk, y_kv)], arrow=False)
    _dot(ax, xv, y_kv)
    _line(ax, [(xv, y_kv), (xv, info["bottom_1"])])
    _line(ax, [(xk, y_kv), (xk, info["bottom_1"])])
    if qkv:
        for x, name in ((xv, "V"), (xk, "K"), (xq, "Q")):
            _text(ax, x + 0.17, info["bottom_1"] - 0.13, name, size=FONT - 2, style="italic", color=MUTED)
    _line(ax, [(cx, info["norm_top_1"]), (cx, info["bottom_2"])])
    _dot(ax, cx, info["branch_2"])
    return info


def draw_transformer(lang: str = "es") -> Figure:
    """The whole encoder-decoder model: encoder stack on the left, decoder stack on the right."""
    L = _labels(lang)
    W, H = 16.4, 17.5
    fig, ax = _canvas(W, H, scale=0.56, bottom=-0.2)
    ce, cd = 4.9, 11.5
    y_emb, y_add, y_stack = 2.05, 3.35, 3.85

    for cx, emb, below, pe_side in ((ce, L["in_emb"], L["inputs"], -1), (cd, L["out_emb"], L["outputs"], 1)):
        _text(ax, cx, 1.0, below, size=FONT, va="top")
        _line(ax, [(cx, 1.05), (cx, y_emb - 0.5)])
        _box(ax, cx, y_emb, _BW * 0.75, 1.0, emb, "embedding")
        _line(ax, [(cx, y_emb + 0.5), (cx, y_add - 0.24)])
        _adder(ax, cx, y_add)
        xw = cx + pe_side * 1.15
        _wave(ax, xw, y_add)
        _line(ax, [(xw - pe_side * 0.3, y_add), (cx + pe_side * 0.24, y_add)])
        _text(ax, xw + pe_side * 0.45, y_add, L["pe"], size=FONT - 1, ha="right" if pe_side < 0 else "left")
        _line(ax, [(cx, y_add + 0.24), (cx, y_stack)], arrow=False)

    # encoder
    enc = _encoder_column(ax, ce, y_stack, L)
    _repeated(ax, ce, y_stack, enc["top"], "left", gap=1.05)
    _text(ax, ce - _BW / 2 - 0.75, enc["top"] + 0.65, L["encoder"], size=FONT + 1, weight="bold", ha="left")

    # decoder
    x_mem = (ce + cd) / 2 + 0.2
    enc_top = enc["top"]
    dec = _decoder_column(ax, cd, y_stack, L, x_memory=x_mem, y_memory=enc_top + 1.25)
    _line(ax, [(ce, enc_top), (ce, enc_top + 1.25), (x_mem, enc_top + 1.25)], arrow=False)
    _text(ax, (ce + x_mem) / 2 + 0.7, enc_top + 1.65, L["enc_out"], size=FONT - 2, style="italic", color=MUTED)
    _repeated(ax, cd, y_stack, dec["top"], "right", gap=1.05)
    _text(ax, cd - _BW / 2 - 0.3, dec["top"] + 0.65, L["decoder"], size=FONT + 1, weight="bold", ha="left")

    # output head
    y_lin = dec["top"] + 1.35
    y_soft = y_lin + 1.25
    _line(ax, [(cd, dec["top"]), (cd, y_lin - 0.3)])
    _box(ax, cd, y_lin, _BW * 0.8, 0.6, L["linear"], "linear")
    _line(ax, [(cd, y_lin + 0.3), (cd, y_soft - 0.3)])
    _box(ax, cd, y_soft, _BW * 0.8, 0.6, L["softmax"], "softmax")
    _line(ax, [(cd, y_soft + 0.3), (cd, y_soft + 0.85)])
    _text(ax, cd, y_soft + 1.15, L["probs"], size=FONT)
    return localise(fig, lang)


def _one_layer(
    lang: str, draw, *, size: tuple[float, float], scale: float, cx: float, x: str, length: str, side: str
) -> Figure:
    """One layer, drawn by ``draw(ax, cx, y0, labels)`` (which returns its top), between its input
    ``x`` and its output, both (B, ``length``, d_model); the frame and "N×" on the residual's ``side``."""
    fig, ax = _canvas(*size, scale=scale)
    y0 = 1.2
    shape = f"(B, {length}, d_model)"
    _text(ax, cx, 0.45, tr(lang, f"entrada ${x}$  {shape}", f"input ${x}$  {shape}"), size=FONT)
    _line(ax, [(cx, 0.75), (cx, y0)], arrow=False)
    top = draw(ax, cx, y0, _labels(lang))
    _repeated(ax, cx, y0, top, side, gap=1.0)
    _line(ax, [(cx, top), (cx, top + 1.0)])
    _text(ax, cx, top + 1.3, tr(lang, f"salida  {shape}", f"output  {shape}"), size=FONT)
    return localise(fig, lang)


def draw_encoder_block(lang: str = "es") -> Figure:
    """One encoder layer: self-attention and feed-forward, each with add & norm."""
    draw = lambda ax, cx, y0, L: _encoder_column(ax, cx, y0, L, qkv=True)["top"]  # noqa: E731
    return _one_layer(lang, draw, size=(9.6, 9.3), scale=0.7, cx=5.1, x="x", length="S", side="left")


def draw_decoder_block(lang: str = "es") -> Figure:
    """One decoder layer: masked self-attention, cross-attention over the encoder output, feed-forward."""

    def draw(ax: Axes, cx: float, y0: float, L: dict[str, str]) -> float:
        x_mem = 2.05
        top = _decoder_column(ax, cx, y0, L, x_memory=x_mem, y_memory=1.75, qkv=True)["top"]
        memory = tr(lang, "salida del codificador\n(B, S, d_model)", "encoder output\n(B, S, d_model)")
        _text(ax, x_mem, 1.1, memory, size=FONT - 1)
        return top

    return _one_layer(lang, draw, size=(11.4, 12.3), scale=0.66, cx=6.6, x="y", length="T", side="right")
