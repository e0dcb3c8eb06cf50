"""The generation figures draw what they are given, with labels in both languages."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import pytest  # noqa: E402
import torch  # noqa: E402

from minitransformer.viz.generation import plot_next_token, plot_step_times, plot_validity_diversity  # noqa: E402


@pytest.mark.parametrize("lang", ["es", "en"])
def test_generation_figures(lang):
    probs = torch.softmax(torch.randn(20, generator=torch.Generator().manual_seed(0)), -1)
    filtered = torch.where(probs >= probs.sort(descending=True).values[4], probs, 0.0)
    fig = plot_next_token({"a": probs, "b": filtered / filtered.sum()}, [f"t{i}" for i in range(20)], lang=lang, top=8)
    bars = fig.axes[1].patches
    assert len(bars) == 8 and sum(b.get_height() > 0 for b in bars) == 5  # the filter's zeros are drawn empty
    assert fig.axes[0].get_ylabel() == ("probabilidad" if lang == "es" else "probability")
    fig = plot_validity_diversity({"τ = 0.5": (0.9, 0.5), "y": (1.0, 0.01)}, lang=lang)
    assert len(fig.axes[0].lines) == 2
    legend = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert legend == ["τ = 0,5" if lang == "es" else "τ = 0.5", "y"]  # the labels' numbers the reader's way
    fig = plot_step_times([1, 2, 3], {"a": [0.001, 0.002, 0.003], "b": [0.001] * 3}, lang=lang)
    assert fig.axes[0].lines[0].get_ydata().tolist() == [1.0, 2.0, 3.0]  # milliseconds
