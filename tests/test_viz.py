"""Smoke and label-language tests of the figure functions, and the committed diagrams."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.image as mpimg  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from minitransformer.viz import diagrams  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
DIAGRAMS = ["transformer", "encoder_block", "decoder_block"]


def texts(fig: Figure) -> str:
    """Every piece of text drawn in the figure, joined by newlines."""
    found = [t.get_text() for t in fig.findobj(matplotlib.text.Text)]
    return "\n".join(t for t in found if t)


# words that only one of the languages may show
SPANISH_ONLY = [
    "Atención",
    "Suma y normalización",
    "Red prealimentada",
    "Lineal",
    "salida",
    "entrada",
    "Codificador",
    "Decodificador",
    "Codificación",
    "Concatenar",
    "cabeza",
]
ENGLISH_ONLY = [
    "Attention",
    "Add & Norm",
    "Feed",
    "Linear",
    "output",
    "input",
    "Encoder",
    "Decoder",
    "Encoding",
    "Concat",
    "head",
]


@pytest.mark.parametrize("name", DIAGRAMS)
@pytest.mark.parametrize("lang", ["es", "en"])
def test_diagram_labels_in_its_language(name, lang):
    fig = getattr(diagrams, f"draw_{name}")(lang)
    assert isinstance(fig, Figure)
    text = texts(fig)
    own, other = (SPANISH_ONLY, ENGLISH_ONLY) if lang == "es" else (ENGLISH_ONLY, SPANISH_ONLY)
    shows = lambda word: re.search(rf"\b{re.escape(word)}\b", text) is not None  # noqa: E731
    assert any(shows(word) for word in own), f"{name} ({lang}) shows none of its language's labels:\n{text}"
    leaked = [word for word in other if shows(word)]
    assert not leaked, f"{name} ({lang}) shows labels of the other language: {leaked}"


def test_transformer_diagram_has_every_part():
    for lang, parts in {
        "en": [
            "Input\nEmbedding",
            "Output\nEmbedding",
            "Positional\nEncoding",
            "Masked Multi-Head",
            "Cross-Attention",
            "Add & Norm",
            "Feed\nForward",
            "Linear",
            "Softmax",
            "Output Probabilities",
            "shifted right",
            "N×",
        ],
        "es": [
            "Embedding\nde entrada",
            "Embedding\nde salida",
            "Codificación\nposicional",
            "enmascarada",
            "Atención cruzada",
            "Suma y normalización",
            "Red prealimentada",
            "Lineal",
            "Softmax",
            "Probabilidades de salida",
            "desplazadas",
            "N×",
        ],
    }.items():
        text = texts(diagrams.draw_transformer(lang))
        missing = [p for p in parts if p not in text]
        assert not missing, f"the {lang} transformer diagram lacks {missing}"
        assert text.count("N×") == 2, "one N× for the encoder stack and one for the decoder stack"


def test_encoder_left_decoder_right():
    fig = diagrams.draw_transformer("en")
    ax = fig.axes[0]
    xs = {t.get_text(): t.get_position()[0] for t in ax.texts}
    assert xs["Encoder"] < xs["Decoder"]
    assert xs["Multi-Head\nAttention"] < xs["Masked Multi-Head\nAttention"]


def test_unknown_language_is_rejected():
    with pytest.raises(ValueError):
        diagrams.draw_transformer("fr")


def changed_fraction(a: np.ndarray, b: np.ndarray) -> float:
    """Share of pixels whose colour differs by more than a tenth of the range between two images.

    Anti-aliasing differs slightly between FreeType builds, so images are compared with a
    tolerance, never byte for byte; a moved box or an edited label changes far more pixels.
    """
    if a.shape != b.shape:
        return 1.0
    return float((np.abs(a[..., :3] - b[..., :3]).max(axis=-1) > 0.1).mean())


MAX_CHANGED = 0.0005  # 0.05 % of the pixels: about 1000 of a 1377 × 1470 diagram


def render(fig: Figure, path: Path) -> np.ndarray:
    fig.savefig(path, dpi=150, facecolor="white")
    return mpimg.imread(path)


def test_image_comparison_sees_a_changed_label(tmp_path, monkeypatch):
    same = render(diagrams.draw_transformer("en"), tmp_path / "a.png")
    assert changed_fraction(same, render(diagrams.draw_transformer("en"), tmp_path / "b.png")) == 0.0
    labels = diagrams._labels

    def one_label_changed(lang):
        return {**labels(lang), "softmax": "Softmin"}

    monkeypatch.setattr(diagrams, "_labels", one_label_changed)
    edited = render(diagrams.draw_transformer("en"), tmp_path / "c.png")
    assert changed_fraction(same, edited) > MAX_CHANGED


@pytest.mark.slow
def test_committed_diagrams_are_what_the_code_draws(tmp_path):
    result = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "draw_diagrams.py"), "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    drawn = sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*.png"))
    assert drawn, "tools/draw_diagrams.py drew nothing"
    for rel in drawn:
        committed = ROOT / "img" / rel
        assert committed.exists(), f"img/{rel} is missing: run `python tools/draw_diagrams.py`"
        changed = changed_fraction(mpimg.imread(tmp_path / rel), mpimg.imread(committed))
        assert changed <= MAX_CHANGED, (
            f"img/{rel} is not what the code draws ({changed:.2%} of the pixels differ): "
            "run `python tools/draw_diagrams.py`"
        )


def test_every_image_is_used():
    """An image in img/ is embedded by a notebook source or shown by the README; nothing else is kept."""
    users = [*(ROOT / "notebooks" / "source").glob("*.md"), ROOT / "README.md"]
    text = "\n".join(p.read_text(encoding="utf-8") for p in users)
    unused = [
        p.relative_to(ROOT).as_posix()
        for p in sorted((ROOT / "img").rglob("*"))
        if p.is_file() and p.relative_to(ROOT).as_posix() not in text
    ]
    assert not unused, (
        f"images that no notebook or README uses (delete them or their line in tools/draw_diagrams.py): {unused}"
    )


# --------------------------------------------------------------------------- positional figures

from minitransformer.positional import sinusoidal_encoding  # noqa: E402
from minitransformer.viz import positional as viz_pos  # noqa: E402


def positional_figures(lang: str) -> dict[str, Figure]:
    import torch

    pe = sinusoidal_encoding(30, 16)
    sim = pe @ pe.T
    w = torch.softmax(torch.randn(4, 4, generator=torch.Generator().manual_seed(0)), dim=-1)
    return {
        "encoding": viz_pos.plot_encoding(pe, lang=lang),
        "encodings": viz_pos.plot_encodings(
            [pe, sinusoidal_encoding(30, 16, interleaved=False)], ["A", "B"], lang=lang
        ),
        "waves": viz_pos.plot_waves(pe, dims=[0, 1, 6], lang=lang),
        "similarity": viz_pos.plot_similarity(sim, row=10, lang=lang),
        "similarities": viz_pos.plot_similarities([sim, sim / 2], ["A", "B"], lang=lang),
        "rotation": viz_pos.plot_rotation_matrix(torch.eye(4), lang=lang),
        "permuted": viz_pos.plot_permuted_attention(
            w, list("abcd"), w[[1, 0, 2, 3]][:, [1, 0, 2, 3]], list("bacd"), lang=lang
        ),
    }


POSITIONAL_WORDS = {
    "es": ["posición", "dimensión", "valor", "similitud", "fila", "columna", "Frase", "claves", "Matriz"],
    "en": ["position", "dimension", "value", "similarity", "row", "column", "sentence", "keys", "matrix"],
}


@pytest.mark.parametrize("lang", ["es", "en"])
def test_positional_figures_speak_their_language(lang):
    other = "en" if lang == "es" else "es"
    for name, fig in positional_figures(lang).items():
        assert isinstance(fig, Figure), name
        text = texts(fig)
        shows = lambda word, text=text: re.search(rf"\b{re.escape(word)}\b", text, re.I) is not None  # noqa: E731
        assert any(shows(w) for w in POSITIONAL_WORDS[lang]), f"{name} ({lang}) has no label in its language:\n{text}"
        bare = re.sub(r"\([^)]*\)", "", text)  # "claves (keys)": the English term in parentheses is on purpose
        leaked = [w for w in POSITIONAL_WORDS[other] if re.search(rf"\b{re.escape(w)}\b", bare, re.I)]
        assert not leaked, f"{name} ({lang}) shows words of the other language: {leaked}"


def test_positional_figures_draw_the_data():
    import torch

    pe = sinusoidal_encoding(30, 16)
    fig = viz_pos.plot_encoding(pe, lang="en")
    image = fig.axes[0].get_images()[0].get_array()
    assert np.allclose(np.asarray(image), pe.numpy())  # the heatmap is the table, rows = positions
    fig = viz_pos.plot_waves(pe, dims=[3, 5], lang="en")
    lines = [l for l in fig.axes[0].get_lines() if l.get_label().endswith(("3", "5"))]
    assert len(lines) == 2 and np.allclose(lines[0].get_ydata(), pe[:, 3].numpy())
    fig = viz_pos.plot_similarity(pe @ pe.T, row=7, lang="en")
    assert np.allclose(fig.axes[1].get_lines()[0].get_ydata(), (pe @ pe.T)[7].numpy())
    with pytest.raises(ValueError):
        viz_pos.plot_encoding(torch.zeros(3, 4), lang="fr")


def test_diagrams_leave_interactive_mode_alone():
    """Drawing a diagram must not switch off interactive mode (later figures would not show)."""
    import matplotlib as mpl

    from minitransformer.viz.diagrams import draw_encoder_block

    before = mpl.is_interactive()
    for state in (True, False):
        mpl.interactive(state)
        draw_encoder_block(lang="es")
        assert mpl.is_interactive() is state
    mpl.interactive(before)
