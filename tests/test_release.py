"""What Colab does with a notebook a student saved, checked offline.

A notebook's setup cell installs ``minitransformer @ git+https://github.com/<repository>@<ref>``: the release's
tag (``vX.Y.Z``) in a release's notebooks, ``main`` between releases (``tools/notebooks.py``: ``git_ref``). Here the
same install line, with the GitHub address replaced by a fresh clone of this repository (the tag or the branch made
there, as publishing makes it: no test relies on a tag in this checkout), installs into a fresh virtual environment,
and notebook 01 runs alone in an empty folder with that environment's Python as its kernel. The environment sees the
test run's site-packages (torch and the rest come from there, nothing is downloaded), never this checkout's ``src``.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest
from notebook_tool import nbt

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOK = "notebooks/en/01_self_attention_by_hand.ipynb"
INSTALL = re.compile(r'"(minitransformer @ git\+)(https://github\.com/[^/"@]+/[^/"@]+)@([^"]+)"')

# Run by the fresh environment's Python: the notebook, with one more cell that says which package it imported.
EXECUTE = """
import json, sys
import nbformat
from nbclient import NotebookClient

nb = nbformat.read(sys.argv[1], as_version=4)
nb.cells.append(nbformat.v4.new_code_cell("import minitransformer; print(minitransformer.__file__, minitransformer.__version__)"))
NotebookClient(nb, kernel_name="saved", timeout=300).execute()
print(json.dumps(nb.cells[-1].outputs[0]["text"].split()))
"""


def git(*args: str, cwd: Path) -> str:
    done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=True)
    return done.stdout.strip()


def setup_cell(notebook: Path) -> str:
    return "".join(json.loads(notebook.read_text(encoding="utf-8"))["cells"][1]["source"])


def test_the_setup_cell_names_the_version_it_was_built_for():
    """Every notebook's install line names the git ref of the package's version, with the repository's address."""
    ref = nbt.git_ref(nbt.package_version())
    for notebook in sorted(ROOT.glob("notebooks/*/[0-9][0-9]_*.ipynb")):
        (found,) = INSTALL.findall(setup_cell(notebook))
        assert found[1:] == (f"https://github.com/{nbt.repository()}", ref), notebook.name


@pytest.mark.slow
def test_a_saved_notebook_installs_the_release_its_setup_cell_names_and_runs_alone(tmp_path):
    clone = tmp_path / "clone"
    # a whole clone (a shallow one makes pip's partial clone of it fetch object after object without end)
    subprocess.run(["git", "clone", "--quiet", str(ROOT), str(clone)], check=True)
    prefix, _, ref = INSTALL.search(setup_cell(clone / NOTEBOOK)).groups()
    init = (clone / "src" / "minitransformer" / "__init__.py").read_text(encoding="utf-8")
    version = re.search(r'^__version__ = "([^"]+)"$', init, re.M).group(1)
    assert ref == nbt.git_ref(version), f"the setup cell installs @{ref}, and the package beside it is {version}"
    if ref == "main":  # main's notebooks, between releases
        git("checkout", "--quiet", "-B", "main", cwd=clone)
    else:  # a release's notebooks: the tag is made when the repository is published
        git("tag", ref, cwd=clone)
    # only the address changes (PEP 508 wants a host in the URL: file://localhost/..., which git reads as file:///...)
    requirement = f"{prefix}file://localhost{clone.as_posix()}@{ref}"

    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / ("Scripts/python.exe" if os.name == "nt" else "bin/python")
    site = Path(
        subprocess.check_output(
            [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], text=True
        ).strip()
    )
    # this run's site-packages after the environment's own (its .pth files, this checkout's editable install among
    # them, are not read): torch, pip, setuptools, ipykernel and nbclient come from there
    ours = dict.fromkeys([sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]])
    (site / "test_run_packages.pth").write_text("\n".join(ours) + "\n", encoding="utf-8")
    kernel = tmp_path / "jupyter" / "kernels" / "saved"
    kernel.mkdir(parents=True)
    argv = [str(python), "-m", "ipykernel_launcher", "-f", "{connection_file}"]
    (kernel / "kernel.json").write_text(json.dumps({"argv": argv, "language": "python", "display_name": "saved"}))
    drop = {"PYTHONPATH", "IPYTHONDIR", "MINITRANSFORMER_TWIN_CACHE", "JUPYTER_PATH", "VIRTUAL_ENV"}
    env = {k: v for k, v in os.environ.items() if k not in drop}
    env |= {"JUPYTER_PATH": str(tmp_path / "jupyter"), "IPYTHONDIR": str(tmp_path / "ipython"), "PIP_NO_INPUT": "1"}

    # Colab's pip finds the dependencies installed; here they are this run's, so only the package itself is installed
    subprocess.run(
        [python, "-m", "pip", "install", "--quiet", "--no-index", "--no-deps", "--ignore-installed",
         "--no-build-isolation", "--no-cache-dir", "--disable-pip-version-check", requirement],
        env=env, check=True, timeout=300,
    )  # fmt: skip

    folder = tmp_path / "student"
    folder.mkdir()
    (folder / "saved.ipynb").write_bytes((clone / NOTEBOOK).read_bytes())
    done = subprocess.run(
        [python, "-c", EXECUTE, "saved.ipynb"], cwd=folder, env=env, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr[-3000:]
    where, installed = json.loads(done.stdout.strip().splitlines()[-1])
    assert Path(where).is_relative_to(site), f"the notebook imported {where}, not the fresh environment's copy"
    assert installed == version, f"the setup cell names @{ref}, and the notebook ran minitransformer {installed}"
