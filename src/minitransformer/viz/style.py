"""One look for every figure: large, legible on a projector."""

from __future__ import annotations

import matplotlib as mpl

RC = {
    "figure.dpi": 100,
    "savefig.dpi": 100,
    "figure.figsize": (7.0, 4.5),
    "font.size": 12,
    "axes.titlesize": 14,
    "axes.labelsize": 12,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "image.cmap": "viridis",
    "svg.hashsalt": "minitransformer",
}


def apply() -> None:
    """Apply the course's matplotlib settings."""
    mpl.rcParams.update(RC)
