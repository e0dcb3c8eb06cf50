"""Notebook 12's language model: its data, its training, its checkpoints, the stored runs and tools/prose_runs.py."""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import math
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from minitransformer.compression import compressed_bits_per_byte
from minitransformer.course import language_model as lm
from minitransformer.course.prose import prose
from minitransformer.i18n import CourseError
from minitransformer.ngram import ByteNGram
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
    for which, recipe, seed in (
        ("recipe", lm.PROSE_RECIPE, 0),
        ("long", lm.LONG_RECIPE, 0),
        ("partner", lm.PROSE_RECIPE, 2),
    ):
        run = lm.reference_prose_run(which, "cpu")
        assert run.meta["seed"] == seed and run.meta["recipe"] == dataclasses.asdict(recipe), which
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
    ngram = ByteNGram(*lm.NGRAM).fit(lm.training_text())
    for lang in lm.LANGS:
        bpb = lm.held_out_bits_per_byte(run.model, data, lang)
        level = ngram.bits_per_byte(data.held_text[lang], lm.compressor_context(lang))
        assert bpb <= curve["baselines"]["gzip"][lang] - 0.15 and abs(bpb - level) < 0.1
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


@pytest.mark.parametrize("lang", ["es", "en"])
def test_the_live_curve_writes_its_numbers_the_readers_way(lang):
    import matplotlib.pyplot as plt

    from minitransformer.i18n import language, set_language

    before = language()
    set_language(lang)
    try:
        curve = LiveCurve(False, {"train": "training"}, ylabel="bits per byte", steps=10)
        curve.update(0, {"train": 3.25})
        curve.update(10, {"train": 1.5})
        fig = curve.figure()
        fig.canvas.draw()
        ticks = [t.get_text() for t in fig.axes[0].get_yticklabels() if t.get_text()]
        legend = fig.axes[0].get_legend().get_texts()[0].get_text()
        plt.close(fig)
    finally:
        set_language(before)
    mark, other = (",", ".") if lang == "es" else (".", ",")
    assert any(mark in t for t in ticks) and not any(other in t for t in ticks), ticks
    assert legend == f"training: 1{mark}50"


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
    assert set(curve["baselines"]) == {"gzip", "bz2", "xz", "ngram", "ngram_order", "ngram_chosen", "ngram_adapting"}
    assert all(len(curve["held_bpb"][lang]) == 3 for lang in lm.LANGS)
    run = lm.load_prose_run(tmp_path / lm.REFERENCE_FILES["long"])
    assert run.recipe.steps == 4 and run.eval_step == [0, 2, 4]
    data = lm.prose_data(run.recipe)
    assert lm.held_out_bits_per_byte(run.model, data, "es") == pytest.approx(curve["held_bpb"]["es"][-1], abs=1e-4)
    assert not (tmp_path / lm.REFERENCE_FILES["recipe"]).exists()  # only the full rebuild trains the recipe's run


# --------------------------------------------------------------------------- notebook 12's own loop, and its coding


def notebook_training_loop():
    """``train_model`` as notebook 12 writes it on the page (its source, the English side of each swap)."""
    from minitransformer.modern import ModernTransformer
    from minitransformer.train import lm_loss

    source = (ROOT / "notebooks" / "source" / "12_language_model.md").read_text(encoding="utf-8")
    block = re.search(r"```python\n(def train_model\(.*?)\n\n\ntrain_windows", source, re.S)
    assert block, "notebook 12 no longer writes its training loop as train_model"
    code = re.sub(r"«([^|»]*)\|([^»]*)»", r"\2", block.group(1))
    namespace = {"torch": torch, "math": math, "ModernTransformer": ModernTransformer, "lm_loss": lm_loss}
    namespace.update(seed=lambda: 3, device="cpu")
    exec(compile(code, "notebook 12", "exec"), namespace)
    return namespace["train_model"]


def test_the_loop_on_notebook_12s_page_is_train_prose_model_bit_for_bit():
    data = lm.prose_data(TINY)
    seen = []
    model = notebook_training_loop()(TINY, data, lambda step, model: seen.append(step))
    run = lm.train_prose_model(seed=3, recipe=TINY, progress=False)
    assert seen == run.eval_step and not model.training
    stored = run.model.state_dict()
    assert all(torch.equal(value, stored[name]) for name, value in model.state_dict().items())


def test_the_validation_split_cuts_each_language_at_a_paragraph_near_nine_tenths():
    for lang in lm.LANGS:
        fit, validation = lm.validation_split(lang)
        assert fit + lm.SEPARATOR + validation == lm.training_text(lang)
        assert 0.85 < len(fit) / len(lm.training_text(lang)) <= 0.9 and not validation.startswith("\n")
    data = lm.prose_data(TINY, validation=True)
    for lang in lm.LANGS:
        assert data.held_text[lang] == lm.validation_split(lang)[1]
        assert data.tokenizer.decode(data.held_ids[lang][data.start :].tolist()) == data.held_text[lang]
    fits = lm.SEPARATOR.join(lm.validation_split(lang)[0] for lang in lm.LANGS)
    assert data.tokenizer.decode(data.train_ids.tolist()) == fits
    assert lm.train_prose_model(seed=1, recipe=TINY, progress=False, validation=True).meta["validation"] is True


def test_the_coding_settings_and_n_grams_are_the_stored_choice_made_on_training_text():
    choice = lm.reference_coding()["choice"]
    assert lm.CodingSettings(**choice["chosen"]) == lm.CODING and lm.STATIC_CODING == dataclasses.replace(
        lm.CODING, lr=0
    )
    assert tuple(choice["ngram"]["static"]["chosen"]) == lm.NGRAM
    assert tuple(choice["ngram"]["adapting"]["chosen"]) == lm.ADAPTING_NGRAM
    assert choice["command"].startswith("python tools/prose_runs.py --choose")
    validation = {lang: len(lm.validation_split(lang)[1].encode()) for lang in lm.LANGS}
    assert choice["validation_bytes"] == validation  # measured on the training text's last tenths, not the held-out
    single = [row for row in choice["tried"] if row["seeds"] == [0]]
    chosen = min(single, key=lambda row: sum(row[lang]["ideal"] * validation[lang] for lang in lm.LANGS))
    assert chosen["settings"] == choice["chosen"]
    for kind in ("static", "adapting"):
        scores = choice["ngram"][kind]["scores"]
        best = min(scores, key=lambda key: sum(scores[key][lang] * validation[lang] for lang in lm.LANGS))
        order, discount = best.split()
        assert (int(order), float(discount)) == tuple(choice["ngram"][kind]["chosen"])


def test_the_partner_is_the_recipe_with_another_seed_than_the_live_model_whatever_the_seed():
    partner = lm.reference_prose_run("partner", "cpu")
    assert partner.meta["seed"] == lm.PARTNER_SEED and partner.meta["recipe"] == dataclasses.asdict(lm.PROSE_RECIPE)
    assert lm.PARTNER_SEED not in (0, 1) and partner.tokenizer == lm.prose_tokenizer(lm.PROSE_RECIPE.vocab_size)
    for seed in range(8):  # a student may choose any seed: the live model is never mixed with itself
        assert lm.partner_seed(seed) != seed
    assert lm.partner_seed(lm.PARTNER_SEED) == 0 and lm.partner_seed(0) == lm.partner_seed(7) == lm.PARTNER_SEED
    assert lm.reference_partner(lm.PARTNER_SEED).seed == 0 and lm.reference_partner(5).seed == lm.PARTNER_SEED
    for wrong in (1.0, "2", True):
        with pytest.raises(ValueError, match="seed"):
            lm.partner_seed(wrong)


def test_the_validation_tokenizer_never_saw_the_tenth_the_settings_are_chosen_on():
    fits = lm.SEPARATOR.join(lm.validation_split(lang)[0] for lang in lm.LANGS)
    data = lm.prose_data(lm.PROSE_RECIPE, validation=True)
    assert data.tokenizer == lm.validation_tokenizer(lm.PROSE_RECIPE.vocab_size) == lm.train_bpe(fits, 2000)
    assert data.tokenizer != lm.prose_tokenizer(lm.PROSE_RECIPE.vocab_size)  # the recipe's read the tenth too
    stored = lm.reference_coding()["choice"]["bytes_per_token"]
    for lang in lm.LANGS:
        measured = data.held_bytes(lang) / (len(data.held_ids[lang]) - data.start)
        assert measured == pytest.approx(stored[lang])
        leaky = data.held_bytes(lang) / len(lm.prose_tokenizer(2000).encode(data.held_text[lang]))
        assert measured < leaky  # the leak: a tokenizer that read the tenth cuts it into longer tokens


def test_the_stored_seeds_beat_bz2_and_xz_as_notebook_12_says():
    """Notebook 12's bar (BAR = 0.12 bits per byte, its one threshold), on the stored measurements (five seeds, 1, the
    tests' second pass, among them): every seed, mixed with the partner, beats bz2 and xz by at least the bar in both
    languages, the worst by 0.146 over bz2, as the notebook prints; learning alone, by less than the bar."""
    seeds = lm.reference_coding()["seeds"]
    assert len(seeds["runs"]) >= 5 and "1" in seeds["runs"] and str(lm.PARTNER_SEED) not in seeds["runs"]
    assert seeds["settings"] == dataclasses.asdict(lm.CODING) and seeds["partner_seed"] == lm.PARTNER_SEED
    worst = {}
    for seed, row in seeds["runs"].items():
        for lang in lm.LANGS:
            held = len(prose(lang, "test").encode())
            mixed = row["mixed"][lang]
            assert mixed["bpb"] == pytest.approx(mixed["bytes"] * 8 / held)
            assert mixed["bpb"] < row["adapting"][lang]["bpb"] < row["static"][lang]["bpb"]
        alone = min(seeds["baselines"]["bz2"][lang] - row["adapting"][lang]["bpb"] for lang in lm.LANGS)
        assert 0 < alone < BAR  # the worse language, as the notebook prints it
        worst[seed] = min(
            seeds["baselines"][name][lang] - row["mixed"][lang]["bpb"] for name in ("bz2", "xz") for lang in lm.LANGS
        )
    assert min(worst.values()) >= BAR
    over_bz2 = [
        min(seeds["baselines"]["bz2"][lang] - row["mixed"][lang]["bpb"] for lang in lm.LANGS)
        for row in seeds["runs"].values()
    ]
    assert round(min(over_bz2), 3) == 0.141 and round(max(over_bz2), 3) == 0.170  # the range the summary states


BAR = 0.12  # notebook 12's one threshold: the learning file's least margin over bz2 and xz, for any seed


def test_the_pair_record_is_what_notebook_12_codes_live_with_the_stored_models():
    """The rows notebook 12 reads for the language it does not code live: the stored model of seed 0 and the partner,
    their static mixture measured as the notebook measures it, and the learning file's size."""
    pair = lm.reference_coding()["pair"]
    assert pair["seeds"] == [0, lm.PARTNER_SEED] and pair["settings"] == dataclasses.asdict(lm.CODING)
    assert pair["command"].startswith("python tools/prose_runs.py --pair")
    seeds = lm.reference_coding()["seeds"]["runs"]["0"]["mixed"]
    for lang in lm.LANGS:
        assert pair["mixed"][lang]["bytes"] == seeds[lang]["bytes"]  # the same file as --seeds made for seed 0
        assert pair["mixed"][lang]["ideal"] < pair["mixed_static"][lang]
    models = [lm.reference_prose_run("recipe", "cpu").model, lm.reference_prose_run("partner", "cpu").model]
    data = lm.prose_data()
    assert lm.held_out_bits_per_byte(models, data, "en") == pytest.approx(pair["mixed_static"]["en"], abs=1e-5)


@pytest.mark.slow
def test_both_held_out_texts_decode_in_full_with_the_models_learning():
    """What notebook 12 decodes only in part: both languages, whole, the stored model of seed 0 and the partner
    learning as they code, every probability row the same on both sides. In a process of its own with MKL's own code
    path (MKL_CBWR=AUTO, as on a student's machine), not the test run's pinned COMPATIBLE one, which makes these small
    matrix products about three times slower: a round trip is exact under any profile, the same on both sides."""
    code = """
from minitransformer.model_compressor import CodingReport, compress_with_model, decompress_with_model
from minitransformer.course import language_model as lm

pair = [lm.reference_prose_run("recipe", "cpu").model, lm.reference_prose_run("partner", "cpu").model]
data = lm.prose_data()
for lang in lm.LANGS:
    sent, got = CodingReport(), CodingReport()
    blob = compress_with_model(data.held_text[lang], pair, data.tokenizer, lm.CODING, report=sent)
    assert decompress_with_model(blob, pair, data.tokenizer, lm.CODING, report=got) == data.held_text[lang]
    assert sent.row_hashes == got.row_hashes and sent.updates == got.updates > 0
    assert len(blob) * 8 / data.held_bytes(lang) < lm.reference_curve()["baselines"]["bz2"][lang] - 0.12
    print(lang, len(blob), len(got.row_hashes), flush=True)
"""
    env = {**os.environ, "MKL_CBWR": "AUTO"}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    printed = [line.split() for line in done.stdout.splitlines()]
    assert [row[0] for row in printed] == list(lm.LANGS) and all(int(row[2]) > 5000 for row in printed), done.stdout


def test_the_held_out_measure_of_two_models_is_their_mixture():
    """Notebook 12's static row of the two models: held_out_bits_per_byte mixes them with equal weights, the measure
    of model_bits_per_byte over the held-out text with the models' context moved by half of it."""
    from minitransformer.model_compressor import model_bits_per_byte

    pair = [lm.reference_prose_run("recipe", "cpu").model, lm.reference_prose_run("partner", "cpu").model]
    data = lm.prose_data()
    T = lm.PROSE_RECIPE.context
    mixed = lm.held_out_bits_per_byte(pair, data, "en")
    assert mixed == model_bits_per_byte(
        pair, data.held_ids["en"], data.held_bytes("en"), context=T, stride=T // 2, start=data.start
    )
    assert mixed < min(lm.held_out_bits_per_byte(model, data, "en") for model in pair)  # mixing helps here
