"""Train notebook 12's reference runs and store them inside the package, with the longer run's curve.

    python tools/prose_runs.py                 # both runs, into src/minitransformer/reference_runs/
    python tools/prose_runs.py --out DIR --steps 40 --eval-every 20
                                               # a short longer run into DIR (what the test runs)
    python tools/prose_runs.py --long-only --threads 1
                                               # only the longer run, on one thread (a busy machine: two
                                               # threads that wait for each other are slower than one)

It trains under the stored outputs' numerics profile (``minitransformer.course.numerics.PROFILE``; the script
restarts itself under it, since those settings act from a process's start), with seed 0:

- ``prose_lm_seed0.pt``: ``PROSE_RECIPE``, the model notebook 12 trains live;
- ``prose_lm_long.pt``: ``LONG_RECIPE``, the same recipe with its schedule stretched over more steps;
- ``prose_curve.json``: the longer run's held-out bits per byte (the sliding window of notebook 12) every
  ``eval_every`` steps, with the wall time, the baselines (gzip, bz2, xz, the Kneser–Ney n-gram), the command and
  the machine.

Run it after any change to the corpus, the tokenizer, the model, its initialisation or the recipes; then
re-execute notebooks 12 and 13. A test fails while the stored runs do not match the recipes.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import os
import platform
import shlex
import subprocess
import sys
import time
from pathlib import Path

import torch

from minitransformer.compression import COMPRESSORS, ByteNGram, choose_order, compressed_bits_per_byte
from minitransformer.course.language_model import (
    CURVE_FILE,
    LANGS,
    LONG_RECIPE,
    PROSE_RECIPE,
    REFERENCE_FILES,
    compressor_context,
    held_out_bits_per_byte,
    prose_data,
    save_prose_run,
    train_prose_model,
    training_text,
)
from minitransformer.course.numerics import PROFILE
from minitransformer.runtime import THREADS_ENV

ROOT = Path(__file__).resolve().parents[1]


def machine() -> dict:
    """The CPU's model name, its cores, the threads, and the versions that set the numbers."""
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "threads": torch.get_num_threads(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "system": platform.system(),
    }


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


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=ROOT / "src" / "minitransformer" / "reference_runs")
    parser.add_argument("--steps", type=int, default=None, help="the longer run's steps (default: LONG_RECIPE's)")
    parser.add_argument("--eval-every", type=int, default=None)
    parser.add_argument("--threads", type=int, default=None, help="CPU threads (default: the profile's)")
    parser.add_argument("--long-only", action="store_true", help="train only the longer run")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads or int(PROFILE[THREADS_ENV]))
    recipe = LONG_RECIPE
    if args.steps is not None:
        recipe = dataclasses.replace(recipe, steps=args.steps, warmup=min(recipe.warmup, args.steps // 2))
    if args.eval_every is not None:
        recipe = dataclasses.replace(recipe, eval_every=args.eval_every)
    args.out.mkdir(parents=True, exist_ok=True)
    command = shlex.join(["python", "tools/prose_runs.py", *(argv if argv is not None else sys.argv[1:])])
    if args.steps is None and not args.long_only:  # the full rebuild: also the recipe's own run
        run = train_prose_model(seed=0, recipe=PROSE_RECIPE, device="cpu", progress=True)
        print("wrote", save_prose_run(args.out / REFERENCE_FILES["recipe"], run))
    print("wrote", long_run(args.out, recipe, command))


if __name__ == "__main__":
    if any(os.environ.get(name) != value for name, value in PROFILE.items()):
        sys.exit(subprocess.call([sys.executable, __file__, *sys.argv[1:]], env={**os.environ, **PROFILE}))
    main()
