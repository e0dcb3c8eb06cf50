"""The full ablation of notebook 10: every variant, several seeds, on notebook 09's corpus.

Each variant (see ``minitransformer.ablation.VARIANTS``) changes one thing with respect to
the modern model, or is notebook 09's GPT; all train on the same batches for the same steps
and are scored on the same validation lines under the honest causal mask.

    python benchmarks/ablation.py                   # 3 seeds, 400 steps: a few minutes on 2 cores
    python benchmarks/ablation.py --seeds 0 1 2 3 4 --steps 600
    python benchmarks/ablation.py --write           # also store the table in minitransformer/ablation.py

``--write`` replaces the ``MEASURED`` table that notebook 10 shows next to its own, smaller,
live run. This is a script to run by hand, not a test.
"""

from __future__ import annotations

import argparse
import os
import re
import time
from dataclasses import replace
from pathlib import Path

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import torch  # noqa: E402

from minitransformer import ablation  # noqa: E402
from minitransformer.ablation import format_table, run_ablation  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--steps", type=int, default=ablation.FULL_SETUP.steps)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--write", action="store_true", help="store the table in minitransformer/ablation.py")
    args = parser.parse_args()
    setup = replace(ablation.FULL_SETUP, steps=args.steps)
    corpus, next_batch, val_tokens = ablation.counting_task(setup)
    start = time.perf_counter()
    results = run_ablation(
        next_batch,
        val_tokens,
        len(corpus.vocab),
        corpus.vocab.pad_id,
        seeds=args.seeds,
        setup=setup,
        progress=True,
        threads=args.threads,
    )
    minutes = (time.perf_counter() - start) / 60
    print(f"\n{len(args.seeds)} seeds, {setup.steps} steps, {minutes:.1f} min, torch {torch.__version__}\n")
    print(format_table(results, "en"))
    if args.write:
        path = Path(ablation.__file__)
        text = path.read_text(encoding="utf-8")
        rounded = {name: [round(v, 4) for v in values] for name, values in results.items()}
        block = (
            f"# measured by benchmarks/ablation.py: seeds {args.seeds}, {setup.steps} steps\n"
            "MEASURED: dict[str, list[float]] = {\n"
            + "".join(f'    "{name}": {losses},\n' for name, losses in rounded.items())
            + "}\n"
        )
        new, n = re.subn(
            r"# measured by benchmarks/ablation\.py.*?\n(MEASURED: .*?\}\n)", lambda m: block, text, flags=re.S
        )
        if n != 1:
            raise SystemExit("could not find the MEASURED block in minitransformer/ablation.py")
        path.write_text(new, encoding="utf-8")
        print(f"\nwritten to {path}")


if __name__ == "__main__":
    main()
