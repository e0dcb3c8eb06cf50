"""Notebook 12's language model: its data, its training, its checkpoints, the stored runs and tools/prose_runs.py."""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import math
import re
import sys
from pathlib import Path

import pytest
import torch

from minitransformer.compression import compressed_bits_per_byte
from minitransformer.course import language_model as lm
from minitransformer.course.prose import prose
from minitransformer.i18n import CourseError
from minitransformer.train import LiveCurve

ROOT = Path(__file__).resolve().parents[1]
TINY = dataclasses.replace(
    lm.PROSE_RECIPE,
    vocab_size=300,
    d_model=32,
    n_heads=2,
    d_ff=64,
    context=16,
    batch_size=4,
    steps=6,
    warmup=2,
    eval_every=3,
    eval_windows=4,
)


def test_the_data_hold_both_languages_and_the_held_out_text_starts_after_a_separator():
    data = lm.prose_data(TINY)
    assert data.tokenizer.vocab_size == 300 and data.tokenizer is lm.prose_tokenizer(300)  # trained once
    assert data.tokenizer.decode(data.train_ids.tolist()) == prose("es", "train") + "\n\n" + prose("en", "train")
    for lang in lm.LANGS:
        ids = data.held_ids[lang].tolist()
        assert data.tokenizer.decode(ids[: data.start]) == lm.SEPARATOR
        assert data.tokenizer.decode(ids[data.start :]) == prose(lang, "test")
        assert data.held_bytes(lang) == len(prose(lang, "test").encode())


def test_the_compressors_get_the_other_language_first_and_the_same_language_last():
    for lang, other in (("es", "en"), ("en", "es")):
        context = lm.compressor_context(lang).decode()
        assert context == prose(other, "train") + "\n\n" + prose(lang, "train") + "\n\n"
    held = prose("es", "test").encode()
    swapped = lm.compressor_context("en")  # Spanish first: gzip's 32 KB window holds only English
    assert compressed_bits_per_byte(held, lm.compressor_context("es"), "gzip") < compressed_bits_per_byte(
        held, swapped, "gzip"
    )


def test_window_bits_per_byte_is_the_windows_nats_over_their_bytes():
    torch.manual_seed(0)
    data = lm.prose_data(TINY)
    model = lm.ModernTransformer(TINY.config()).eval()
    windows = data.train_ids[:48].view(3, 16)
    logp = model(windows).log_softmax(-1)
    nats = -sum(logp[b, t, windows[b, t + 1]].item() for b in range(3) for t in range(15))
    n_bytes = len(data.tokenizer.decode(windows[:, 1:].flatten().tolist()).encode())
    assert lm.window_bits_per_byte(model, windows, data.tokenizer) == pytest.approx(nats / math.log(2) / n_bytes)


def test_training_is_set_by_the_seed_and_measures_every_eval_every_steps():
    first = lm.train_prose_model(seed=3, recipe=TINY, progress=False)
    again = lm.train_prose_model(seed=3, recipe=TINY, progress=False)
    other = lm.train_prose_model(seed=4, recipe=TINY, progress=False)
    assert first.loss == again.loss and first.held_bpb == again.held_bpb and first.loss != other.loss
    assert first.eval_step == [0, 3, 6] and len(first.loss) == 6 and len(first.train_bpb) == 3
    assert first.meta == {"seed": 3, "recipe": dataclasses.asdict(TINY)} and not first.model.training
    seen = []
    lm.train_prose_model(seed=3, recipe=TINY, progress=False, on_eval=lambda step, model: seen.append(step))
    assert seen == [0, 3, 6]


def test_a_run_goes_to_a_file_and_back(tmp_path):
    run = lm.train_prose_model(seed=1, recipe=TINY, progress=False)
    back = lm.load_prose_run(lm.save_prose_run(tmp_path / "run.pt", run, {"note": "tiny"}), "cpu")
    tokens = torch.randint(0, 300, (2, 16))
    assert torch.equal(back.model(tokens), run.model(tokens))
    assert back.tokenizer == run.tokenizer and back.recipe == TINY and back.held_bpb == run.held_bpb
    assert back.meta["note"] == "tiny" and back.meta["seed"] == 1
    torch.save({"format": "something else"}, tmp_path / "other.pt")
    with pytest.raises(CourseError, match="prose"):
        lm.load_prose_run(tmp_path / "other.pt")


def test_the_stored_runs_are_the_recipes_and_the_curve_is_the_long_one():
    # A change to a recipe (or the corpus, the tokenizer, the model) must come with new runs: tools/prose_runs.py.
    assert {"reference_runs/*.pt", "reference_runs/*.json"} <= set(  # package data: they go in the wheel
        re.findall(r'"(reference_runs/[^"]+)"', (ROOT / "pyproject.toml").read_text())
    )
    for which, recipe in (("recipe", lm.PROSE_RECIPE), ("long", lm.LONG_RECIPE)):
        run = lm.reference_prose_run(which, "cpu")
        assert run.meta["seed"] == 0 and run.meta["recipe"] == dataclasses.asdict(recipe), which
        assert run.tokenizer == lm.prose_tokenizer(recipe.vocab_size)
        assert run.eval_step[-1] == recipe.steps
    curve = lm.reference_curve()
    assert curve["recipe"] == dataclasses.asdict(lm.LONG_RECIPE) and curve["steps"][-1] == lm.LONG_RECIPE.steps
    assert curve["command"].startswith("python tools/prose_runs.py") and set(curve["machine"]) == {
        "cpu",
        "cores",
        "threads",
        "python",
        "torch",
        "system",
    }
    stored = lm.reference_prose_run("long", "cpu")
    data = lm.prose_data(lm.LONG_RECIPE)
    for lang in lm.LANGS:  # the stored model gives the curve's last point
        assert lm.held_out_bits_per_byte(stored.model, data, lang) == pytest.approx(
            curve["held_bpb"][lang][-1], abs=1e-3
        )
    with pytest.raises(CourseError):
        lm.reference_prose_run("longest")


def test_the_recipe_beats_gzip_and_stays_level_with_the_ngram_as_notebook_12_asserts():
    run, curve = lm.reference_prose_run("recipe", "cpu"), lm.reference_curve()
    data = lm.prose_data(lm.PROSE_RECIPE)
    for lang in lm.LANGS:
        bpb = lm.held_out_bits_per_byte(run.model, data, lang)
        assert bpb <= curve["baselines"]["gzip"][lang] - 0.15 and abs(bpb - curve["baselines"]["ngram"][lang]) < 0.1
        assert bpb < curve["baselines"]["xz"][lang]


def test_the_live_curve_draws_only_in_a_notebook_and_keeps_every_point(monkeypatch):
    curve = LiveCurve(True, {"train": "training", "held": "held out"}, ylabel="bits per byte", steps=10)
    assert not curve.enabled  # not in a notebook kernel
    curve.update(0, {"train": 3.0, "held": 3.5})
    curve.update(5, {"train": 2.0, "held": 2.5})
    assert curve.points == {"train": ([0, 5], [3.0, 2.0]), "held": ([0, 5], [3.5, 2.5])}
    shown = []

    class Handle:
        def update(self, bundle, raw):
            shown.append(bundle)

    def display(bundle, raw, display_id):
        shown.append(bundle)
        return Handle()

    monkeypatch.setattr("IPython.display.display", display)
    curve.enabled = True
    curve.update(10, {"train": 1.5, "held": 2.4})
    curve.update(10, {"train": 1.5, "held": 2.4})
    assert len(shown) == 2 and all(list(b) == ["image/png"] and b["image/png"][:4] == b"\x89PNG" for b in shown)


@pytest.mark.slow
def test_the_longer_run_script_writes_a_curve_that_loads(tmp_path, monkeypatch):
    spec = importlib.util.spec_from_file_location("prose_runs", ROOT / "tools" / "prose_runs.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    monkeypatch.setattr(sys, "argv", ["prose_runs.py"])
    script.main(["--out", str(tmp_path), "--steps", "4", "--eval-every", "2"])
    curve = json.loads((tmp_path / lm.CURVE_FILE).read_text())
    assert (
        curve["steps"] == [0, 2, 4]
        and curve["command"] == "python tools/prose_runs.py --out " + str(tmp_path) + " --steps 4 --eval-every 2"
    )
    assert set(curve["baselines"]) == {"gzip", "bz2", "xz", "ngram", "ngram_order"}
    assert all(len(curve["held_bpb"][lang]) == 3 for lang in lm.LANGS)
    run = lm.load_prose_run(tmp_path / lm.REFERENCE_FILES["long"])
    assert run.recipe.steps == 4 and run.eval_step == [0, 2, 4]
    data = lm.prose_data(run.recipe)
    assert lm.held_out_bits_per_byte(run.model, data, "es") == pytest.approx(curve["held_bpb"]["es"][-1], abs=1e-4)
    assert not (tmp_path / lm.REFERENCE_FILES["recipe"]).exists()  # only the full rebuild trains the recipe's run
