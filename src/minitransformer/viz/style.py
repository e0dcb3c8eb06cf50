"""What every figure shares: numbers the reader's way (decimal comma in Spanish) and the
arrays it draws (:func:`to_numpy`). The figure style itself is ``runtime.FIGURE_STYLE``."""

from __future__ import annotations

import numpy as np
import torch
from matplotlib.figure import Figure
from matplotlib.text import Text
from matplotlib.ticker import Formatter, FuncFormatter

from ..i18n import check_lang, decimal_commas


def to_numpy(x) -> np.ndarray:
    """A tensor (detached, on the CPU) or anything array-like, as a float NumPy array."""
    if isinstance(x, torch.Tensor):
        return x.detach().float().cpu().numpy()
    return np.asarray(x, dtype=float)


class _DecimalComma(Formatter):
    """Wrap a tick formatter so that its numbers use a decimal comma."""

    def __init__(self, inner: Formatter):
        self.inner = inner

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def set_axis(self, axis):
        self.axis = axis
        self.inner.set_axis(axis)

    def set_locs(self, locs):
        self.inner.set_locs(locs)

    def __call__(self, x, pos=None):
        return _comma(self.inner(x, pos))

    def format_ticks(self, values):
        return [_comma(s) for s in self.inner.format_ticks(values)]

    def get_offset(self):
        return _comma(self.inner.get_offset())


def _comma(text: str) -> str:
    # inside mathtext a bare "," is punctuation followed by a space: "{,}" is the digit separator
    return decimal_commas(text, "es", "{,}" if "$" in text else ",")


def number_ticks(lang: str) -> FuncFormatter:
    """Tick labels as short as the number (0, 0.25, 1e+03: ``:g``), with a decimal comma in Spanish and a true
    minus sign (−2, as Matplotlib's own ticks write it)."""
    check_lang(lang)

    def tick(x: float, _pos: int | None) -> str:
        text = decimal_commas(f"{x:g}", lang)
        return "\u2212" + text[1:] if x < 0 else text

    return FuncFormatter(tick)


def localise(fig: Figure, lang: str) -> Figure:
    """Write the figure's numbers the reader's way: in Spanish, 0,5 (ticks, colour bars, titles,
    legends and annotations); in English, unchanged. Returns ``fig``."""
    if check_lang(lang) != "es":
        return fig
    for text in fig.findobj(Text):
        text.set_text(_comma(text.get_text()))
    for ax in fig.axes:
        for axis in (ax.xaxis, ax.yaxis):
            for which in ("major", "minor"):
                current = axis.get_major_formatter() if which == "major" else axis.get_minor_formatter()
                if not isinstance(current, _DecimalComma):
                    wrapped = _DecimalComma(current)
                    if which == "major":
                        axis.set_major_formatter(wrapped)
                    else:
                        axis.set_minor_formatter(wrapped)
    return fig
