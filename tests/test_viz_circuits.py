"""The circuit figures draw what they are given, with their labels in both languages and numbers the reader's way."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import pytest  # noqa: E402
import torch  # noqa: E402

from minitransformer.viz.circuits import (  # noqa: E402
    plot_circuits,
    plot_head_patterns,
    plot_loss_by_position,
    plot_phase_change,
)


@pytest.mark.parametrize("lang", ["es", "en"])
def test_phase_change_draws_the_loss_and_two_scores_per_head_with_the_steps_marked(lang):
    steps = [0, 25, 50, 75]
    induction = [torch.tensor([[0.0, 0.1], [0.1, 0.2]]) * k for k in range(4)]  # (L, H) per record
    previous = [torch.full((2, 2), 0.1 * k) for k in range(4)]
    fig = plot_phase_change(steps, [3.5, 3.4, 1.0, 0.1], induction, previous, lang, onset=50, halfway=50)
    top, bottom = fig.axes
    assert top.lines[0].get_ydata().tolist() == [3.5, 3.4, 1.0, 0.1]
    assert sum(1 for line in top.lines if line.get_xdata()[0] == 50) == 2  # onset and halfway
    curves = [line for line in bottom.lines if len(line.get_xdata()) == 4]
    assert len(curves) == 8  # two scores for each of four heads
    assert curves[6].get_ydata().tolist() == pytest.approx([0.0, 0.2, 0.4, 0.6])  # induction of head 1.1
    assert curves[6].get_linestyle() == "-" and curves[7].get_linestyle() == "--"
    labels = [t.get_text() for t in bottom.get_legend().get_texts()]
    assert labels[6] == ("inducción 1.1" if lang == "es" else "induction 1.1")  # a head's name is not a number
    assert top.get_ylabel() == ("pérdida de copia (nats)" if lang == "es" else "copy loss (nats)")
    assert bottom.get_xlabel() == ("paso de entrenamiento" if lang == "es" else "training step")
    marks = [t.get_text() for t in top.get_legend().get_texts()]
    assert marks[0] == ("inducción > 0,5" if lang == "es" else "induction > 0.5")


@pytest.mark.parametrize("lang", ["es", "en"])
def test_loss_by_position_draws_each_curve_and_marks_early_and_late(lang):
    fig = plot_loss_by_position(
        {"a": [3.5, 3.0, 0.5, 0.1], "b": torch.tensor([3.4, 3.4, 3.4, 3.4])}, lang, early=1, late=3, level=3.47
    )
    ax = fig.axes[0]
    assert ax.lines[0].get_ydata().tolist() == [3.5, 3.0, 0.5, 0.1]
    assert ax.lines[1].get_xdata().tolist() == [0, 1, 2, 3]
    assert [t.get_text() for t in ax.texts] == (["temprana", "tardía"] if lang == "es" else ["early", "late"])
    assert [line.get_xdata()[0] for line in ax.lines[3:]] == [1, 3]
    assert ax.get_xlabel() == ("posición t en el contexto" if lang == "es" else "position t in the context")


@pytest.mark.parametrize("lang", ["es", "en"])
def test_head_patterns_one_panel_per_head_with_the_period_marked(lang):
    pattern = torch.tril(torch.ones(6, 6))
    pattern = pattern / pattern.sum(-1, keepdim=True)
    fig = plot_head_patterns([pattern, pattern.T], ["0.1", "b"], lang, period=2)
    heads = fig.axes[:2]
    assert [ax.get_title() for ax in heads] == ["0.1", "b"]  # a head's name, not a number
    assert torch.allclose(torch.as_tensor(heads[0].images[0].get_array()), pattern)
    assert len(heads[0].lines) == 4  # a horizontal and a vertical line at positions 2 and 4
    assert heads[1].get_xlabel() == ("posición de la clave" if lang == "es" else "key position")
    assert fig.axes[2].get_ylabel() == ("peso de atención" if lang == "es" else "attention weight")


@pytest.mark.parametrize("lang", ["es", "en"])
def test_phase_change_with_the_in_context_score_in_a_panel_of_its_own(lang):
    steps = [0, 25, 50, 75]
    scores = [torch.full((2, 2), 0.1 * k) for k in range(4)]
    fig = plot_phase_change(
        steps, [3.5, 3.4, 1.0, 0.1], scores, scores, lang, onset=50, halfway=50, in_context=[0.0, -0.2, -2.5, -3.5]
    )
    top, middle, bottom = fig.axes[:3]
    assert middle.lines[0].get_ydata().tolist() == [0.0, -0.2, -2.5, -3.5]
    assert sum(1 for line in middle.lines if line.get_xdata()[0] == 50) == 2  # onset and halfway on it too
    assert middle.get_ylabel() == ("aprendizaje en\ncontexto (nats)" if lang == "es" else "in-context\nlearning (nats)")


@pytest.mark.parametrize("lang", ["es", "en"])
def test_circuits_one_panel_each_scaled_to_its_largest_entry(lang):
    a = torch.eye(4) * 3 - 1
    fig = plot_circuits([a, -a], ["1.0", "b"], lang)
    first, second = fig.axes[:2]
    assert [first.get_title(), second.get_title()] == ["1.0", "b"]
    assert torch.allclose(torch.as_tensor(first.images[0].get_array()), a / 2)  # its largest |entry| is 2
    assert first.get_xlabel() == ("logit que sube" if lang == "es" else "logit raised")
    assert first.images[0].get_clim() == (-1, 1)


def test_circuits_take_one_x_label_per_panel_and_name_the_rows_once():
    a = torch.eye(3)
    fig = plot_circuits([a, a], ["x", "y"], "en", xlabel=["first", "second"], ylabel="rows")
    assert [ax.get_xlabel() for ax in fig.axes[:2]] == ["first", "second"]
    assert [ax.get_ylabel() for ax in fig.axes[:2]] == ["rows", ""]
