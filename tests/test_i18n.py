"""Every message a student can meet speaks the notebook's language.

The package's errors are ``raise error("español", "English")`` (a ``CourseError``, which is a
``ValueError``); the language is the one ``runtime.setup(lang=LANG)`` set, English by default.
"""

from __future__ import annotations

import ast
import math
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from minitransformer import i18n
from minitransformer.attention import MultiHeadAttention, check_mask
from minitransformer.data import ReverseDigits, Vocab, make_batch, pad_sequences, spell_number
from minitransformer.decoding import beam_search
from minitransformer.layers import make_activation
from minitransformer.model import Transformer, TransformerConfig
from minitransformer.positional import sinusoidal_encoding
from minitransformer.pretrained import config_from_bert
from minitransformer.train import label_smoothed_cross_entropy, noam_lr, train

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "minitransformer"
PLAIN_ERRORS = {"ValueError", "TypeError"}
# Modules whose messages are checked elsewhere: the exercise checkers answer with their own
# bilingual feedback (tests/test_exercises_*.py).
SKIP_DIRS = {"exercises"}
# Messages still in English only, listed by (file, function) so that a new one cannot hide here.
# TODO: remove each entry once its messages are bilingual.
NOT_YET_BILINGUAL: set[tuple[str, str]] = set()


def _plain_string(node: ast.AST) -> bool:
    """A literal or f-string message (or one built from them with + or %)."""
    if isinstance(node, (ast.Constant, ast.JoinedStr)):
        return isinstance(node, ast.JoinedStr) or isinstance(node.value, str)
    if isinstance(node, ast.BinOp):
        return _plain_string(node.left) or _plain_string(node.right)
    return False


def _english_only_raises() -> list[str]:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        if rel.split("/")[0] in SKIP_DIRS or (rel, "*") in NOT_YET_BILINGUAL:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        functions = [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
        for node in ast.walk(tree):
            if not isinstance(node, ast.Raise) or not isinstance(node.exc, ast.Call):
                continue
            func = node.exc.func
            name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)
            if name not in PLAIN_ERRORS or not node.exc.args or not _plain_string(node.exc.args[0]):
                continue
            inside = [f.name for f in functions if f.lineno <= node.lineno <= (f.end_lineno or f.lineno)]
            if any((rel, f) in NOT_YET_BILINGUAL for f in inside):
                continue
            found.append(f"{rel}:{node.lineno}: raise {name}(...) with a plain string")
    return found


def _error_calls() -> list[tuple[str, ast.Call]]:
    calls = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id in ("error", "CourseError")
            ):
                calls.append((f"{rel}:{node.lineno}", node))
    return calls


def test_no_english_only_error_in_the_package():
    assert _english_only_raises() == []


def test_the_scan_finds_an_english_only_error(tmp_path, monkeypatch):
    """The scan itself can fail: a module with a plain ``raise ValueError("...")`` is reported."""
    (tmp_path / "bad.py").write_text('def f(x):\n    if x:\n        raise ValueError(f"bad {x}")\n')
    (tmp_path / "good.py").write_text(
        'from minitransformer.i18n import error\ndef g():\n    raise error("malo", "bad")\n'
    )
    monkeypatch.setattr(__import__(__name__), "PACKAGE", tmp_path)
    assert _english_only_raises() == ["bad.py:3: raise ValueError(...) with a plain string"]


def test_every_error_has_two_different_texts():
    calls = _error_calls()
    assert len(calls) >= 30
    for where, call in calls:
        assert len(call.args) == 2, where
        es, en = (ast.unparse(a) for a in call.args)
        assert es != en, f"{where}: the Spanish text is the English one"


def _model() -> Transformer:
    torch.manual_seed(0)
    return Transformer(
        TransformerConfig(src_vocab_size=12, tgt_vocab_size=12, d_model=8, n_heads=2, d_ff=16, n_layers=1)
    ).eval()


# A sample of mistakes a student can make, each with a word its Spanish and English texts hold.
MISTAKES = {
    "mask of the wrong rank": (
        lambda: check_mask(torch.ones(2, 1, 5, dtype=torch.bool), torch.Size([2, 4, 5, 5])),
        "máscara",
        "mask",
    ),
    "float mask": (
        lambda: check_mask(torch.ones(5, 5), torch.Size([1, 1, 5, 5])),
        "debe ser booleana",
        "must be boolean",
    ),
    "heads do not divide d_model": (lambda: MultiHeadAttention(10, 3), "divisible por", "divisible by"),
    "config heads do not divide d_model": (
        lambda: TransformerConfig(d_model=10, n_heads=3),
        "divisible por",
        "divisible by",
    ),
    "odd d_model": (lambda: sinusoidal_encoding(5, 7), "par", "even"),
    "number out of range": (lambda: spell_number(-1, "es"), "enteros", "integers"),
    "empty sequence": (lambda: pad_sequences([[1], []]), "vacía", "empty"),
    "sources and targets": (lambda: make_batch([[3]], [[3], [4]]), "fuentes", "sources"),
    "bad vocabulary": (lambda: Vocab.from_list(["a", "b", "c", "d"]), "vocabulario", "vocabulary"),
    "reverse lengths": (lambda: ReverseDigits(min_len=3, max_len=2), "hace falta", "need"),
    "unknown activation": (lambda: make_activation("tanh"), "debe ser una de", "must be one of"),
    "beam of zero": (lambda: beam_search(_model(), torch.tensor([[3, 4]]), 1, 2, beam_size=0), "al menos", "at least"),
    "token outside the vocabulary": (
        lambda: _model()(torch.tensor([[3, 40]]), torch.tensor([[1]])),
        "fuera del vocabulario",
        "outside the vocabulary",
    ),
    "step 0": (lambda: noam_lr(0, 16, 4), "pasos", "steps"),
    "one-token vocabulary": (
        lambda: label_smoothed_cross_entropy(torch.zeros(1, 2, 1), torch.zeros(1, 2, dtype=torch.long)),
        "nada que predecir",
        "nothing to predict",
    ),
    "not a BERT checkpoint": (
        lambda: config_from_bert(SimpleNamespace(model_type="gpt2", architectures=["GPT2Model"])),
        "solo lee",
        "reads BERT checkpoints only",
    ),
}


@pytest.mark.parametrize("mistake", sorted(MISTAKES))
def test_errors_speak_the_language_set(mistake, language):
    make, es_word, en_word = MISTAKES[mistake]
    language("es")
    with pytest.raises(ValueError) as es:
        make()
    assert isinstance(es.value, i18n.CourseError)
    assert es_word in str(es.value) and en_word not in str(es.value)
    language("en")
    with pytest.raises(ValueError) as en:
        make()
    assert en_word in str(en.value) and es_word not in str(en.value)
    assert (es.value.es, es.value.en) == (str(es.value), str(en.value))


def test_english_is_the_default():
    assert i18n.language() == "en"
    with pytest.raises(ValueError, match="must be divisible by n_heads"):
        MultiHeadAttention(10, 3)


@pytest.mark.parametrize("lang, label", [("es", "entrenamiento"), ("en", "training")])
def test_progress_bar_speaks_the_language_set(lang, label, language, capsys):
    language(lang)
    task = ReverseDigits(max_len=3)
    torch.manual_seed(0)
    model = Transformer(
        TransformerConfig(
            src_vocab_size=len(task.vocab), tgt_vocab_size=len(task.vocab), d_model=8, n_heads=2, d_ff=16, n_layers=1
        )
    )
    train(model, lambda: task.train_batch(4), steps=1, warmup=1, progress=True)
    bar = capsys.readouterr().err
    assert label in bar
    assert ("training" if lang == "es" else "entrenamiento") not in bar


# ------------------------------------------------------------------ numbers the reader's way


def test_decimal_and_integer_follow_the_language(language):
    assert i18n.decimal(0.64732, 3, "es") == "0,647" and i18n.decimal(0.64732, 3, "en") == "0.647"
    assert i18n.decimal(-0.00001, 2, "es") == "0,00"  # no "-0,00"
    assert i18n.integer(999) == "999" and i18n.integer(1503) == "1 503" and i18n.integer(-12_345) == "-12 345"
    language("es")
    assert i18n.decimal(1.5, 1) == "1,5" and i18n.integer(250_666) == "250 666"
    language("en")
    assert i18n.decimal(1.5, 1) == "1.5" and i18n.integer(250_666) == "250 666"  # one separator for both


def test_decimal_commas_change_only_decimal_points_and_only_in_spanish(language):
    text = "τ = 1.5, top-p = 0.9: 97.3 % of 1e-05 lines. Done."
    assert i18n.decimal_commas(text, "es") == "τ = 1,5, top-p = 0,9: 97,3 % of 1e-05 lines. Done."
    assert i18n.decimal_commas(text, "en") == text
    language("es")
    assert i18n.decimal_commas("0.25") == "0,25"
    language("en")
    assert i18n.decimal_commas("0.25") == "0.25"


def test_number_ticks_are_short_and_follow_the_language():
    from minitransformer.viz.style import number_ticks

    assert [number_ticks("es")(x) for x in (0.0, 0.25, 1000.0, 1.5e-5)] == ["0", "0,25", "1000", "1,5e-05"]
    assert [number_ticks("en")(x) for x in (0.0, 0.25)] == ["0", "0.25"]
    assert [number_ticks(lang)(-2.5) for lang in ("es", "en")] == ["\u22122,5", "\u22122.5"]  # a true minus sign
    assert number_ticks("es")(-1.5e-5) == "\u22121,5e-05"

    with pytest.raises(ValueError):
        number_ticks("fr")


def test_a_number_rounded_to_zero_loses_its_sign():
    assert [i18n.without_negative_zero(t) for t in ("-0.00", "-0%", "-0.01", "0.00", "-10")] == [
        "0.00",
        "0%",
        "-0.01",
        "0.00",
        "-10",
    ]
    assert i18n.decimal(-0.001, 2, "es") == "0,00"


def _figure_texts(fig) -> list[str]:
    """Every text drawn on the figure, tick labels included."""
    import matplotlib.text

    fig.canvas.draw()
    return [t.get_text() for t in fig.findobj(matplotlib.text.Text) if t.get_visible() and t.get_text()]


@pytest.mark.parametrize("lang", ["es", "en"])
def test_figures_write_decimals_the_readers_way(lang):
    import re

    from minitransformer.viz.attention import plot_attention
    from minitransformer.viz.positional import plot_waves

    weights = torch.softmax(torch.randn(3, 3, generator=torch.Generator().manual_seed(0)), dim=-1)
    for fig in (
        plot_attention(weights, ["a", "b", "c"], ["a", "b", "c"], lang=lang, title="0.5"),
        plot_waves(sinusoidal_encoding(20, 8), [0, 2], lang=lang),
    ):
        texts = _figure_texts(fig)
        points = [t for t in texts if re.search(r"\d\.\d", t)]
        commas = [t for t in texts if re.search(r"\d(,|\{,\})\d", t)]
        if lang == "es":
            assert points == [] and commas
        else:
            assert commas == [] and points


def test_head_grid_tick_labels_do_not_overlap():
    from minitransformer.viz.attention import plot_heads

    words = ["el", "perro", "ladra", "<pad>", "<pad>", "<pad>"]
    fig = plot_heads(torch.full((4, 6, 6), 1 / 6), words, words, lang="es")
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    for ax in fig.axes[:4]:
        labels = [t for t in ax.get_xticklabels() if t.get_text()]
        assert len(labels) == 6
        if labels[0].get_rotation() == 0:
            boxes = [t.get_window_extent(renderer) for t in labels]
            assert all(a.x1 < b.x0 for a, b in zip(boxes, boxes[1:])), "x tick labels overlap"
        else:  # slanted: neighbouring lines of text must be further apart than a line's height
            ticks = ax.transData.transform([(i, 0) for i in range(6)])[:, 0]
            spacing = min(ticks[1:] - ticks[:-1])
            height = labels[0].get_fontsize() * fig.dpi / 72
            assert spacing * math.sin(math.radians(labels[0].get_rotation())) > height, "x tick labels overlap"


def test_mistake_kinds_print_in_the_readers_language():
    from minitransformer.analysis import mistake_kind, mistake_kinds_text

    kinds = {"changed_count": 4, "changed": 3, "extra": 2, "missing": 1}
    assert mistake_kind("one two", "one") == "extra"  # the keys stay English for code
    assert mistake_kinds_text(kinds, "es") == (
        "faltan palabras: 1 · sobran palabras: 2 · cambian palabras: 3 · cambian palabras y su número: 4"
    )
    assert mistake_kinds_text(kinds, "en") == (
        "missing words: 1 · extra words: 2 · words changed: 3 · words and their number changed: 4"
    )
    assert mistake_kinds_text({"extra": 4}, "es") == "sobran palabras: 4"


def test_yes_no_answers_in_the_readers_language(language):
    assert (i18n.yes_no(True, "es"), i18n.yes_no(False, "es")) == ("sí", "no")
    assert (i18n.yes_no(True, "en"), i18n.yes_no(False, "en")) == ("yes", "no")
    language("es")
    assert i18n.yes_no(torch.tensor(True).item()) == "sí" and i18n.yes_no(0 > 1) == "no"
    language("en")
    assert i18n.yes_no(1 > 0) == "yes"


def test_the_glossary_gives_each_sense_of_nucleo_its_own_term():
    g = i18n.GLOSSARY
    assert g["CPU core"] == "núcleo" and g["kernel"] == "kernel"
    assert g["top-p sampling"] == "muestreo top-p" and g["nucleus sampling"] == "muestreo top-p"
    assert g["is cached"] == "se guarda en caché"
    assert [en for en, es in g.items() if es == "núcleo"] == ["CPU core"]  # no other term is «núcleo»
    assert not any("cachea" in es for es in g.values())


def test_the_glossary_names_the_phases_of_generation_as_notebook_10_does():
    g = i18n.GLOSSARY
    assert g["prefill"] == "llenado (prefill)" and g["decode"] == "decodificación (decode)"
    assert g["greedy decoding"] == "decodificación voraz"
    source = Path(__file__).resolve().parents[1] / "notebooks" / "source" / "10_modern_transformer.md"
    text = source.read_text(encoding="utf-8")
    assert "**llenado** (*prefill*)" in text and "**decodificación** (*decode*)" in text
    assert "tiempo hasta el primer token (*time to first token*, TTFT)" in text
