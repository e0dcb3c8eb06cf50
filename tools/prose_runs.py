"""Train notebook 12's reference runs and store them inside the package, with what the notebook prints from them.

    python tools/prose_runs.py                 # the recipe's run and the longer run, into src/minitransformer/reference_runs/
    python tools/prose_runs.py --out DIR --steps 40 --eval-every 20
                                               # a short longer run into DIR (what the test runs)
    python tools/prose_runs.py --long-only --threads 1
                                               # only the longer run, on one thread (a busy machine: two
                                               # threads that wait for each other are slower than one)
    python tools/prose_runs.py --partner       # the model of seed PARTNER_SEED, mixed with the live one
    python tools/prose_runs.py --choose --threads 1
                                               # the coding settings and the n-grams, chosen on training text
    python tools/prose_runs.py --seeds 0 1 3 4 5 --threads 1
                                               # the held-out text compressed with models of these seeds
    python tools/prose_runs.py --variants --threads 1
                                               # the recipe changed one setting at a time
    python tools/prose_runs.py --pair --threads 1
                                               # the stored model of seed 0 and the partner, coding both texts

It trains under the stored outputs' numerics profile (``minitransformer.course.numerics.PROFILE``; the script
restarts itself under it, since those settings act from a process's start):

- ``prose_lm_seed0.pt``: ``PROSE_RECIPE`` with seed 0, the model notebook 12 trains live;
- ``prose_lm_long.pt``: ``LONG_RECIPE``, the same recipe with its schedule stretched over more steps;
- ``prose_curve.json``: the longer run's held-out bits per byte (the sliding window of notebook 12) every
  ``eval_every`` steps, with the wall time, the baselines (gzip, bz2, xz, the Kneser–Ney n-gram), the command and
  the machine;
- ``prose_lm_seed2.pt`` (``--partner``): ``PROSE_RECIPE`` with seed ``PARTNER_SEED``;
- ``prose_coding.json``, one part per command, each with its command, machine and date: ``choice`` (``--choose``:
  models trained on the first nine tenths of each language's training text, with a tokenizer trained on those nine
  tenths too, code the last tenth with every setting tried, and the n-grams are fitted and scored the same way; the
  held-out text takes no part), ``seeds`` (``--seeds``: the recipe trained with each seed compresses the held-out
  text, static, adapting, and adapting mixed with the partner), ``variants`` (``--variants``: the recipe with more
  steps, more blocks, a longer context, dropout or tied tables, measured on the held-out text) and ``pair``
  (``--pair``: the stored model of seed 0 and the partner code both languages' held-out text, mixed, static and
  learning: the rows notebook 12 reads for the language it does not code live).

Run it after any change to the corpus, the tokenizer, the model, its initialisation, the recipes or the coder; then
re-execute notebooks 12 and 13. A test fails while the stored runs do not match the recipes.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path

import torch

from minitransformer.compression import COMPRESSORS, compressed_bits_per_byte
from minitransformer.course.language_model import (
    ADAPTING_NGRAM,
    CODING,
    CODING_FILE,
    CURVE_FILE,
    LANGS,
    LONG_RECIPE,
    NGRAM,
    PARTNER_SEED,
    PROSE_RECIPE,
    REFERENCE_FILES,
    SEPARATOR,
    compressor_context,
    held_out_bits_per_byte,
    load_prose_run,
    prose_data,
    save_prose_run,
    train_prose_model,
    training_text,
    validation_split,
)
from minitransformer.course.numerics import PROFILE
from minitransformer.model_compressor import CodingReport, CodingSettings, compress_with_model
from minitransformer.ngram import DISCOUNTS, MAX_ORDER, ByteNGram, choose_order
from minitransformer.runtime import THREADS_ENV, machine

ROOT = Path(__file__).resolve().parents[1]


def baselines() -> dict:
    """The compressors' and the n-gram's bits per byte on each language's held-out text, as notebook 12 computes
    them."""
    data = prose_data(PROSE_RECIPE)
    both = training_text()
    order = choose_order(both)
    ngram = ByteNGram(order).fit(both)
    held = {lang: data.held_text[lang].encode() for lang in LANGS}
    found = {
        method: {lang: compressed_bits_per_byte(held[lang], compressor_context(lang), method) for lang in LANGS}
        for method in COMPRESSORS
    }
    found["ngram"] = {lang: ngram.bits_per_byte(held[lang], context=compressor_context(lang)) for lang in LANGS}
    found["ngram_order"] = order
    for name, (order, discount), adapt in (("ngram_chosen", NGRAM, False), ("ngram_adapting", ADAPTING_NGRAM, True)):
        model = ByteNGram(order, discount).fit(both)
        found[name] = {lang: model.bits_per_byte(held[lang], compressor_context(lang), adapt) for lang in LANGS}
    return found


def long_run(out: Path, recipe, command: str) -> Path:
    """Train ``recipe`` with seed 0, measuring the held-out text every ``eval_every`` steps; write the model and
    the curve into ``out``."""
    data = prose_data(recipe)
    curve = {"steps": [], "seconds_at": [], "held_bpb": {lang: [] for lang in LANGS}}
    began = time.perf_counter()

    def on_eval(step: int, model) -> None:
        curve["steps"].append(step)
        curve["seconds_at"].append(round(time.perf_counter() - began, 1))
        for lang in LANGS:
            curve["held_bpb"][lang].append(held_out_bits_per_byte(model, data, lang))

    run = train_prose_model(seed=0, recipe=recipe, device="cpu", progress=True, on_eval=on_eval)
    save_prose_run(out / REFERENCE_FILES["long"], run)
    stored = {
        "command": command,
        "machine": machine(),
        "date": datetime.date.today().isoformat(),
        "seed": 0,
        "recipe": dataclasses.asdict(recipe),
        "seconds": round(time.perf_counter() - began, 1),
        "note": "seconds_at: wall time since the start, the measurements included",
        **curve,
        "baselines": baselines(),
    }
    path = out / CURVE_FILE
    path.write_text(json.dumps(stored, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return path


def _store(out: Path, part: str, found: dict, command: str) -> Path:
    """Write ``found`` as the part ``part`` of ``prose_coding.json`` in ``out``, with the command, the machine and the
    date; the other parts stay as they were."""
    path = out / CODING_FILE
    stored = json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}
    stored[part] = {"command": command, "machine": machine(), "date": datetime.date.today().isoformat(), **found}
    path.write_text(json.dumps(stored, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return path


def coded(models: list, data, settings, lang: str) -> dict:
    """``lang``'s held-out text of ``data`` compressed with ``models`` (mixed with equal weights): the file's bytes,
    its bits per byte, the ideal bits per byte (the model's cross-entropy) and the CPU seconds."""
    report, began = CodingReport(), time.process_time()
    blob = compress_with_model(data.held_text[lang], models, data.tokenizer, settings, prefix=SEPARATOR, report=report)
    n = data.held_bytes(lang)
    return {
        "bytes": len(blob),
        "bpb": len(blob) * 8 / n,
        "ideal": report.model_bits / n,
        "cpu_seconds": round(time.process_time() - began, 1),
    }


def both(models: list, data, settings) -> dict:
    return {lang: coded(models, data, settings, lang) for lang in LANGS}


def total_bits(row: dict, data) -> float:
    """The ideal bits of both languages' texts together: what a choice is made on."""
    return sum(row[lang]["ideal"] * data.held_bytes(lang) for lang in LANGS)


def choose(out: Path, command: str, partner_seed: int = PARTNER_SEED) -> Path:
    """Choose the coding settings and the n-grams on training text: models trained on the first nine tenths of each
    language's training text (seed 0 and the partner's) code the last tenth."""
    data = prose_data(PROSE_RECIPE, validation=True)
    models = {}
    for seed in (0, partner_seed):
        began = time.process_time()
        models[seed] = train_prose_model(seed=seed, device="cpu", progress=False, validation=True).model
        print(f"trained the validation model of seed {seed} in {time.process_time() - began:.0f} CPU s", flush=True)
    tried = []

    def trial(settings, seeds=(0,)) -> dict:
        row = {
            "settings": dataclasses.asdict(settings),
            "seeds": list(seeds),
            **both([models[s] for s in seeds], data, settings),
        }
        tried.append(row)
        print(
            json.dumps({k: row[k] for k in ("settings", "seeds")}),
            *(f"{lang} {row[lang]['ideal']:.4f}" for lang in LANGS),
            flush=True,
        )
        return row

    static = trial(dataclasses.replace(CODING, lr=0.0))
    grid = [
        trial(dataclasses.replace(CODING, lr=lr, stride=stride))
        for stride in (16, 32, 64)
        for lr in (0.01, 0.02, 0.03, 0.05, 0.1)
    ]
    best = min(grid, key=lambda row: total_bits(row, data))
    base = CodingSettings(**best["settings"])
    grid += [trial(dataclasses.replace(base, steps=2))]
    grid += [trial(dataclasses.replace(base, parameters=which)) for which in ("blocks", "output")]
    best = min(grid, key=lambda row: total_bits(row, data))
    chosen = CodingSettings(**best["settings"])
    mixed_static = trial(dataclasses.replace(chosen, lr=0.0), (0, partner_seed))
    mixed = trial(chosen, (0, partner_seed))

    parts = {lang: validation_split(lang) for lang in LANGS}
    fit = SEPARATOR.join(parts[lang][0] for lang in LANGS)
    other = {"es": "en", "en": "es"}
    held = {lang: (parts[other[lang]][0] + SEPARATOR + parts[lang][0] + SEPARATOR, parts[lang][1]) for lang in LANGS}
    ngrams = {}
    for adapt in (False, True):
        scores = {}
        for order in range(1, MAX_ORDER + 1):
            model = ByteNGram(order).fit(fit)
            for discount in DISCOUNTS:
                model.discount = discount
                scores[f"{order} {discount}"] = {
                    lang: model.bits_per_byte(held[lang][1], held[lang][0], adapt) for lang in LANGS
                }
        total = {key: sum(row[lang] * len(held[lang][1].encode()) for lang in LANGS) for key, row in scores.items()}
        best_key = min(total, key=lambda key: (total[key], key))
        order, discount = best_key.split()
        ngrams["adapting" if adapt else "static"] = {"scores": scores, "chosen": [int(order), float(discount)]}
        print("n-gram", "adapting" if adapt else "static", best_key, scores[best_key], flush=True)
    found = {
        "validation_bytes": {lang: data.held_bytes(lang) for lang in LANGS},
        "tokenizer": "trained on the first nine tenths of both languages' training text (validation_tokenizer)",
        "bytes_per_token": {lang: data.held_bytes(lang) / (len(data.held_ids[lang]) - data.start) for lang in LANGS},
        "partner_seed": partner_seed,
        "tried": tried,
        "chosen": dataclasses.asdict(chosen),
        "static": static,
        "mixed_static": mixed_static,
        "mixed": mixed,
        "ngram": ngrams,
    }
    return _store(out, "choice", found, command)


def seeds_run(out: Path, seeds: list[int], command: str) -> Path:
    """The recipe trained with each seed compresses both languages' held-out text: static, adapting, and adapting
    mixed with the stored partner."""
    data = prose_data(PROSE_RECIPE)
    partner = load_prose_run(out / REFERENCE_FILES["partner"]).model
    static = dataclasses.replace(CODING, lr=0.0)
    rows = {}
    for seed in seeds:
        began = time.process_time()
        run = train_prose_model(seed=seed, device="cpu", progress=False)
        trained = round(time.process_time() - began, 1)
        rows[str(seed)] = {
            "train_cpu_seconds": trained,
            "static": both([run.model], data, static),
            "adapting": both([run.model], data, CODING),
            "mixed": both([run.model, partner], data, CODING),
        }
        print(
            seed,
            {
                k: {lang: round(v[lang]["bpb"], 4) for lang in LANGS}
                for k, v in rows[str(seed)].items()
                if k != "train_cpu_seconds"
            },
            flush=True,
        )
    found = {
        "partner_seed": PARTNER_SEED,
        "settings": dataclasses.asdict(CODING),
        "baselines": baselines(),
        "runs": rows,
    }
    return _store(out, "seeds", found, command)


def pair_run(out: Path, command: str) -> Path:
    """The stored model of seed 0 and its partner, as notebook 12 codes with them: each language's held-out text, the
    two models mixed, static (the ideal size) and learning as they code (the file). The notebook codes its own
    language live and reads the other language's rows here."""
    data = prose_data(PROSE_RECIPE)
    pair = [load_prose_run(out / REFERENCE_FILES[which]).model for which in ("recipe", "partner")]
    found = {
        "seeds": [0, PARTNER_SEED],
        "settings": dataclasses.asdict(CODING),
        "mixed_static": {lang: held_out_bits_per_byte(pair, data, lang) for lang in LANGS},
        "mixed": both(pair, data, CODING),
    }
    print({lang: (found["mixed_static"][lang], found["mixed"][lang]) for lang in LANGS}, flush=True)
    return _store(out, "pair", found, command)


VARIANTS = {
    "recipe": {},
    "steps 1000": {"steps": 1000},
    "blocks 4": {"n_layers": 4},
    "context 128": {"context": 128},
    "dropout 0.1": {"dropout": 0.1},
    "dropout 0.2": {"dropout": 0.2},
    "tied tables": {"tie_output": True},
}


def variants_run(out: Path, command: str) -> Path:
    """The recipe with one setting changed at a time, seed 0: its held-out bits per byte (the sliding window, no
    adaptation), its size, and how often it reads the training text."""
    rows = {}
    for name, change in VARIANTS.items():
        tie = change.get("tie_output", False)
        recipe = dataclasses.replace(PROSE_RECIPE, **{k: v for k, v in change.items() if k != "tie_output"})
        data = prose_data(recipe)
        began = time.process_time()
        run = train_prose_model(seed=0, recipe=recipe, device="cpu", progress=False, tie_output=tie)
        seconds = round(time.process_time() - began, 1)
        n_tokens = len(data.train_ids)
        rows[name] = {
            "change": change,
            "parameters": run.model.num_parameters(),
            "tokens_per_parameter": n_tokens / run.model.num_parameters(),
            "passes": recipe.steps * recipe.batch_size * recipe.context / n_tokens,
            "train_cpu_seconds": seconds,
            "held_bpb": {lang: held_out_bits_per_byte(run.model, data, lang) for lang in LANGS},
        }
        print(name, rows[name]["held_bpb"], seconds, flush=True)
    return _store(out, "variants", {"seed": 0, "variants": rows}, command)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=ROOT / "src" / "minitransformer" / "reference_runs")
    parser.add_argument("--steps", type=int, default=None, help="the longer run's steps (default: LONG_RECIPE's)")
    parser.add_argument("--eval-every", type=int, default=None)
    parser.add_argument("--threads", type=int, default=None, help="CPU threads (default: the profile's)")
    parser.add_argument("--long-only", action="store_true", help="train only the longer run")
    parser.add_argument("--partner", action="store_true", help="train only the partner (seed PARTNER_SEED)")
    parser.add_argument("--choose", action="store_true", help="choose the coding settings and the n-grams")
    parser.add_argument("--seeds", type=int, nargs="+", default=None, help="compress with models of these seeds")
    parser.add_argument("--variants", action="store_true", help="measure the recipe's variants")
    parser.add_argument("--pair", action="store_true", help="code with the stored model of seed 0 and the partner")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads or int(PROFILE[THREADS_ENV]))
    args.out.mkdir(parents=True, exist_ok=True)
    command = shlex.join(["python", "tools/prose_runs.py", *(argv if argv is not None else sys.argv[1:])])
    if args.partner:
        run = train_prose_model(seed=PARTNER_SEED, recipe=PROSE_RECIPE, device="cpu", progress=True)
        print("wrote", save_prose_run(args.out / REFERENCE_FILES["partner"], run))
        return
    if args.choose or args.seeds or args.variants or args.pair:
        if args.choose:
            print("wrote", choose(args.out, command))
        if args.seeds:
            print("wrote", seeds_run(args.out, args.seeds, command))
        if args.variants:
            print("wrote", variants_run(args.out, command))
        if args.pair:
            print("wrote", pair_run(args.out, command))
        return
    recipe = LONG_RECIPE
    if args.steps is not None:
        recipe = dataclasses.replace(recipe, steps=args.steps, warmup=min(recipe.warmup, args.steps // 2))
    if args.eval_every is not None:
        recipe = dataclasses.replace(recipe, eval_every=args.eval_every)
    if args.steps is None and not args.long_only:  # the full rebuild: also the recipe's own run
        run = train_prose_model(seed=0, recipe=PROSE_RECIPE, device="cpu", progress=True)
        print("wrote", save_prose_run(args.out / REFERENCE_FILES["recipe"], run))
    print("wrote", long_run(args.out, recipe, command))


if __name__ == "__main__":
    if any(os.environ.get(name) != value for name, value in PROFILE.items()):
        sys.exit(subprocess.call([sys.executable, __file__, *sys.argv[1:]], env={**os.environ, **PROFILE}))
    main()
