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
    assert len(bars) == 16  # the original behind, in grey, and the filtered one in front
    grey, blue = bars[:8], bars[8:]
    assert [b.get_height() for b in grey] == pytest.approx(probs.sort(descending=True).values[:8].tolist())
    assert sum(b.get_height() > 0 for b in blue) == 5  # the filter's zeros are drawn empty...
    assert len(fig.axes[1].lines[0].get_xdata()) == 3  # ...over their grey bar, with a cross
    assert fig.axes[1].get_ylim()[1] < 0.5  # the axis fits the bars (not 0-1)
    note = fig.axes[1].texts[0].get_text()
    assert note.endswith("quedan 5 de 20" if lang == "es" else "5 of 20 kept")  # even those not shown
    assert fig.axes[0].get_ylabel() == ("probabilidad" if lang == "es" else "probability")
    fig = plot_validity_diversity({"τ = 0.5": (0.9, 0.5), "y": (1.0, 0.01)}, lang=lang, ceiling=0.83)
    assert len(fig.axes[0].lines) == 3 and fig.axes[0].lines[2].get_xdata()[0] == pytest.approx(83)
    legend = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert legend[:2] == ["τ = 0,5" if lang == "es" else "τ = 0.5", "y"]  # the labels' numbers the reader's way
    fig = plot_step_times([1, 2, 3], {"a": [0.001, 0.002, 0.003], "b": [0.001] * 3}, lang=lang)
    assert fig.axes[0].lines[0].get_ydata().tolist() == [1.0, 2.0, 3.0]  # milliseconds
    assert fig.axes[0].get_ylabel() == ("ms por paso (un token)" if lang == "es" else "ms per step (one token)")
    fig = plot_step_times([1, 2], {"a": [0.008, 0.016]}, lang=lang, batch=8)  # each step writes 8 tokens: not per token
    assert fig.axes[0].get_ylabel() == (
        "ms por paso (8 secuencias, un token cada una)" if lang == "es" else "ms per step (8 sequences, one token each)"
    )


@pytest.mark.parametrize("lang", ["es", "en"])
def test_two_filters_that_keep_different_tokens_draw_different_panels(lang):
    """Top-k and top-p keeping different sets are told apart in the figure (the front bars differ)."""
    from minitransformer.sampling import next_token_probs

    logits = torch.randn(30, generator=torch.Generator().manual_seed(1)) * 2
    panels = {"original": next_token_probs(logits), "k": next_token_probs(logits, top_k=3)}
    panels["p"] = next_token_probs(logits, top_p=0.7)
    assert int((panels["k"] > 0).sum()) != int((panels["p"] > 0).sum())
    fig = plot_next_token(panels, [f"t{i}" for i in range(30)], lang=lang, top=12)

    def front(ax):
        return [round(b.get_height(), 6) for b in ax.patches[12:]]

    assert front(fig.axes[1]) != front(fig.axes[2])
    assert sum(h > 0 for h in front(fig.axes[1])) == 3
