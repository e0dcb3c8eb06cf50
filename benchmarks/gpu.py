"""Every notebook on a CUDA GPU, once: do its assertions hold there, how long does it take, and what do the
cells that run only on a GPU print (notebook 10's comparison of attention backends)?

    python benchmarks/gpu.py                  # on a machine with a CUDA GPU (Colab's GPU runtime, a lab server)
    python benchmarks/gpu.py 10 --lang es
    python benchmarks/gpu.py --cpu 00 01      # the same run on the CPU: what can be tried without a GPU

Each notebook runs as a student runs it (a copy in an empty folder, a fresh kernel, the machine's own numerics:
``benchmarks/notebooks.py``), on the device the package chooses (``runtime.default_device``: the GPU). First the
script prints the GPU's name and the numerics verdict the test run would give here (on a GPU the stored outputs'
profile is not reproduced, so only the notebooks' assertions and their float-free outputs are compared: that path).
Then, per notebook: its time, or the cell that failed and its error; and the text printed by every cell that
branches on ``torch.cuda.is_available()``. Exit status 1 when a notebook fails.
"""

from __future__ import annotations

import argparse
import importlib.util
import platform
import sys
from pathlib import Path

import torch
from nbclient.exceptions import CellExecutionError

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
from minitransformer.course import numerics  # noqa: E402

_spec = importlib.util.spec_from_file_location("benchmark_notebooks", ROOT / "benchmarks" / "notebooks.py")
bench = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench)

GPU_BRANCH = "torch.cuda.is_available()"


def device_line() -> str:
    if torch.cuda.is_available():
        return f"GPU: {torch.cuda.get_device_name(0)}, torch {torch.__version__}, CUDA {torch.version.cuda}"
    return f"no GPU: the CPU ({platform.processor() or platform.machine()}), torch {torch.__version__}"


def printed(cell) -> str:
    """The text a code cell printed (stdout and text/plain results)."""
    out = []
    for output in cell.get("outputs", []):
        if output.get("output_type") == "stream":
            out.append(output.get("text", ""))
        elif "data" in output and "text/plain" in output["data"]:
            out.append(output["data"]["text/plain"] + "\n")
    return "".join(out)


def failed_cell(nb) -> tuple[int, str]:
    """(index, error line) of the first cell with an error output, or (-1, "") if none."""
    for index, cell in enumerate(nb.cells):
        for output in cell.get("outputs", []):
            if output.get("output_type") == "error":
                return index, f"{output.get('ename')}: {output.get('evalue')}"
    return -1, ""


def check(path: Path, timeout: int = 600) -> tuple[bool, str]:
    """Run one notebook; (whether every cell ran, the report's lines for it)."""
    try:
        seconds, nb = bench.execute(path, timeout)
    except CellExecutionError as failure:
        nb = getattr(failure, "nb", None)
        index, line = failed_cell(nb) if nb is not None else (-1, "")
        where = f"cell {index}" if index >= 0 else "a cell"
        first = line or str(failure).strip().splitlines()[-1]
        return False, f"{path.name:45s} FAILED at {where}: {first}"
    lines = [f"{path.name:45s} {seconds:6.1f} s   ok"]
    for index, cell in enumerate(nb.cells):
        if cell.cell_type == "code" and GPU_BRANCH in cell.source:
            text = printed(cell).rstrip()
            lines.append(f"    cell {index} (branches on the GPU):")
            lines += [f"        {line}" for line in text.splitlines()] or ["        (printed nothing)"]
    return True, "\n".join(lines)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("numbers", nargs="*", help="two-digit notebook numbers (default: all)")
    parser.add_argument("--lang", choices=["en", "es"], default="en")
    parser.add_argument("--cpu", action="store_true", help="run without a GPU (to try the script itself)")
    parser.add_argument("--folder", type=Path, help="the notebooks' folder (default: notebooks/<lang>)")
    parser.add_argument("--no-verdict", action="store_true", help="skip the numerics verdict (a fresh process)")
    args = parser.parse_args(argv)
    if not torch.cuda.is_available() and not args.cpu:
        print("no CUDA GPU here: run this on a GPU machine, or pass --cpu to try it on the CPU", file=sys.stderr)
        return 2
    print(device_line(), flush=True)
    if not args.no_verdict:
        import json

        stored = json.loads((ROOT / "notebooks" / "numerics.json").read_text(encoding="utf-8"))["fingerprint"]
        print(numerics.verdict(numerics.measure(), stored, "en"), flush=True)
    folder = args.folder or ROOT / "notebooks" / args.lang
    paths = sorted(folder.glob("[0-9][0-9]_*.ipynb"))
    if args.numbers:
        paths = [p for p in paths if p.name[:2] in args.numbers]
    failures = 0
    for path in paths:
        ok, report = check(path)
        print(report, flush=True)
        failures += not ok
    print(f"{len(paths) - failures} notebooks ran, {failures} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
