"""How long each notebook takes as a teacher or a student runs it: from a fresh kernel, alone.

Each notebook is copied into an empty folder and executed there from its first cell to its last
(``nbclient``, as "Run all" does), in an environment without the test run's numerics profile: the
thread count, CPU kernels and MKL code path are the machine's own, as in a lecture or in Colab.
The script prints each notebook's wall-clock time beside its goal and exits with status 1 when a
time is above it:

- a notebook that trains a model live (07 the translator, 09 the GPT, 10 the ablation, 12, 13): 60 s;
- 11 (it trains tokenizers): 30 s;
- every other notebook: 20 s.

    python benchmarks/notebooks.py                 # every notebook, in English
    python benchmarks/notebooks.py 07 09 --lang es --repeat 3 --cells 3
    python benchmarks/notebooks.py --profile       # as the test run executes them
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

import nbformat
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
from minitransformer.course.numerics import PROFILE, profile_environ  # noqa: E402

GOALS = {"07": 60.0, "09": 60.0, "10": 60.0, "11": 30.0, "12": 60.0, "13": 60.0}
DEFAULT_GOAL = 20.0


def goal(number: str) -> float:
    return GOALS.get(number, DEFAULT_GOAL)


def student_environ() -> dict[str, str]:
    """This process's environment without the test run's numerics profile (and its seed)."""
    drop = set(PROFILE) | {"MINITRANSFORMER_SEED", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "OMP_WAIT_POLICY"}
    return {k: v for k, v in os.environ.items() if k not in drop}


def kernel_environ(profile: bool) -> dict[str, str]:
    """The environment a notebook's kernel starts with: this process's without the numerics profile (a
    student's), or with it, idle threads sleeping as under ``python course.py test`` (``profile``)."""
    return {"OMP_WAIT_POLICY": "PASSIVE", **profile_environ()} if profile else student_environ()


def run(path: Path, timeout: int = 600, profile: bool = False) -> tuple[float, list[tuple[float, int]]]:
    """Execute a copy of ``path`` in an empty folder (under the test run's numerics profile if
    ``profile``); returns its wall-clock seconds and (seconds, index) of each code cell."""
    total, nb = execute(path, timeout, profile)
    cells = []
    for i, cell in enumerate(nb.cells):
        timing = cell.metadata.get("execution", {})
        if "iopub.execute_input" in timing and "shell.execute_reply" in timing:
            seconds = _seconds(timing["shell.execute_reply"]) - _seconds(timing["iopub.execute_input"])
            cells.append((seconds, i))
    return total, sorted(cells, reverse=True)


def execute(
    path: Path, timeout: int = 600, profile: bool = False, env: dict[str, str] | None = None
) -> tuple[float, nbformat.NotebookNode]:
    """:func:`run`'s execution: its wall-clock seconds and the executed notebook (nbclient's
    ``CellExecutionError`` when a cell fails, with the notebook as far as it ran as its ``nb``). ``env``: variables
    the kernel gets on top of :func:`kernel_environ` (a device, a thread count)."""
    nb = nbformat.read(path, as_version=4)
    with tempfile.TemporaryDirectory() as folder:
        shutil.copy(path, folder)
        wanted = {**kernel_environ(profile), **(env or {})}  # read before the environment is replaced
        saved = dict(os.environ)
        os.environ.clear()
        os.environ.update(wanted)
        try:
            client = NotebookClient(
                nb, timeout=timeout, kernel_name="python3", resources={"metadata": {"path": folder}}, record_timing=True
            )
            start = time.perf_counter()
            try:
                client.execute(stderr=subprocess.DEVNULL)  # the kernel's own log lines
            except CellExecutionError as failure:
                failure.nb = nb  # the notebook as far as it ran, its failing cell's error included
                raise
            total = time.perf_counter() - start
        finally:
            os.environ.clear()
            os.environ.update(saved)
    return total, nb


def _seconds(stamp: str) -> float:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("numbers", nargs="*", help="two-digit notebook numbers (default: all)")
    parser.add_argument("--lang", choices=["en", "es"], default="en")
    parser.add_argument("--repeat", type=int, default=1, help="runs of each notebook (every run must be in time)")
    parser.add_argument("--profile", action="store_true", help="under the test run's numerics profile instead")
    parser.add_argument("--cells", type=int, default=0, metavar="N", help="also print the N slowest cells")
    parser.add_argument("--json", type=Path, metavar="FILE", help="also write the times (the last run's) as JSON")
    args = parser.parse_args(argv)
    measured = []
    paths = sorted((ROOT / "notebooks" / args.lang).glob("[0-9][0-9]_*.ipynb"))
    if args.numbers:
        paths = [p for p in paths if p.name[:2] in args.numbers]
    over = []
    for path in paths:
        number = path.name[:2]
        runs = [run(path, profile=args.profile) for _ in range(args.repeat)]
        times = [total for total, _ in runs]
        late = [t for t in times if t > goal(number)]
        shown = " ".join(f"{t:5.1f}" for t in times)
        print(f"{path.name:45s} {shown} s   goal {goal(number):4.0f} s   {'over' if late else 'ok'}", flush=True)
        for seconds, index in runs[-1][1][: args.cells]:
            print(f"    cell {index:3d}  {seconds:5.1f} s")
        if late:
            over.append(path.name)
        measured.append({"notebook": path.name, "lang": args.lang, "seconds": round(times[-1], 1)})
    if args.json:
        machine = {"cpu_cores": os.cpu_count(), "python": sys.version.split()[0], "profile": args.profile}
        args.json.write_text(json.dumps({"machine": machine, "runs": measured}, indent=1) + "\n", encoding="utf-8")
    if over:
        print("above the goal: " + ", ".join(over))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
