"""Figures of notebook 10 take tensors and a language and return a figure."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import pytest  # noqa: E402
import torch  # noqa: E402

from minitransformer.ablation import MEASURED, VARIANTS  # noqa: E402
from minitransformer.viz.modern import plot_ablation, plot_attention_cost, plot_rope_scores  # noqa: E402


@pytest.mark.parametrize("lang,word", [("es", "posición"), ("en", "position")])
def test_rope_scores(lang, word):
    fig = plot_rope_scores(torch.randn(8, 8), lang=lang)
    assert word in fig.axes[0].get_xlabel()


@pytest.mark.parametrize("lang,word", [("es", "longitud"), ("en", "length")])
def test_attention_cost(lang, word):
    fig = plot_attention_cost([128, 256], {"a": [1.0, 3.5], "b": [0.5, 1.5]}, {"m": [0.25, 1.0]}, lang=lang)
    assert len(fig.axes) == 2 and word in fig.axes[0].get_xlabel()
    assert len(fig.axes[0].lines) == 3 and len(fig.axes[1].lines) == 1  # the T² guide only on the time panel
    fig.canvas.draw()
    if lang == "es":
        assert any("," in t.get_text() for t in fig.axes[1].get_yticklabels())


@pytest.mark.parametrize("lang", ["es", "en"])
def test_ablation_figure(lang):
    labels = {v.name: getattr(v, lang) for v in VARIANTS}
    fig = plot_ablation(MEASURED, labels, lang=lang)
    ticks = [t.get_text() for t in fig.axes[0].get_yticklabels()]
    assert ticks[0] == labels["modern"] and len(ticks) == len(MEASURED)
