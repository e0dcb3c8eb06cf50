"""Draw the architecture diagrams that markdown embeds (notebooks, README) into img/{es,en}/*.png.

Diagrams that a notebook draws in a code cell (``fig = draw_decoder_block(lang=LANG)``) need
no file.

    python tools/draw_diagrams.py              # writes img/{es,en}/{transformer,...}.png
    python tools/draw_diagrams.py --out DIR    # writes DIR/{es,en}/... instead

The files are deterministic (fixed size and dpi, no metadata): running the script twice gives
the same bytes, and tests/test_viz.py checks that the committed PNGs are what the code draws.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402

from minitransformer.viz import diagrams  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
DPI = 150
DIAGRAMS = {
    "transformer": diagrams.draw_transformer,
    "encoder_block": diagrams.draw_encoder_block,
}


def draw_all(out: Path) -> list[Path]:
    """Write every diagram in both languages under ``out``; returns the paths written."""
    written = []
    for lang in ("es", "en"):
        (out / lang).mkdir(parents=True, exist_ok=True)
        for name, draw in DIAGRAMS.items():
            path = out / lang / f"{name}.png"
            fig = draw(lang)
            fig.savefig(path, dpi=DPI, facecolor="white", metadata={"Software": None})
            plt.close(fig)
            written.append(path)
    return written


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=ROOT / "img", help="output folder (default: img/)")
    args = parser.parse_args(argv)
    for path in draw_all(args.out):
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
