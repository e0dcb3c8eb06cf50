"""Figures of notebook 10 take tensors and a language and return a figure; every text they draw
lies inside the figure, in both languages."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import pytest  # noqa: E402
import torch  # noqa: E402
from matplotlib.text import Text  # noqa: E402

from minitransformer.attention_cost import power_law_fit  # noqa: E402
from minitransformer.course.ablation import FULL_SETUP, MEASURED, VARIANTS, counting_task  # noqa: E402
from minitransformer.runtime import setup as notebook_setup  # noqa: E402  (a module-level "setup" is a test hook to pytest 8.0)
from minitransformer.viz.modern import plot_ablation, plot_attention_cost, plot_rope_scores  # noqa: E402

FAKE = {v.name: [0.7 + 0.01 * i + 0.001 * s for s in range(6)] for i, v in enumerate(VARIANTS)}


def assert_every_text_inside(fig):
    """No label, title, tick or legend entry is cut by the figure's edge (as notebooks save it)."""
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    box = fig.bbox
    hidden = set()  # tick labels outside the axis' view are not drawn
    for ax in fig.axes:
        for axis in (ax.xaxis, ax.yaxis):
            low, high = sorted(axis.get_view_interval())
            for tick in axis.get_major_ticks() + axis.get_minor_ticks():
                if not low - 1e-9 * abs(high - low) <= tick.get_loc() <= high + 1e-9 * abs(high - low):
                    hidden |= {id(tick.label1), id(tick.label2)}
    for text in fig.findobj(Text):
        if id(text) in hidden or not text.get_visible() or not text.get_text().strip():
            continue
        extent = text.get_window_extent(renderer)
        assert extent.x0 >= box.x0 - 1 and extent.x1 <= box.x1 + 1, f"cut horizontally: {text.get_text()!r}"
        assert extent.y0 >= box.y0 - 1 and extent.y1 <= box.y1 + 1, f"cut vertically: {text.get_text()!r}"


@pytest.fixture(params=["es", "en"])
def lang(request):
    notebook_setup(lang=request.param)  # the notebooks' figure style
    return request.param


def test_rope_scores(lang):
    fig = plot_rope_scores(torch.randn(8, 8), lang=lang)
    assert ("posición" if lang == "es" else "position") in fig.axes[0].get_xlabel()
    assert_every_text_inside(fig)


def test_attention_cost_fits_each_time_curve_by_least_squares(lang):
    lengths = [128, 256, 512, 1024]
    times = {"a": [1.0, 3.5, 15.0, 70.0], "b": [0.5, 1.5, 4.0, 9.0]}
    fig = plot_attention_cost(lengths, times, {"m": [0.25, 1.0, 4.0, 16.0]}, lang=lang)
    assert len(fig.axes) == 2 and ("longitud" if lang == "es" else "length") in fig.axes[0].get_xlabel()
    assert len(fig.axes[0].lines) == 4 and len(fig.axes[1].lines) == 1  # each time curve and its fit
    for curve, fit in zip(fig.axes[0].lines[0::2], fig.axes[0].lines[1::2]):
        slope, factor = power_law_fit(lengths, curve.get_ydata())
        torch.testing.assert_close(
            torch.as_tensor(fit.get_ydata()), factor * torch.tensor(lengths, dtype=torch.float64) ** slope
        )
    legend = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    slope_a = f"{power_law_fit(lengths, times['a'])[0]:.2f}"
    assert any((slope_a.replace(".", ",") if lang == "es" else slope_a) in t for t in legend)
    assert ("calculada" if lang == "es" else "computed") in fig.axes[1].get_title()  # arithmetic, not a measurement
    assert_every_text_inside(fig)


@pytest.mark.parametrize("results", [FAKE, MEASURED], ids=["fake", "measured"])
def test_ablation_figure(results, lang):
    if not results:
        pytest.skip("no measured table yet")
    labels = {v.name: getattr(v, lang) for v in VARIANTS}
    fig = plot_ablation(results, labels, counting_task(FULL_SETUP).floor, lang=lang)
    ticks = [t.get_text() for t in fig.axes[0].get_yticklabels()]
    assert ticks[0] == labels["modern"] and len(ticks) == len(results)
    assert_every_text_inside(fig)
    with pytest.raises(ValueError):
        plot_ablation(results, labels, 100.0, lang=lang)  # losses below the floor: refused
