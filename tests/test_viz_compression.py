"""The compression figures draw the scores they are given, best at the bottom, with labels and numbers the
reader's way in both languages."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import pytest  # noqa: E402

from minitransformer.viz.compression import plot_bits_per_byte, plot_compute_curve  # noqa: E402

SCORES = {"gzip": {"es": 2.58, "en": 2.68}, "model": {"es": 2.10, "en": 2.30}, "bz2": {"es": 2.02, "en": 2.10}}


@pytest.mark.parametrize("lang", ["es", "en"])
def test_bits_per_byte_bars_best_at_the_bottom_with_the_highlighted_one_coloured(lang):
    fig = plot_bits_per_byte(SCORES, lang, highlight="model")
    es, en = fig.axes
    assert [t.get_text() for t in es.get_yticklabels()] == ["gzip", "model", "bz2"]  # bottom to top: worst last
    assert [t.get_text() for t in en.get_yticklabels()] == ["gzip", "model", "bz2"]
    assert [round(b.get_width(), 2) for b in es.patches] == [2.58, 2.10, 2.02]
    colours = [b.get_facecolor() for b in en.patches]
    assert colours[1] != colours[0] == colours[2]
    labels = {t.get_text() for t in es.texts}
    assert ("2,58" if lang == "es" else "2.58") in labels
    assert es.get_title() == ("texto reservado, español" if lang == "es" else "held-out text, Spanish")
    assert en.get_xlabel() == ("bits por byte (menos es mejor)" if lang == "es" else "bits per byte (fewer is better)")


@pytest.mark.parametrize("lang", ["es", "en"])
def test_compute_curve_draws_the_curve_a_level_per_baseline_and_the_marker(lang):
    curves = {"es": [3.5, 2.2, 2.0], "en": [3.6, 2.3, 2.1]}
    fig = plot_compute_curve([0, 250, 500], curves, {"gzip": SCORES["gzip"], "bz2": SCORES["bz2"]}, lang, marker=250)
    es, en = fig.axes
    assert list(es.lines[0].get_ydata()) == curves["es"] and list(en.lines[0].get_ydata()) == curves["en"]
    levels = sorted(line.get_ydata()[0] for line in en.lines[1:3])
    assert levels == [2.10, 2.68]
    assert en.lines[3].get_xdata()[0] == 250  # the recipe's steps
    legend = [t.get_text() for t in fig.legends[0].get_texts()]
    assert legend == [("modelo" if lang == "es" else "model"), "gzip", "bz2"]
    assert es.get_ylabel() == ("bits por byte" if lang == "es" else "bits per byte")
