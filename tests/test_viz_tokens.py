"""The token figures draw what they are given, with labels in both languages; a token's text is
never rewritten as a number."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import pytest  # noqa: E402
from matplotlib.patches import FancyBboxPatch  # noqa: E402

from minitransformer.viz.tokens import plot_sequence_cost, plot_tokenisations, plot_tokens_per_word  # noqa: E402


@pytest.mark.parametrize("lang", ["es", "en"])
def test_tokenisations_draw_one_box_per_token_and_keep_their_text(lang):
    rows = {"a": ["¿", "En", " qué", "\\xc3"], "b": ["0.5", " año"]}
    fig = plot_tokenisations(rows, lang=lang)
    ax = fig.axes[0]
    assert sum(isinstance(p, FancyBboxPatch) for p in ax.patches) == 6
    texts = [t.get_text() for t in ax.texts]
    assert "0.5" in texts and "␣año" in texts and "\\xc3" in texts  # a token is text, never "0,5"
    assert "4" in texts and "2" in texts  # each row's count
    assert [t.get_text() for t in ax.get_yticklabels()] == ["b", "a"]
    assert ax.get_title() == ("Un texto, varios tokenizadores" if lang == "es" else "One text, several tokenizers")


@pytest.mark.parametrize("lang", ["es", "en"])
def test_tokens_per_word_lines_and_points(lang):
    curves = {"en → es": [5.7, 2.8], "en → en": [5.5, 1.5], "es → es": [5.7, 1.6]}
    fig = plot_tokens_per_word([256, 3000], curves, lang=lang, points={"MiniLM → es": (30522, 1.98)})
    ax = fig.axes[0]
    assert len(ax.lines) == 4
    assert ax.lines[0].get_color() == ax.lines[1].get_color() != ax.lines[2].get_color()  # colour: trained on
    assert ax.lines[0].get_linestyle() == ax.lines[2].get_linestyle() != ax.lines[1].get_linestyle()  # style: text
    assert ax.lines[1].get_ydata().tolist() == [5.5, 1.5]
    assert ax.get_ylabel() == ("tokens por palabra" if lang == "es" else "tokens per word")


@pytest.mark.parametrize("lang", ["es", "en"])
def test_sequence_cost_bars_are_t_t_squared_t_v_and_v_d(lang):
    fig = plot_sequence_cost(["bytes", "BPE"], [100, 30], [256, 3000], 8, lang=lang)
    widths = [[bar.get_width() for bar in ax.patches] for ax in fig.axes]
    assert widths == [[100, 30], [10_000, 900], [25_600, 90_000], [2048, 24_000]]
    assert fig.axes[2].get_title() == ("logits de la salida T · V" if lang == "es" else "output logits T · V")
    labels = [t.get_text() for t in fig.axes[1].texts]
    assert labels == ["10 000", "900"]  # integers with the course's thousands space
    assert fig.axes[0].get_title() == ("longitud T (tokens)" if lang == "es" else "length T (tokens)")
