"""Train notebook 12's recipe with two processes (DDP, gloo) and store the held-out bits per byte for notebook 14.

    python tools/distributed_runs.py                      # seeds 0 1 3, into src/minitransformer/reference_runs/
    python tools/distributed_runs.py --seeds 0 --out DIR  # one seed into DIR

Each seed is one launch of ``torchrun --standalone --nproc_per_node=2 -m minitransformer.course.data_parallel
--checks prose`` (run as ``python -m torch.distributed.run``, so that this Python runs it): the recipe's model, data,
batches and optimiser, every rank on half of each batch of 16 windows, one thread per rank. Rank 0 measures both
languages' held-out text with notebook 12's sliding window (``held_out_bits_per_byte``). Stored in
``distributed_prose.json`` with the command, the machine and the date, beside the one-process runs of the same
seeds that ``tools/prose_runs.py --seeds`` stored (``prose_coding.json``: the static model's ideal bits per byte is
the same measure), and the one-process model of seed 0 stored in the package, measured again here.

Run it after any change to the corpus, the tokenizer, the model or the recipe, after ``tools/prose_runs.py``; then
re-execute notebook 14.
"""

from __future__ import annotations

import argparse
import datetime
import json
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from minitransformer.course.data_parallel import read_ranks
from minitransformer.course.language_model import (
    CODING_FILE,
    LANGS,
    held_out_bits_per_byte,
    prose_data,
    reference_prose_run,
)
from minitransformer.runtime import machine

ROOT = Path(__file__).resolve().parents[1]
FILE = "distributed_prose.json"


def two_ranks(seed: int, timeout: float) -> dict:
    """One launch: the recipe trained by two ranks with ``seed``; what rank 0 measured, and the launch's seconds."""
    with tempfile.TemporaryDirectory() as out:
        command = [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--standalone",
            "--nproc_per_node=2",
            "-m",
            "minitransformer.course.data_parallel",
            "--out",
            out,
            "--checks",
            "prose",
            "--device",
            "cpu",
            "--seed",
            str(seed),
        ]
        began = time.perf_counter()
        subprocess.run(command, check=True, timeout=timeout)
        ranks = read_ranks(out)
    return {
        "held_bpb": ranks[0]["prose"]["held_bpb"],
        "launch_seconds": round(time.perf_counter() - began, 1),
        "rank_cpu_seconds": [round(rank["prose"]["cpu_seconds"], 1) for rank in ranks],
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=ROOT / "src" / "minitransformer" / "reference_runs")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 3])
    parser.add_argument("--timeout", type=float, default=1800.0, help="seconds one launch may take")
    args = parser.parse_args(argv)
    command = "python tools/distributed_runs.py " + shlex.join(sys.argv[1:] if argv is None else argv)
    stored = json.loads((ROOT / "src" / "minitransformer" / "reference_runs" / CODING_FILE).read_text())["seeds"]
    data = prose_data()
    found = {
        "command": command,
        "machine": {**machine(), "threads": 1},
        "date": datetime.date.today().isoformat(),
        "ranks": 2,
        "two_ranks": {},
        "one_process": {
            "source": f"{CODING_FILE}: seeds, static, ideal ({stored['command']}, {stored['date']})",
            "runs": {
                seed: {lang: row["static"][lang]["ideal"] for lang in LANGS} for seed, row in stored["runs"].items()
            },
            "stored_seed0": {
                lang: held_out_bits_per_byte(reference_prose_run("recipe").model, data, lang) for lang in LANGS
            },
        },
    }
    for seed in args.seeds:
        found["two_ranks"][str(seed)] = two_ranks(seed, args.timeout)
        print(seed, found["two_ranks"][str(seed)], flush=True)
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / FILE
    path.write_text(json.dumps(found, indent=1) + "\n")
    print(path)


if __name__ == "__main__":
    main()
