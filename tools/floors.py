"""Run the course on the oldest versions it declares, or on any other stack, in a fresh virtual environment.

    python tools/floors.py                                   # every ">=" of pyproject.toml as "==", on Python 3.10
    python tools/floors.py --stack torch==2.11.0 transformers==5.17.0 --python python3.12
                                                             # constraints.txt, but these versions
    python tools/floors.py --notebooks 04 07 08 12           # which notebooks' assertions to check

It makes ``/tmp/floors-<name>`` with the chosen Python, installs the course there (``-e .[dev]``, as CONTRIBUTING does) with the
versions asked for, runs the unit tests (``-m "not slow"``) and then executes the chosen English notebooks from
their first cell to their last: every assertion must hold. Stored outputs are not compared (older libraries print and
draw differently: see CONTRIBUTING, "Checking the floors"). On Linux, an older torch comes from PyPI as its CUDA
build (a few GB). Prints one line per step and exits with 1 when one fails.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ["04", "07", "08", "12", "13"]  # the pretrained encoder, training, bertviz, the language model, circuits


def floors() -> list[str]:
    """Every lower bound of pyproject.toml (dependencies and extras) as an exact version."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    deps = project["dependencies"] + [d for ds in project["optional-dependencies"].values() for d in ds]
    return sorted({re.sub(r",.*", "", d).replace(">=", "==") for d in deps if ">=" in d})


def stack(overrides: list[str]) -> list[str]:
    """constraints.txt with the versions of ``overrides`` in place of its own."""
    names = {re.split(r"[=<>]", o)[0].lower() for o in overrides}
    kept = []
    for line in (ROOT / "constraints.txt").read_text(encoding="utf-8").splitlines():
        name = re.split(r"[=<>; ]", line.strip(), maxsplit=1)[0].lower()
        if line.strip() and not line.startswith("#") and name not in names:
            kept.append(line)
    return kept + overrides


def step(name: str, command: list[str], **kw) -> bool:
    print(f"{name} ...", flush=True)
    done = subprocess.run(command, **kw)
    print(f"{name}: {'ok' if done.returncode == 0 else f'FAILED (exit {done.returncode})'}", flush=True)
    return done.returncode == 0


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--stack", nargs="*", help="exact versions over constraints.txt (default: the floors)")
    parser.add_argument("--python", default="python3.10", help="the Python to make the environment with")
    parser.add_argument("--notebooks", nargs="*", default=NOTEBOOKS, metavar="NN")
    args = parser.parse_args(argv)
    pins = stack(args.stack) if args.stack else floors()
    label = "-".join(p.replace("==", "") for p in args.stack) if args.stack else "floors"
    venv = Path(f"/tmp/floors-{label}")
    constraints = venv.with_suffix(".txt")
    constraints.write_text("\n".join(pins) + "\n", encoding="utf-8")
    python = venv / "bin" / "python"
    print(f"{venv}: {' '.join(args.stack) if args.stack else 'every floor of pyproject.toml'}", flush=True)
    ok = (python.exists() or step("venv", [args.python, "-m", "venv", str(venv)])) and step(
        "install", [str(python), "-m", "pip", "install", "-q", "-c", str(constraints), "-e", f"{ROOT}[dev]"]
    )
    if not ok:
        return 1
    subprocess.run([str(python), "-m", "pip", "list", "--format=freeze"], stdout=open(venv / "versions.txt", "w"))
    versions = dict(line.split("==") for line in (venv / "versions.txt").read_text().split() if "==" in line)
    print(f"torch {versions.get('torch')}, transformers {versions.get('transformers')}", flush=True)
    env = {"MINITRANSFORMER_THREADS": "2", "OMP_WAIT_POLICY": "PASSIVE"}

    ok &= step("unit tests", [str(python), "-m", "pytest", "-q", "-m", "not slow", "-p", "no:cacheprovider", "tests"],
               cwd=ROOT, env={**os.environ, **env})  # fmt: skip
    for number in args.notebooks:
        (path,) = (ROOT / "notebooks" / "en").glob(f"{number}_*.ipynb")
        run = (
            "import nbclient, nbformat, sys; nb = nbformat.read(sys.argv[1], as_version=4); "
            "nbclient.NotebookClient(nb, timeout=900, kernel_name='python3').execute()"
        )
        ok &= step(f"notebook {number}", [str(python), "-c", run, str(path)], cwd=venv, env={**os.environ, **env})
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
