"""Train notebook 13's induction model under many seeds and store every number the notebook asserts.

    python tools/induction_seeds.py                     # every seed below, one thread, into the package
    python tools/induction_seeds.py --seeds 0 1 --out /tmp/record.json   # a few seeds elsewhere
    python tools/induction_seeds.py --jobs 2            # two seeds at a time, each on one thread (the same numbers)

Three lists of seeds, each fixed here before any of its seeds was trained:

- ``DEVELOPMENT``: the seeds that were looked at while the notebook's thresholds were chosen: the notebook's
  own (0), the test run's second leg (1), the other-seed check (2), more to see the spread (3, 4, 5), and
  the two where an earlier review found block 0 with one previous-token head (404, 606);
- ``VERIFICATION``: twelve seeds never looked at before this record was written, and never used to set a
  threshold. Every threshold of notebook 13 must hold on them (``tests/test_circuits.py`` checks the stored
  record against the notebook's thresholds, ``CLAIMS`` in ``minitransformer.course.induction``), or the
  notebook says which case is the common one and shows the other. They were not blind to the end: after they ran,
  three claims that failed on them moved to ``COMMON`` and two were promoted to ``CLAIMS`` (below), so they took part
  in choosing which claims the notebook asserts;
- ``FRESH``: eight seeds fixed on 2026-11-28, after the claims were revised for the last time (from an independent
  check on eight other seeds, none of them in this record, and from the verification seeds), and trained once with
  the record they are in. Nothing was chosen after they ran: what fails on them is reported as it is.

How the claims (``CLAIMS`` and ``COMMON`` in ``minitransformer.course.induction``) came about, in order: a first
draft was written from seed 0 alone and run on every seed at once. Three of its thresholds failed on development
seeds and were revised from the development seeds only: worse than the best possible at every early position became
worse than guessing on average (seeds 2 and 404); each block-1 head's direct attribution ≥ 1 became block 1's
largest ≥ 4 (404, 606: one of the two induction heads writes almost nothing); every Q-composition below random moved
to ``COMMON`` (404, 606). Three claims then failed on verification seeds and were moved, thresholds unchanged, to
``COMMON``, where the notebook shows them as the common case and names the seed that breaks each: worse than the best
possible at every early position (3001, position 0), removal of block 0 from the queries or values leaving induction
≥ 0.85 and the loss ≤ 0.35 (3008, a slower learner), mean ablation within 0.2 nats of zero ablation (3010). Two
claims of the draft's ``COMMON`` held on every seed, verification included, and were promoted to ``CLAIMS``: both
block-1 heads reach induction 0.5, and block 0's OV circuits have negative eigenvalue scores. Last, before the fresh
seeds were trained: the QK claim reads the circuit through the named previous-token head alone (Elhage et al.'s term
for one pair of heads), no longer through both block-0 heads summed, which moved to ``COMMON``: an independent check
on eight other seeds found 0.844 through both on a seed whose block 0 has one previous-token head, 1.000 through that
head. The fresh seeds then ran once (``--jobs 4``, 2 099 s on a busy machine). Every claim held on them but one:
"the named pair's K-composition > 1.5 × random and > its Q and V" failed on 5004, whose named pair has a
V-composition (0.33) above its K (0.24), while removing block 0 from the values costs nothing. Its two parts were
split after that run, and said so: "> 1.5 × random", which held on all 28 seeds, stays in ``CLAIMS``; "> its Q and V"
moved to ``COMMON``. The ``COMMON`` cases added with this record (the QK circuit through both block-0 heads, the
namings by keys-only removal and on 512 rows, one head removed from the queries or values, the direct effect on the
previous token's logit, the bet on tokens already seen, the shelf before the phase change) were written after it
ran: they count seeds, they assert nothing.

Each seed trains ``INDUCTION_RECIPE`` on the CPU with one thread (the test run's second leg has one thread;
each seed's numbers differ in the last digits on another CPU, thread count or a GPU, the verdicts are what
count) and is measured by ``measure_run``. The record keeps the command, the machine, the date and the three
lists. Run it again after any change to the recipe, the model, its initialisation or a measure.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import shlex
import sys
import time
from pathlib import Path

import torch

from minitransformer.course.induction import INDUCTION_RECIPE, SEED_RECORD, measure_run, train_induction_model
from minitransformer.runtime import machine

ROOT = Path(__file__).resolve().parents[1]
DEVELOPMENT = [0, 1, 2, 3, 4, 5, 404, 606]
VERIFICATION = [3001, 3002, 3003, 3004, 3005, 3006, 3007, 3008, 3009, 3010, 3011, 3012]
FRESH = [5001, 5002, 5003, 5004, 5005, 5006, 5007, 5008]


def run_seed(seed: int, threads: int = 1) -> dict:
    """Train and measure one seed (in a worker process with ``--jobs``)."""
    torch.set_num_threads(threads)
    start = time.perf_counter()
    model, history = train_induction_model(seed=seed, device="cpu", progress=False)
    run = {"seconds": round(time.perf_counter() - start, 1), **measure_run(model, history)}
    print(f"seed {seed}: {run['seconds']} s", file=sys.stderr, flush=True)
    return run


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=ROOT / "src" / "minitransformer" / "reference_runs" / SEED_RECORD)
    parser.add_argument("--seeds", type=int, nargs="*", default=None, help="these seeds only (default: every list)")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--jobs", type=int, default=1, help="seeds trained at once, each in its own process")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    seeds = args.seeds if args.seeds is not None else DEVELOPMENT + VERIFICATION + FRESH
    began = time.perf_counter()
    if args.jobs > 1:
        from concurrent.futures import ProcessPoolExecutor

        with ProcessPoolExecutor(args.jobs) as pool:
            done = list(pool.map(run_seed, seeds, [args.threads] * len(seeds)))
    else:
        done = [run_seed(seed, args.threads) for seed in seeds]
    runs = {str(seed): run for seed, run in zip(seeds, done)}
    record = {
        "command": "python " + " ".join(shlex.quote(a) for a in [Path(sys.argv[0]).as_posix(), *sys.argv[1:]]),
        "machine": machine(),
        "date": datetime.date.today().isoformat(),
        "seconds": round(time.perf_counter() - began, 1),
        "recipe": dataclasses.asdict(INDUCTION_RECIPE),
        "development": [s for s in DEVELOPMENT if s in seeds],
        "verification": [s for s in VERIFICATION if s in seeds],
        "fresh": [s for s in FRESH if s in seeds],
        "runs": runs,
    }
    args.out.write_text(json.dumps(record, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(args.out)


if __name__ == "__main__":
    main()
