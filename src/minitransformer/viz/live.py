"""Live controls for the lecture: sliders and pickers that redraw the course's figures.

A :class:`Live` control calls a drawing function with the values of its controls and shows the figure it
returns. The drawing function is built on the course's own ``plot_...`` functions (the figure code is never
written twice), and it is a plain function: a test sets the values (:meth:`Live.set`) and reads the figure
(:attr:`Live.figures`).

Where a widget runs (JupyterLab and its RISE slides, Colab: core ipywidgets only, no custom widget manager),
moving a control redraws the figure. Everywhere else (nbval, the static slide decks, GitHub's viewer, an export
without a kernel) the cell shows the still figure at the default values: the cell's one output carries that
figure as a PNG beside the widget's view, and a front end that cannot show the widget shows the PNG. The
notebooks' builder stores no widget view and no widget state (``tools/notebooks.py``), so a stored notebook
holds the still figure only, the same on every run.

The course's controls: :func:`next_token_control` (09: temperature, top-k, top-p and a seeded "sample"
button), :func:`encoding_control` (03: position and frequency), :func:`heads_control` (08: layer and head),
:func:`phase_change_control` (13: training step, layer, head and row over the patterns stored while training).
A picker over stored snapshots (training steps) is one more :class:`Control` whose options are the steps,
and a drawing function may return several figures (a head's pattern and the heads' scores beside it): they
are shown side by side::

    Live(lambda step, layer, head: [plot_pattern(snapshots[step], layer, head), plot_scores(scores[step],
         mark=[(layer, head)])], {"step": Control("paso", "step", steps), "layer": ..., "head": ...}, lang)
"""

from __future__ import annotations

import io
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import matplotlib.pyplot as plt
import torch
from matplotlib.figure import Figure
from torch import Tensor

from ..generation import generate
from ..i18n import check_lang, decimal_commas, error, tr
from ..positional import sinusoidal_encoding
from ..sampling import next_token_probs
from .circuits import plot_head_patterns, plot_scores_at_step
from .generation import plot_next_token
from .heads import plot_head_grid
from .positional import plot_encoding_at

__all__ = [
    "Control",
    "Action",
    "Live",
    "next_token_control",
    "encoding_control",
    "heads_control",
    "phase_change_control",
    "live_widgets",
]

# The ipywidgets modules a control may use: the core ones, which Colab shows without a custom widget manager.
CORE_WIDGETS = ("@jupyter-widgets/base", "@jupyter-widgets/controls", "@jupyter-widgets/output")


class Control:
    """One slider or picker: a label in both languages, the values it can take, and its default.

    Args:
        es, en: the label, in Spanish and in English.
        options: the values, in order (each shown as written, with a decimal comma in Spanish), or a
            mapping label -> value.
        default: the value at the start (the still figure's); the first option by default.
        buttons: one button per option (a few options, e.g. a layer) instead of a slider.
    """

    def __init__(self, es: str, en: str, options: Sequence | Mapping, default: Any = None, *, buttons: bool = False):
        items = list(options.items()) if isinstance(options, Mapping) else [(None, v) for v in options]
        if not items:
            raise error(f"el control «{es}» no tiene opciones", f"the control “{en}” has no options")
        self.es, self.en, self.buttons = es, en, buttons
        self._items = items
        self.values = [v for _, v in items]
        self.default = self.values[0] if default is None else default
        if self.default not in self.values:
            raise error(
                f"el valor inicial de «{es}», {self.default!r}, no es una de sus opciones",
                f"the default of “{en}”, {self.default!r}, is not one of its options",
            )

    def label(self, lang: str) -> str:
        return tr(lang, self.es, self.en)

    def options(self, lang: str) -> list[tuple[str, Any]]:
        """(label, value) pairs in the reader's language."""
        return [(decimal_commas(_number(v) if name is None else name, lang), v) for name, v in self._items]


class Action:
    """A button beside the figure: ``run(values, seed)`` returns a text shown under it. Each press uses the seed
    in its box and then moves the box on by one, so the same seed gives the same text again."""

    def __init__(self, es: str, en: str, run: Callable[[dict[str, Any], int], str]):
        self.es, self.en, self.run = es, en, run


def figure_png(figures: Sequence[Figure], gap: int = 16) -> bytes:
    """The figures as one PNG, side by side and top-aligned (one figure: as the notebook's inline backend
    writes it, cropped to what is drawn)."""
    pngs = []
    for fig in figures:
        buffer = io.BytesIO()
        fig.savefig(buffer, format="png", bbox_inches="tight", dpi=fig.dpi, facecolor=fig.get_facecolor())
        pngs.append(buffer.getvalue())
    if len(pngs) == 1:
        return pngs[0]
    from PIL import Image  # matplotlib's own dependency

    images = [Image.open(io.BytesIO(p)).convert("RGB") for p in pngs]
    width = sum(im.width for im in images) + gap * (len(images) - 1)
    canvas = Image.new("RGB", (width, max(im.height for im in images)), "white")
    x = 0
    for im in images:
        canvas.paste(im, (x, 0))
        x += im.width + gap
    buffer = io.BytesIO()
    canvas.save(buffer, format="png")
    return buffer.getvalue()


class Live:
    """A figure redrawn by its controls.

    Args:
        draw: ``draw(**values)`` returns a figure, or several to show side by side; ``values`` has one entry per
            control.
        controls: name (the keyword ``draw`` receives) -> :class:`Control`, in the order they are shown.
        lang: "es" or "en", for the labels.
        action: an optional button (:class:`Action`), e.g. "sample".
        pickers_in_a_row: the button pickers side by side in one row (each with its label), not one under the
            other: the figure stays higher on a projector's screen.

    ``figures`` holds the last drawing (closed for pyplot: the notebook's inline backend does not show it
    again). In a notebook, the control is the cell's value: ``Live(...)`` as the last line shows it.
    """

    def __init__(
        self,
        draw: Callable[..., Figure | Sequence[Figure]],
        controls: Mapping[str, Control],
        lang: str,
        action: Action | None = None,
        *,
        pickers_in_a_row: bool = False,
    ):
        self.draw, self.controls, self.lang, self.action = draw, dict(controls), check_lang(lang), action
        self.pickers_in_a_row = pickers_in_a_row
        self.values: dict[str, Any] = {name: c.default for name, c in self.controls.items()}
        self.figures: list[Figure] = []
        self.png = b""
        self.text = ""  # what the last press of the action wrote
        self.seed = 0  # the seed of the action's next press
        self._widget = None
        self._inputs: dict[str, Any] = {}
        self._syncing = False
        self.redraw()

    # ---- plain Python: what the tests and the widgets both call

    def set(self, **values: Any) -> list[Figure]:
        """Move controls to ``values`` (names as in ``controls``) and redraw; returns the figures."""
        for name, value in values.items():
            if name not in self.controls:
                raise error(f"no hay ningún control llamado {name!r}", f"there is no control called {name!r}")
            if value not in self.controls[name].values:
                raise error(
                    f"{value!r} no es una de las opciones de «{self.controls[name].es}»",
                    f"{value!r} is not one of the options of “{self.controls[name].en}”",
                )
        self.values.update(values)
        if self._inputs:
            self._syncing = True
            try:
                for name, value in values.items():
                    self._inputs[name].value = value
            finally:
                self._syncing = False
        return self.redraw()

    def redraw(self) -> list[Figure]:
        drawn = self.draw(**self.values)
        figures = [drawn] if isinstance(drawn, Figure) else list(drawn)
        for fig in figures:
            plt.close(fig)
        self.figures, self.png = figures, figure_png(figures)
        if self._widget is not None:
            self._image.value = self.png
        return figures

    def act(self, seed: int | None = None) -> str:
        """Press the action's button: run it with the current values and ``seed`` (by default the seed in its
        box, which then moves on by one). Returns its text."""
        if self.action is None:
            raise error("este control no tiene botón", "this control has no button")
        seed = self.seed if seed is None else int(seed)
        self.text = self.action.run(dict(self.values), seed)
        self.seed = seed + 1
        if self._widget is not None:
            self._syncing = True
            try:
                self._seed_box.value = self.seed
            finally:
                self._syncing = False
            self._output.value = _pre(self.text)
        return self.text

    # ---- the widget

    @property
    def widget(self):
        """The ipywidgets box: the controls above the figure (and the button with its text under it)."""
        if self._widget is None:
            self._widget = self._build()
        return self._widget

    def _build(self):
        import ipywidgets as w

        rows = []
        for name, control in self.controls.items():
            options = control.options(self.lang)
            if control.buttons:
                box = w.ToggleButtons(
                    options=options,
                    value=self.values[name],
                    description=control.label(self.lang),
                    style={"description_width": "initial", "button_width": "auto"},
                )
            else:
                box = w.SelectionSlider(
                    options=options,
                    value=self.values[name],
                    description=control.label(self.lang),
                    continuous_update=False,  # redraw when the slider is let go: a drawing takes a moment
                    style={"description_width": "initial"},
                    layout=w.Layout(width="100%", max_width="560px"),  # narrower where the page is
                )
            box.observe(self._moved(name), names="value")
            self._inputs[name] = box
            rows.append(box)
        pickers = [self._inputs[name] for name, control in self.controls.items() if control.buttons]
        if self.pickers_in_a_row and len(pickers) > 1:
            where = next(i for i, row in enumerate(rows) if row is pickers[0])
            rows = [row for row in rows if not any(row is box for box in pickers)]
            for box in pickers[:-1]:
                box.layout.margin = "0 24px 0 0"
            rows.insert(where, w.HBox(pickers, layout=w.Layout(flex_flow="row wrap")))
        self._image = w.Image(value=self.png, format="png", layout=w.Layout(max_width="100%", height="auto"))
        if self.action is not None:
            button = w.Button(description=tr(self.lang, self.action.es, self.action.en), button_style="primary")
            self._seed_box = w.BoundedIntText(
                value=self.seed,
                min=0,
                max=10**6,
                description=tr(self.lang, "semilla", "seed"),
                layout=w.Layout(width="180px"),
            )
            self._seed_box.observe(self._seed_moved, names="value")
            button.on_click(lambda _button: self.act(self._seed_box.value))
            self._output = w.HTML(value=_pre(self.text))
            # under the figure: the text it writes does not push the figure down
            return w.VBox([*rows, self._image, w.HBox([button, self._seed_box]), self._output])
        return w.VBox([*rows, self._image])

    def _moved(self, name: str) -> Callable[[dict], None]:
        def moved(change: dict) -> None:
            if not self._syncing:
                self.values[name] = change["new"]
                self.redraw()

        return moved

    def _seed_moved(self, change: dict) -> None:
        if not self._syncing:
            self.seed = int(change["new"])

    def _repr_mimebundle_(self, include=None, exclude=None) -> dict:
        """The widget's view and, beside it, the still figure: a front end that cannot show the widget shows the
        PNG (the notebooks' builder stores only the PNG and this text). With ipywidgets before 8 (Colab's 7.7.1),
        the still figure and a line that says why it does not move (:func:`live_widgets`)."""
        text = "\n".join(repr(fig) for fig in self.figures)
        if not live_widgets():
            import base64
            import html

            import ipywidgets

            note = tr(
                self.lang,
                f"Figura fija, con los valores iniciales: los controles en vivo necesitan ipywidgets 8 y aquí hay "
                f"{ipywidgets.__version__} (el de Colab); se mueven en JupyterLab (python course.py lab).",
                f"A still figure, at the starting values: the live controls need ipywidgets 8 and this is "
                f"{ipywidgets.__version__} (Colab's); they move in JupyterLab (python course.py lab).",
            )
            image = base64.b64encode(self.png).decode("ascii")
            page = f'<img src="data:image/png;base64,{image}"/><p><em>{html.escape(note)}</em></p>'
            return {"text/html": page, "image/png": self.png, "text/plain": f"{text}\n{note}"}
        bundle = self.widget._repr_mimebundle_(include=include, exclude=exclude)
        return {**bundle, "image/png": self.png, "text/plain": text}


def live_widgets() -> bool:
    """Whether this kernel's ipywidgets moves the live controls: 8 or later. Colab ships ipywidgets 7.7.1, which
    the package accepts so that installing it there changes nothing Colab set up; there (and with any ipywidgets
    before 8) a live cell shows its still figure, the one the static slides show, with a line saying why."""
    import ipywidgets

    return int(ipywidgets.__version__.split(".")[0]) >= 8


def _pre(text: str) -> str:
    import html

    return f'<pre style="font-size: 16px; line-height: 1.35; margin: 4px 0">{html.escape(text)}</pre>' if text else ""


def _number(x: Any) -> str:
    """A value as a label: a float as short as it is (0.5, 2), anything else as written."""
    return f"{x:g}" if isinstance(x, float) else str(x)


# --------------------------------------------------------------------------- 09: sampling


def next_token_control(
    model: torch.nn.Module,
    prompts: Mapping[str, Sequence[int] | Tensor],
    tokens: Sequence[str],
    lang: str,
    *,
    decode: Callable[[Tensor], str] | None = None,
    eos_id: int | None = None,
    check: Callable[[Tensor], bool] | None = None,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float = 1.0,
    top: int = 12,
    lines: int = 4,
    max_new_tokens: int = 30,
) -> Live:
    """Temperature, top-k and top-p over a model's next-token distribution after a chosen prompt.

    The bars are ``next_token_probs(z, temperature, top_k, top_p)`` of the prompt's last logits ``z``, drawn by
    :func:`~minitransformer.viz.generation.plot_next_token` beside the original distribution, the kept set
    shaded. With ``decode``, a "sample" button continues the prompt ``lines`` times with the current settings
    (:func:`~minitransformer.generation.generate`, a generator seeded with the seed in its box), marking each
    line ✓ or ✗ by ``check``.

    Args:
        prompts: label -> ids (T,) of the prompt; the first is chosen at the start.
        tokens: the vocabulary's tokens, in id order.
        temperature, top_k, top_p: the settings at the start (``top_k=None``: every token, k = V).
    """
    device = next(model.parameters()).device
    ids = {label: torch.as_tensor(p, dtype=torch.long, device=device).reshape(1, -1) for label, p in prompts.items()}
    with torch.no_grad():
        logits = {label: model(p)[0, -1].float().cpu() for label, p in ids.items()}  # (V,) each, computed once
    V = len(tokens)
    temperatures = [0.0] + [round(0.1 * i, 1) for i in range(1, 31)]
    top_ps = [round(0.05 * i, 2) for i in range(1, 21)]
    controls = {
        "prompt": Control("principio", "prompt", {label: label for label in prompts}, buttons=True),
        "temperature": Control("temperatura τ", "temperature τ", temperatures, temperature),
        "top_k": Control("top-k", "top-k", list(range(1, V + 1)), V if top_k is None else top_k),
        "top_p": Control("top-p", "top-p", top_ps, top_p),
    }

    def draw(prompt: str, temperature: float, top_k: int, top_p: float) -> Figure:
        z = logits[prompt]
        settings = f"τ = {_number(temperature)}  ·  k = {top_k}  ·  p = {_number(top_p)}"
        if temperature == 0:
            settings = tr(lang, "τ = 0 (voraz)", "τ = 0 (greedy)")
        return plot_next_token(
            {
                "original (τ = 1)": next_token_probs(z),
                settings: next_token_probs(z, temperature, top_k, top_p),
            },
            tokens,
            lang=lang,
            top=top,
            title=tr(lang, f"Siguiente token tras «{prompt}»", f"Next token after “{prompt}”"),
            shade_kept=True,
        )

    action = None
    if decode is not None:

        def sample(values: dict[str, Any], seed: int) -> str:
            prompt = ids[values["prompt"]].expand(lines, -1)
            generator = torch.Generator(device=device).manual_seed(seed)
            rows = generate(
                model,
                prompt,
                max_new_tokens,
                temperature=values["temperature"],
                top_k=values["top_k"],
                top_p=values["top_p"],
                generator=generator,
                eos_id=eos_id,
            )
            marks = [("✓ " if check(row) else "✗ ") if check is not None else "" for row in rows]
            head = tr(lang, f"semilla {seed}:", f"seed {seed}:")
            return "\n".join([head, *(mark + decode(row) for mark, row in zip(marks, rows))])

        action = Action("muestrear", "sample", sample)
    return Live(draw, controls, lang, action)


# --------------------------------------------------------------------------- 03: positional encoding


def encoding_control(
    max_len: int = 100, d_model: int = 128, lang: str = "es", *, position: int = 50, pair: int = 4
) -> Live:
    """Position and frequency over the sinusoidal table (max_len, d_model): the table with the position's row
    and the pair's columns outlined, and the pair's two waves with the position's values
    (:func:`~minitransformer.viz.positional.plot_encoding_at` of :func:`~minitransformer.positional.sinusoidal_encoding`).
    The frequency is chosen by its pair i (dimensions 2i and 2i+1), labelled with ω_i."""
    pe = sinusoidal_encoding(max_len, d_model)  # (T, D)
    pairs = {f"{i}  (ω = {10000 ** (-2 * i / d_model):.3g})": i for i in range(d_model // 2)}
    controls = {
        "position": Control("posición", "position", list(range(max_len)), position),
        "pair": Control("frecuencia: par i", "frequency: pair i", pairs, pair),
    }
    return Live(lambda position, pair: plot_encoding_at(pe, position, pair, lang=lang), controls, lang)


# --------------------------------------------------------------------------- 08: heads


def heads_control(
    maps: Mapping[str, Sequence[Tensor]],
    tokens: Mapping[str, Sequence[str]],
    lang: str,
    *,
    layer: int = 0,
    head: int = 0,
) -> Live:
    """Layer and head pickers over stored attention maps: the chosen head of every example, side by side.

    Args:
        maps: title -> one map per layer, (B, H, T, S) or (H, T, S) (the first example of a batch is drawn),
            as :func:`~minitransformer.viz.heads.plot_head_grid` takes them.
        tokens: title -> the tokens of its keys and queries.
        layer, head: the head shown at the start.
    """
    first = next(iter(maps.values()))
    L, H = len(first), first[0].shape[-3]
    controls = {
        "layer": Control("capa", "layer", list(range(L)), layer, buttons=True),
        "head": Control("cabeza", "head", list(range(H)), head, buttons=True),
    }

    def draw(layer: int, head: int) -> list[Figure]:
        return [
            plot_head_grid(maps[title], tokens[title], pairs=[(layer, head)], lang=lang, title=title) for title in maps
        ]

    return Live(draw, controls, lang)


# --------------------------------------------------------------------------- 13: the phase change


def phase_change_control(
    history,
    periods: Sequence[int] | Tensor,
    lang: str,
    *,
    step: int | None = None,
    layer: int = 1,
    head: int | None = None,
    row: int = 0,
) -> Live:
    """Training-step, layer, head and row pickers over the attention patterns notebook 13's training stored
    (:class:`~minitransformer.course.induction.InductionHistory`): nothing is trained or run again.

    On the left, the chosen head's pattern on one of the probe's kept rows at that step
    (:func:`~minitransformer.viz.circuits.plot_head_patterns`, the row's period marked); on the right, that head's
    induction and previous-token scores against the uniform head's, the copy loss and the in-context learning score,
    all along the training with the step marked and its values written
    (:func:`~minitransformer.viz.circuits.plot_scores_at_step`, the onset marked).

    Args:
        history: the training's history; ``history.patterns`` holds (L, H, rows, T, T) per record.
        periods: the probe batch's periods (B,): the kept rows' are the first ones, and the uniform head's scores
            are measured on all of them, as the history's scores are.
        step, layer, head, row: what is shown at the start; by default the onset (the last step if the induction
            score never passed 0.5), block 1, its head with the highest induction score at the end, row 0.
    """
    from ..circuits import induction_score, previous_token_score, uniform_pattern

    if not history.patterns or len(history.patterns) != len(history.steps):
        raise error(
            "la historia no guarda un patrón de atención por registro: hace falta la de train_induction_model",
            "the history keeps no attention pattern per record: train_induction_model's is needed",
        )
    periods = torch.as_tensor(periods).cpu()
    L, H, rows, T, _ = history.patterns[0].shape
    if periods.dim() != 1 or len(periods) < rows:
        raise error(
            f"hacen falta los periodos del lote de prueba, al menos {rows} (uno por fila guardada), no {tuple(periods.shape)}",
            f"the probe batch's periods are needed, at least {rows} (one per kept row), got {tuple(periods.shape)}",
        )
    onset = history.onset()
    if step is None:
        step = history.steps[-1] if onset is None else onset
    if head is None:
        head = int(history.induction[-1][layer].argmax()) if 0 <= layer < L else 0
    uniform = uniform_pattern(T).expand(len(periods), -1, -1, -1)  # (B, 1, T, T)
    uniform_scores = (float(induction_score(uniform, periods)), float(previous_token_score(uniform)))
    records = {s: i for i, s in enumerate(history.steps)}
    onset_label = tr(lang, "inicio", "onset")
    steps = {(f"{s}  ({onset_label})" if s == onset else str(s)): s for s in history.steps}
    controls = {
        "step": Control("paso de entrenamiento", "training step", steps, step),
        "layer": Control("bloque", "block", list(range(L)), layer, buttons=True),
        "head": Control("cabeza", "head", list(range(H)), head, buttons=True),
        "row": Control("fila", "row", {f"{b}  (P = {int(periods[b])})": b for b in range(rows)}, row, buttons=True),
    }

    def draw(step: int, layer: int, head: int, row: int) -> list[Figure]:
        P = int(periods[row])
        pattern = history.patterns[records[step]][layer, head, row]  # (T, T)
        title = tr(
            lang,
            f"cabeza {layer}.{head}, paso {step}\nfila {row}, P = {P}",
            f"head {layer}.{head}, step {step}\nrow {row}, P = {P}",
        )
        return [
            plot_head_patterns([pattern], [title], lang, period=P),
            plot_scores_at_step(
                history.steps,
                history.copy_loss,
                history.in_context,
                history.induction,
                history.previous_token,
                step,
                (layer, head),
                lang,
                uniform=uniform_scores,
                onset=onset,
            ),
        ]

    return Live(draw, controls, lang, pickers_in_a_row=True)
