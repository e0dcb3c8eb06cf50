"""The live controls (viz.live): their callbacks are plain functions, so setting a control's value and reading the
figure shows what a slider shows; the widget redraws when its slider moves, uses core ipywidgets only, and the
cell's output carries the still figure beside the widget's view. The stored notebooks hold the still figure only.
A real browser moving a slider in JupyterLab: tests/test_browser.py."""

from __future__ import annotations

import base64
import io
import json
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402
from matplotlib.patches import Rectangle  # noqa: E402
from PIL import Image  # noqa: E402

from minitransformer.generation import generate  # noqa: E402
from minitransformer.gpt import GPT, GPTConfig  # noqa: E402
from minitransformer.i18n import CourseError  # noqa: E402
from minitransformer.positional import sinusoidal_encoding  # noqa: E402
from minitransformer.sampling import next_token_probs  # noqa: E402
from minitransformer.viz import live  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
V = 24
TOKENS = [f"t{i}" for i in range(V)]


@pytest.fixture(scope="module")
def gpt():
    torch.manual_seed(0)
    config = GPTConfig(vocab_size=V, max_len=48, d_model=16, n_heads=2, n_layers=1, d_ff=32, dropout=0.0)
    model = GPT(config).eval()
    with torch.no_grad():  # a peaked, uneven distribution, so that each filter keeps a different set
        model.token.weight.mul_(6)
    return model


PROMPTS = {"a b": [1, 2], "c": [3]}


def sampling_control(gpt, lang="en", **kw):
    return live.next_token_control(
        gpt, PROMPTS, TOKENS, lang, decode=lambda row: " ".join(TOKENS[i] for i in row), check=lambda row: True, **kw
    )


def bars(ax, top=12):
    """The heights of the front bars of a plot_next_token panel (the last ``top`` bars drawn)."""
    return np.array([b.get_height() for b in ax.patches if b.get_zorder() > 0][-top:])


def shaded(ax):
    """The token positions the bands behind the bars cover."""
    bands = [b for b in ax.patches if b.get_zorder() == 0]
    return {j for b in bands for j in range(round(b.get_x() + 0.5), round(b.get_x() + b.get_width() + 0.5))}


def shown_order(z, top=12):
    return np.argsort(-next_token_probs(z).numpy(), kind="stable")[:top]


@pytest.mark.slow
@pytest.mark.parametrize("lang", ["es", "en"])
def test_the_bars_are_the_distribution_sampling_computes(gpt, lang):
    control = sampling_control(gpt, lang)
    with torch.no_grad():
        z = {label: gpt(torch.tensor([ids]))[0, -1] for label, ids in PROMPTS.items()}
    for values in [
        dict(temperature=0.5, top_k=5, top_p=1.0),
        dict(temperature=1.0, top_k=V, top_p=0.6),
        dict(temperature=2.0, top_k=3, top_p=0.3, prompt="c"),
        dict(temperature=0.0),
    ]:
        (fig,) = control.set(**values)
        s = control.values
        order = shown_order(z[s["prompt"]])
        want = next_token_probs(z[s["prompt"]], s["temperature"], s["top_k"], s["top_p"]).numpy()[order]
        np.testing.assert_allclose(bars(fig.axes[1]), want, rtol=1e-6, atol=1e-7)
        np.testing.assert_allclose(bars(fig.axes[0]), next_token_probs(z[s["prompt"]]).numpy()[order], rtol=1e-6)
        # the kept set is shaded: the bands cover exactly the kept tokens among those shown
        assert shaded(fig.axes[1]) == {j for j in range(len(order)) if want[j] > 0}
        assert shaded(fig.axes[0]) == set()  # the original alone: nothing filtered
    assert control.values["temperature"] == 0.0 and bars(fig.axes[1]).max() == 1  # τ = 0: greedy
    title = fig.axes[1].get_title()
    assert title.startswith("τ = 0 (voraz)" if lang == "es" else "τ = 0 (greedy)")
    (fig,) = control.set(temperature=0.5, top_p=0.9)
    assert fig.axes[1].get_title() == (
        "τ = 0,5  ·  k = 3  ·  p = 0,9" if lang == "es" else "τ = 0.5  ·  k = 3  ·  p = 0.9"
    )
    assert fig._suptitle.get_text() == ("Siguiente token tras «c»" if lang == "es" else "Next token after “c”")


def test_the_sample_button_is_generate_with_the_settings_and_the_seed(gpt):
    control = sampling_control(gpt, lines=3, max_new_tokens=6)
    control.set(temperature=1.5, top_k=10, top_p=0.9)
    text = control.act()  # the seed in the box: 0 at the start
    rows = generate(
        gpt,
        torch.tensor([[1, 2]] * 3),
        6,
        temperature=1.5,
        top_k=10,
        top_p=0.9,
        generator=torch.Generator().manual_seed(0),
    )
    assert text.splitlines() == ["seed 0:", *("✓ " + " ".join(TOKENS[i] for i in row) for row in rows)]
    assert control.seed == 1  # the box moves on: the next press draws other lines ...
    assert control.act() != text
    assert control.act(seed=0) == text  # ... and the same seed gives the same lines again
    control.set(temperature=0.0)  # greedy: every line the same, whatever the seed
    lines = control.act(seed=5).splitlines()[1:]
    assert len(set(lines)) == 1


def test_moving_a_slider_in_the_widget_redraws_the_figure(gpt):
    control = sampling_control(gpt, "es")
    box = control.widget
    slider = control._inputs["temperature"]
    before = control._image.value
    assert before == control.png
    slider.value = 2.0  # what the browser sends when the slider is let go
    assert control.values["temperature"] == 2.0
    assert control._image.value != before and control._image.value == control.png
    assert control.set(top_k=4) and control._inputs["top_k"].value == 4  # Python moves the slider too
    # labels in the notebook's language, numbers the reader's way
    assert slider.description == "temperatura τ"
    assert ("0,5", 0.5) in slider.options and control._inputs["top_p"].label == "1"
    buttons = [w for w in box.children if type(w).__name__ == "HBox"][0].children
    assert buttons[0].description == "muestrear" and buttons[1].description == "semilla"
    buttons[0].click()
    assert control._output.value.startswith("<pre") and "semilla 0:" in control._output.value
    assert buttons[1].value == 1


def widgets_in(widget):
    yield widget
    for child in getattr(widget, "children", ()):
        yield from widgets_in(child)


@pytest.mark.slow
@pytest.mark.parametrize("lang", ["es", "en"])
def test_core_widgets_only_and_the_still_figure_beside_the_view(gpt, lang):
    """Colab shows core ipywidgets without a custom widget manager: every model and view is a core one. The output
    carries the widget's view and the still figure at the default values (what is stored and shown without a
    kernel), with a text that holds no model id."""
    for control in (sampling_control(gpt, lang), live.encoding_control(20, 16, lang, position=3, pair=1)):
        bundle = control._repr_mimebundle_()
        for w in widgets_in(control.widget):
            assert w._model_module in live.CORE_WIDGETS and w._view_module in live.CORE_WIDGETS, type(w)
        assert set(bundle) == {WIDGET_VIEW, "image/png", "text/plain"}
        assert bundle[WIDGET_VIEW]["model_id"] == control.widget.model_id
        assert bundle["image/png"] == control.png == control._image.value
        assert bundle["text/plain"] == repr(control.figures[0]) and control.widget.model_id not in bundle["text/plain"]
    still = live.encoding_control(20, 16, lang, position=3, pair=1).png
    assert bundle["image/png"] == still  # the still figure is the figure at the default values, drawn again the same


@pytest.mark.slow
@pytest.mark.parametrize("lang", ["es", "en"])
def test_the_encoding_control_draws_positionals_table(lang):
    control = live.encoding_control(60, 32, lang, position=5, pair=2)
    pe = sinusoidal_encoding(60, 32).numpy()
    for position, pair in [(5, 2), (0, 0), (59, 15), (17, 9)]:
        (fig,) = control.set(position=position, pair=pair)
        table, waves = fig.axes[0], fig.axes[1]  # then the colour bar
        np.testing.assert_array_equal(table.images[0].get_array(), pe)
        assert table.lines[0].get_ydata()[0] == position  # the position's row
        box = [p for p in table.patches if isinstance(p, Rectangle)][0]
        assert box.get_x() == 2 * pair - 0.5 and box.get_width() == 2  # the pair's two columns
        curves = [line for line in waves.lines if len(line.get_xdata()) == 60]
        np.testing.assert_array_equal(curves[0].get_ydata(), pe[:, 2 * pair])
        np.testing.assert_array_equal(curves[1].get_ydata(), pe[:, 2 * pair + 1])
        dots = [line for line in waves.lines if len(line.get_xdata()) == 1 and line.get_marker() == "o"]
        assert [d.get_ydata()[0] for d in dots] == [pe[position, 2 * pair], pe[position, 2 * pair + 1]]
    omega = 10000 ** (-2 * 9 / 32)
    turn = 2 * np.pi / omega
    if lang == "es":
        want = f"Par 9: ω = {omega:.4g}, una vuelta cada {turn:.1f} posiciones".replace(".", ",")
    else:
        want = f"Pair 9: ω = {omega:.4g}, one turn every {turn:.1f} positions"
    assert waves.get_title() == want
    slider = control.widget.children[1]
    assert slider.description == ("frecuencia: par i" if lang == "es" else "frequency: pair i")
    assert slider.label == (f"9  (ω = {omega:.3g})".replace(".", ",") if lang == "es" else f"9  (ω = {omega:.3g})")


def test_the_heads_control_draws_the_chosen_head_of_every_example():
    torch.manual_seed(0)
    maps = {name: [torch.softmax(torch.randn(1, 3, 5, 5), -1) for _ in range(2)] for name in ("one", "two")}
    tokens = {"one": list("abcde"), "two": list("vwxyz")}
    control = live.heads_control(maps, tokens, "en", layer=1, head=2)
    assert [w.description for w in control.widget.children[:2]] == ["layer", "head"]
    assert control.widget.children[0].options == ((str(0), 0), (str(1), 1))
    for layer, head in [(1, 2), (0, 0), (1, 1)]:
        figures = control.set(layer=layer, head=head)
        assert [f._suptitle.get_text() for f in figures] == ["one", "two"]
        for fig, name in zip(figures, maps):
            np.testing.assert_array_equal(fig.axes[0].images[0].get_array(), maps[name][layer][0, head].numpy())
            assert fig.axes[0].get_title() == f"layer {layer}, head {head}"
    # two figures, one PNG: side by side
    widths = [Image.open(io.BytesIO(live.figure_png([f]))).width for f in figures]
    assert Image.open(io.BytesIO(control.png)).width == sum(widths) + 16


def test_pickers_in_a_row_only_when_asked_and_still_wired():
    """Live(pickers_in_a_row=True) puts the button pickers side by side in one row where the first one was; by
    default each control has its own row. Either way a click on a picker redraws."""

    def draw(step, layer, head):
        from matplotlib.figure import Figure

        fig = Figure()
        fig.add_subplot().set_title(f"{step} {layer} {head}")
        return fig

    def controls():
        return {
            "step": live.Control("paso", "step", [0, 10, 20]),
            "layer": live.Control("bloque", "block", [0, 1], buttons=True),
            "head": live.Control("cabeza", "head", [0, 1, 2], buttons=True),
        }

    plain = live.Live(draw, controls(), "en")
    assert [type(w).__name__ for w in plain.widget.children] == [
        "SelectionSlider",
        "ToggleButtons",
        "ToggleButtons",
        "Image",
    ]
    row = live.Live(draw, controls(), "es", pickers_in_a_row=True)
    slider, pickers, image = row.widget.children
    assert type(slider).__name__ == "SelectionSlider" and type(pickers).__name__ == "HBox" and image is row._image
    assert [w.description for w in pickers.children] == ["bloque", "cabeza"]
    before = row._image.value
    pickers.children[1].value = 2  # a click on head 2
    assert row.values["head"] == 2 and row.figures[0].axes[0].get_title() == "0 0 2" and row._image.value != before
    # one picker alone stays as it is
    single = live.Live(
        draw,
        {k: v for k, v in controls().items() if k != "head"} | {"head": live.Control("c", "h", [0])},
        "en",
        pickers_in_a_row=True,
    )
    assert [type(w).__name__ for w in single.widget.children] == [
        "SelectionSlider",
        "ToggleButtons",
        "SelectionSlider",
        "Image",
    ]


def test_a_value_a_control_does_not_have_is_refused_in_both_languages(gpt):
    control = sampling_control(gpt)
    with pytest.raises(CourseError) as e:
        control.set(temperature=0.33)
    assert "temperatura τ" in e.value.es and "temperature τ" in e.value.en
    with pytest.raises(CourseError):
        control.set(tempreature=0.5)
    with pytest.raises(CourseError):
        live.Control("a", "a", [1, 2], 3)
    with pytest.raises(CourseError):
        live.encoding_control(20, 16, "en").set(pair=8)  # 16 dimensions: pairs 0 to 7


LIVE_CELLS = {
    "03": "encoding_control(",
    "08": "heads_control(",
    "09": "next_token_control(",
    "13": "phase_change_control(",
}


@pytest.mark.parametrize("number", sorted(LIVE_CELLS))
@pytest.mark.parametrize("lang", ["es", "en"])
def test_the_stored_notebooks_hold_the_still_figure_and_no_widget_state(number, lang):
    (path,) = (ROOT / "notebooks" / lang).glob(f"{number}_*.ipynb")
    nb = json.loads(path.read_text(encoding="utf-8"))
    assert "widgets" not in nb["metadata"]
    cells = [c for c in nb["cells"] if c["cell_type"] == "code" and LIVE_CELLS[number] in "".join(c["source"])]
    assert len(cells) == 1
    (output,) = cells[0]["outputs"]
    assert output["output_type"] == "execute_result" and set(output["data"]) == {"image/png", "text/plain"}
    assert "".join(output["data"]["text/plain"]).startswith("<Figure size")
    for cell in nb["cells"]:
        for out in cell.get("outputs", []):
            assert WIDGET_VIEW not in out.get("data", {})


@pytest.mark.slow
def test_the_builder_stores_the_still_figure_byte_for_byte(tmp_path):
    """A live cell executed twice by the notebooks' builder (tools/notebooks.py) stores the same bytes: the still
    figure as a PNG and its text, no widget view and no widget state (no model id to sanitise)."""
    import nbformat
    from notebook_tool import nbt

    cells = [
        nbformat.v4.new_code_cell("from minitransformer.runtime import setup\n\nLANG = 'es'\ndevice = setup(0, LANG)"),
        nbformat.v4.new_code_cell(
            "from minitransformer.viz.live import encoding_control\n\n"
            "encoding_control(max_len=30, d_model=16, lang=LANG, position=7, pair=2)"
        ),
    ]
    stored = []
    for run in range(2):
        path = tmp_path / f"run{run}.ipynb"
        nbformat.write(nbformat.v4.new_notebook(cells=cells), path)
        nbt.execute(path)
        nb = json.loads(path.read_text(encoding="utf-8"))
        assert "widgets" not in nb["metadata"]
        (output,) = nb["cells"][1]["outputs"]
        assert set(output["data"]) == {"image/png", "text/plain"}
        stored.append(output)
    assert stored[0] == stored[1]
    png = Image.open(io.BytesIO(base64.b64decode(stored[0]["data"]["image/png"])))
    assert png.size[0] > 600  # the figure, not an empty picture


# --------------------------------------------------------------------------- 13: the phase change

TINY = dict(vocab_size=10, min_period=3, max_period=6, length=16, d_model=16, n_heads=2, steps=40, batch_size=8)
TINY_RUN = dict(record_every=10, probe_size=8, icl_early=1, icl_late=14)


@pytest.fixture(scope="module")
def phase():
    """A short training of notebook 13's recipe, made small: the history holds what the notebook's holds (the
    attention of the probe's first rows at every record), and the probe's periods."""
    from minitransformer.course.induction import InductionRecipe, train_induction_model

    recipe = InductionRecipe(**TINY, **TINY_RUN)
    _, history = train_induction_model(seed=0, recipe=recipe, progress=False)
    history.induction = [s.clone() for s in history.induction]
    history.induction[3][1, 0] = 0.7  # an onset at step 30, whatever this short run learnt
    assert history.onset() == 30
    return history, recipe.probe()[1]


def uniform_scores(periods, T):
    """The uniform causal head's scores on the probe, written out: row t puts 1 / (t + 1) on every position."""
    t = np.arange(T)
    previous = np.mean(1 / (t[1:] + 1))
    weights = [sum(1 / (t + 1) for _ in range(t - P + 1, 0, -P)) for P in periods.tolist() for t in range(P, T)]
    return float(np.mean(weights)), float(previous)


def legend(ax):
    return [text.get_text() for text in ax.get_legend().get_texts()]


@pytest.mark.parametrize("lang", ["es", "en"])
def test_the_phase_change_control_draws_the_stored_pattern_and_scores_of_the_step(phase, lang):
    history, periods = phase
    control = live.phase_change_control(history, periods, lang)
    # at the start: the onset, block 1's head with the highest induction score at the end, the first row
    assert control.values == {"step": 30, "layer": 1, "head": int(history.induction[-1][1].argmax()), "row": 0}
    want_uniform = uniform_scores(periods, 16)
    for step, layer, head, row in [(30, 1, 0, 0), (0, 0, 1, 2), (40, 1, 1, 3), (10, 0, 0, 1)]:
        pattern_fig, scores_fig = control.set(step=step, layer=layer, head=head, row=row)
        r = history.steps.index(step)
        P = int(periods[row])
        # the pattern: exactly the one stored at that step for that head and row, the row's period marked
        ax = pattern_fig.axes[0]
        np.testing.assert_array_equal(ax.images[0].get_array(), history.patterns[r][layer, head, row].numpy())
        word = {"es": ("cabeza", "paso", "fila"), "en": ("head", "step", "row")}[lang]
        assert ax.get_title() == f"{word[0]} {layer}.{head}, {word[1]} {step}\n{word[2]} {row}, P = {P}"
        across = [line.get_ydata()[0] for line in ax.lines if list(line.get_xdata()) == [0, 1]]
        down = [line.get_xdata()[0] for line in ax.lines if list(line.get_ydata()) == [0, 1]]
        assert across == down == [k - 0.5 for k in range(P, 16, P)]
        # the scores: that head's along the training, the uniform head's across, the copy loss and in-context
        # learning; the step marked and its values written the reader's way; the onset marked
        top, bottom = scores_fig.axes
        ind = [float(s[layer, head]) for s in history.induction]
        prev = [float(s[layer, head]) for s in history.previous_token]
        curves = [line for line in top.lines if len(line.get_xdata()) == len(history.steps)]
        assert [list(line.get_xdata()) for line in curves] == [history.steps] * 2
        np.testing.assert_allclose(curves[0].get_ydata(), ind, rtol=1e-6)
        np.testing.assert_allclose(curves[1].get_ydata(), prev, rtol=1e-6)
        across = [line.get_ydata()[0] for line in top.lines if list(line.get_xdata()) == [0, 1]]
        np.testing.assert_allclose(across, want_uniform, rtol=1e-5)
        (dots,) = [line for line in top.lines if line.get_marker() == "o" and line.get_linestyle() == "None"]
        assert list(dots.get_xdata()) == [step, step]
        np.testing.assert_allclose(dots.get_ydata(), [ind[r], prev[r]], rtol=1e-6)
        curves = [line for line in bottom.lines if len(line.get_xdata()) == len(history.steps)]
        np.testing.assert_allclose(curves[0].get_ydata(), history.copy_loss, rtol=1e-6)
        np.testing.assert_allclose(curves[1].get_ydata(), history.in_context, rtol=1e-6)
        for ax in (top, bottom):
            marks = {line.get_xdata()[0]: line.get_linestyle() for line in ax.lines if list(line.get_ydata()) == [0, 1]}
            assert marks[30] == ":" and step in marks  # the onset dotted, the step solid (the same line at 30)
        values = [ind[r], prev[r], *want_uniform]
        number = (
            (lambda x: f"{x:.2f}".replace(".", ",").replace("-", "−"))
            if lang == "es"
            else (lambda x: f"{x:.2f}".replace("-", "−"))
        )
        name = f"{layer}.{head}"  # a head's name keeps its point in Spanish too
        if lang == "es":
            top_names = [
                f"inducción {name}",
                f"token anterior {name}",
                "uniforme (inducción)",
                "uniforme (token anterior)",
            ]
            bottom_names = ["pérdida de copia", "aprendizaje en contexto", "inicio (inducción > 0,5)"]
            onset, title = "paso 30", f"cabeza {name} en el paso {step}"
        else:
            top_names = [
                f"induction {name}",
                f"previous token {name}",
                "uniform (induction)",
                "uniform (previous token)",
            ]
            bottom_names = ["copy loss", "in-context learning", "onset (induction > 0.5)"]
            onset, title = "step 30", f"head {name} at step {step}"
        assert legend(top) == [f"{n}: {number(v)}" for n, v in zip(top_names, values)]
        bottom_values = [number(history.copy_loss[r]), number(history.in_context[r]), onset]
        assert legend(bottom) == [f"{n}: {v}" for n, v in zip(bottom_names, bottom_values)]
        assert top.get_title() == title
    # the step slider above, the three pickers side by side under it (the figure stays high on a projector's screen),
    # the step slider's labels: the recorded steps, the onset named
    slider, pickers, image = control.widget.children
    assert image is control._image and [type(w).__name__ for w in pickers.children] == ["ToggleButtons"] * 3
    assert [value for _, value in slider.options] == history.steps
    assert dict(slider.options)[f"30  ({'inicio' if lang == 'es' else 'onset'})"] == 30
    assert pickers.children[2].options[2] == (f"2  (P = {int(periods[2])})", 2)
    assert [w.description for w in (slider, *pickers.children)] == (
        ["paso de entrenamiento", "bloque", "cabeza", "fila"]
        if lang == "es"
        else ["training step", "block", "head", "row"]
    )


def test_the_phase_change_control_redraws_when_a_picker_moves_and_uses_core_widgets(phase):
    history, periods = phase
    control = live.phase_change_control(history, periods, "en", step=0, layer=0, head=0)
    box = control.widget  # built as the notebook shows it
    before = control._image.value
    control._inputs["step"].value = 40  # what the browser sends when the slider is let go
    assert control.values["step"] == 40 and control._image.value not in (before, b"")
    control._inputs["layer"].value = 1  # a click on block 1
    np.testing.assert_array_equal(
        control.figures[0].axes[0].images[0].get_array(), history.patterns[-1][1, 0, 0].numpy()
    )
    for w in widgets_in(box):
        assert w._model_module in live.CORE_WIDGETS and w._view_module in live.CORE_WIDGETS, type(w)
    bundle = control._repr_mimebundle_()
    if live.live_widgets():
        assert set(bundle) == {WIDGET_VIEW, "image/png", "text/plain"} and bundle["image/png"] == control.png
        assert bundle[WIDGET_VIEW]["model_id"] == box.model_id
    else:  # the floors' ipywidgets 7.7.1 (Colab's): the still figure and why
        assert set(bundle) == {"text/html", "image/png", "text/plain"} and bundle["image/png"] == control.png
    # the still figure is the one at the default values, the same when drawn again
    assert (
        live.phase_change_control(history, periods, "en").png == live.phase_change_control(history, periods, "en").png
    )


def test_the_phase_change_control_refuses_what_was_not_stored_in_both_languages(phase):
    from minitransformer.course.induction import InductionHistory
    from minitransformer.viz.circuits import plot_scores_at_step

    history, periods = phase
    control = live.phase_change_control(history, periods, "es")
    for values, es, en in [
        (dict(step=15), "paso de entrenamiento", "training step"),  # between two records
        (dict(layer=2), "bloque", "block"),
        (dict(head=2), "cabeza", "head"),
        (dict(row=4), "fila", "row"),  # only the first four rows are kept
    ]:
        with pytest.raises(CourseError) as e:
            control.set(**values)
        assert f"«{es}»" in e.value.es and f"“{en}”" in e.value.en
    with pytest.raises(CourseError) as e:
        live.phase_change_control(history, periods, "es", step=5)
    assert "paso de entrenamiento" in e.value.es and "training step" in e.value.en
    with pytest.raises(CourseError) as e:
        live.phase_change_control(InductionHistory(steps=history.steps, induction=history.induction), periods, "en")
    assert "patrón" in e.value.es and "pattern" in e.value.en
    with pytest.raises(CourseError) as e:
        live.phase_change_control(history, periods[:3], "en")  # fewer periods than kept rows
    assert "periodos" in e.value.es and "periods" in e.value.en
    args = (history.steps, history.copy_loss, history.in_context, history.induction, history.previous_token)
    with pytest.raises(CourseError) as e:
        plot_scores_at_step(*args, 15, (1, 0), "en")
    assert "15" in e.value.es and "15" in e.value.en
    with pytest.raises(CourseError) as e:
        plot_scores_at_step(*args, 10, (2, 0), "en")
    assert "bloques" in e.value.es and "blocks" in e.value.en


@pytest.mark.parametrize("lang", ["es", "en"])
def test_before_ipywidgets_8_the_cell_shows_the_still_figure_and_says_why(monkeypatch, lang):
    """Colab ships ipywidgets 7.7.1 (the package accepts it, so installing the course there changes nothing Colab
    set up): there a live cell shows its still figure and one line in the reader's language saying why, and no widget
    view. With ipywidgets 8, the view."""
    import ipywidgets

    control = live.encoding_control(20, 16, lang, position=3, pair=1)
    monkeypatch.setattr(ipywidgets, "__version__", "7.7.1")
    assert not live.live_widgets()
    bundle = control._repr_mimebundle_()
    assert set(bundle) == {"text/html", "image/png", "text/plain"} and bundle["image/png"] == control.png
    image = base64.b64encode(control.png).decode("ascii")
    assert bundle["text/html"].startswith(f'<img src="data:image/png;base64,{image}"/>')
    why = {
        "es": "los controles en vivo necesitan ipywidgets 8 y aquí hay 7.7.1",
        "en": "need ipywidgets 8 and this is 7.7.1",
    }
    assert why[lang] in bundle["text/html"] and why[lang] in bundle["text/plain"]
    assert control._widget is None  # no widget built: nothing for the front end to fail on
    monkeypatch.setattr(ipywidgets, "__version__", "8.1.2")
    assert live.live_widgets()  # and the view (the tests above, with the pinned ipywidgets 8)
