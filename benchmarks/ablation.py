"""The full ablation of notebook 10: every variant, several seeds, on held-out counting lines.

Each variant (see ``minitransformer.course.ablation.VARIANTS``) changes one thing with respect to
the modern model, or is notebook 09's GPT; all train on the same batches for the same steps
and are scored on the same held-out lines (never trained on) under the honest causal mask.
Each training run uses one CPU thread, so its numbers do not depend on how many run at once.

    python benchmarks/ablation.py                   # 10 seeds: about an hour on one core
    python benchmarks/ablation.py --jobs 8          # the same runs, 8 at a time
    python benchmarks/ablation.py --seeds 0 1 2 --steps 600
    python benchmarks/ablation.py --write           # also store the table in minitransformer/course/ablation.py

``--write`` replaces the ``MEASURED`` table (and ``MEASURED_SEEDS``) that notebook 10 shows
next to its own, smaller, live run; it refuses a run with other steps than ``FULL_SETUP``'s,
which is what the notebook says the table is. This is a script to run by hand, not a test.
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import replace
from pathlib import Path

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import torch  # noqa: E402

from minitransformer.course import ablation  # noqa: E402
from minitransformer.course.ablation import VARIANTS, counting_task, format_table, train_variant  # noqa: E402


def one_run(name: str, seed: int, steps: int) -> tuple[str, int, float, float]:
    torch.set_num_threads(1)
    setup = replace(ablation.FULL_SETUP, steps=steps)
    variant = next(v for v in VARIANTS if v.name == name)
    start = time.perf_counter()
    loss = train_variant(variant, counting_task(setup), seed, setup)
    return name, seed, loss, time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, nargs="+", default=list(range(10)))
    parser.add_argument("--steps", type=int, default=ablation.FULL_SETUP.steps)
    parser.add_argument("--jobs", type=int, default=1, help="training runs at a time (one CPU thread each)")
    parser.add_argument("--write", action="store_true", help="store the table in minitransformer/course/ablation.py")
    args = parser.parse_args()
    if args.write and args.steps != ablation.FULL_SETUP.steps:
        raise SystemExit(f"--write stores FULL_SETUP's table: run it with --steps {ablation.FULL_SETUP.steps}")
    setup = replace(ablation.FULL_SETUP, steps=args.steps)
    task = counting_task(setup)
    print(f"held-out lines: {task.held_out.size(0)}, floor: {task.floor:.4f} nats/token", flush=True)
    jobs = [(v.name, s, args.steps) for v in VARIANTS for s in args.seeds]
    losses: dict[tuple[str, int], float] = {}
    start = time.perf_counter()
    with ProcessPoolExecutor(max_workers=args.jobs) as pool:
        for name, seed, loss, seconds in pool.map(one_run, *zip(*jobs)):
            losses[name, seed] = loss
            print(f"{name} seed {seed}: {loss:.4f} ({seconds:.0f} s)", flush=True)
    results = {v.name: [losses[v.name, s] for s in args.seeds] for v in VARIANTS}
    minutes = (time.perf_counter() - start) / 60
    print(f"\n{len(args.seeds)} seeds, {setup.steps} steps, {minutes:.1f} min, torch {torch.__version__}\n")
    print(format_table(results, "en", floor=task.floor))
    if args.write:
        path = Path(ablation.__file__)
        text = path.read_text(encoding="utf-8")
        block = (
            f"# measured by benchmarks/ablation.py (FULL_SETUP): held-out loss per seed, in the order of "
            f"MEASURED_SEEDS\n# (torch {torch.__version__}, {platform.machine()}, one thread per run)\n"
            f"MEASURED_SEEDS: tuple[int, ...] = {tuple(args.seeds)}\n"
            "MEASURED: dict[str, list[float]] = {\n"
            + "".join(f'    "{name}": {[round(x, 6) for x in values]},\n' for name, values in results.items())
            + "}\n"
        )
        new, n = re.subn(
            r"# measured by benchmarks/ablation\.py.*?\nMEASURED: .*?\}\n", lambda m: block, text, flags=re.S
        )
        if n != 1:
            raise SystemExit("could not find the MEASURED block in minitransformer/course/ablation.py")
        path.write_text(new, encoding="utf-8")
        print(f"\nwritten to {path}")


if __name__ == "__main__":
    main()
