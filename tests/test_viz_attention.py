"""The attention figures: they return a figure, draw what they are given, label in the caller's language."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from minitransformer.attention import causal_mask, combine_masks, padding_mask  # noqa: E402
from minitransformer.viz.attention import (  # noqa: E402
    plot_attention,
    plot_heads,
    plot_mask,
    plot_masks,
    plot_scaling,
)


def texts(fig: Figure) -> str:
    return "\n".join(t.get_text() for t in fig.findobj(matplotlib.text.Text) if t.get_text())


def images(fig: Figure) -> list[np.ndarray]:
    return [np.asarray(im.get_array()) for ax in fig.axes for im in ax.get_images()]


@pytest.mark.parametrize("lang,word,other", [("es", "claves", "keys\n"), ("en", "keys", "claves")])
def test_labels_in_the_callers_language(lang, word, other):
    w = torch.softmax(torch.randn(3, 4), dim=-1)
    for fig in (
        plot_attention(w, lang=lang),
        plot_heads(w[None].repeat(2, 1, 1), lang=lang),
        plot_mask(w > 0.2, lang=lang),
        plot_masks([w > 0.2, w > 0.3], lang=lang),
    ):
        assert isinstance(fig, Figure)
        text = texts(fig) + "\n"
        assert word in text and other not in text


def test_heatmaps_draw_the_given_values():
    w = torch.softmax(torch.randn(2, 3, 5), dim=-1)  # (H, T, S)
    fig = plot_heads(w, lang="en", titles=["right", "wrong"], annotate=True)
    drawn = images(fig)
    assert len(drawn) == 2
    for h in range(2):
        np.testing.assert_allclose(drawn[h], w[h].numpy(), rtol=1e-6)
    assert "right" in texts(fig) and "wrong" in texts(fig)
    assert f"{w[1, 2, 4].item():.2f}" in texts(fig)  # annotated


def test_masks_side_by_side():
    tokens = torch.tensor([[3, 4, 0]])
    pad = padding_mask(tokens, 0)  # (1, 1, 1, 3)
    causal = causal_mask(3)  # (1, 1, 3, 3)
    both = combine_masks(pad, causal)  # (1, 1, 3, 3)
    fig = plot_masks([pad.expand(1, 1, 3, 3), causal, both], titles=["a", "b", "c"], lang="es")
    drawn = images(fig)
    assert len(drawn) == 3
    np.testing.assert_array_equal(drawn[2].astype(bool), both[0, 0].numpy())
    np.testing.assert_array_equal(drawn[1].astype(bool), np.tril(np.ones((3, 3), dtype=bool)))


def test_scaling_figure():
    d = [4, 16, 64]
    fig = plot_scaling(d, [4.1, 15.8, 64.5], [1.0, 1.0, 1.0], [0.5, 0.7, 0.9], [0.35, 0.36, 0.35], lang="es")
    assert len(fig.axes) == 2
    left, right = fig.axes
    np.testing.assert_allclose(left.lines[0].get_ydata(), [4.1, 15.8, 64.5])
    np.testing.assert_allclose(right.lines[1].get_ydata(), [0.35, 0.36, 0.35])
    assert "satura" in texts(fig)
