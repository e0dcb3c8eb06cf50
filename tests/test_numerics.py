"""The numerics profile of the stored outputs: its fingerprint tells a machine that reproduces it
from one that does not, the test run says which in the user's language, and where the machine
does not reproduce it the notebooks' assertions and their float-free outputs are still checked."""

from __future__ import annotations

import json
import os
import platform
import re
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
import torch
from notebook_tool import nbt

from minitransformer.course import numerics

ROOT = Path(__file__).resolve().parents[1]
STORED = json.loads((ROOT / "notebooks" / "numerics.json").read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def pinned():
    """The fingerprint of this machine under the pinned profile."""
    return numerics.measure(_clean(os.environ))


def _clean(environ, **changes):
    """``environ`` without the profile's variables (so that the profile applies), with ``changes``."""
    env = {k: v for k, v in environ.items() if k not in numerics.PROFILE and k != "MINITRANSFORMER_SEED"}
    return {**env, **changes}


@pytest.mark.slow
def test_the_fingerprint_is_the_same_run_after_run(pinned):
    assert numerics.measure(_clean(os.environ)) == pinned


X86 = platform.machine().lower() in ("x86_64", "amd64")


@pytest.mark.slow
@pytest.mark.parametrize(
    "change, setting, part, applies",
    [
        ({"MINITRANSFORMER_THREADS": "1"}, "threads", "gradients", True),
        ({"MINITRANSFORMER_SEED": "1"}, "seed", "random", True),
        ({"ATEN_CPU_CAPABILITY": "default"}, "capability", None, X86 or None),
        ({"MKL_CBWR": "AUTO"}, "digest", "matmul", X86 and torch.backends.mkl.is_available()),
        ({"ONEDNN_MAX_CPU_ISA": "SSE41"}, "digest", "gelu", X86 and torch.backends.mkldnn.is_available()),
    ],
)
def test_each_variable_of_the_profile_changes_the_fingerprint(pinned, change, setting, part, applies):
    """Another value of any profile variable makes a foreign machine, where the variable acts at all
    (PyTorch's, MKL's and oneDNN's instruction sets exist on x86-64 only); the first part of the computation
    that differs names the library the variable steers (the thread split shows first in the backward pass)."""
    other = numerics.measure(_clean(os.environ, **change))
    if applies:
        assert [name for name, _, _ in numerics.differences(other, pinned)] == [setting]
        if part is not None:
            assert numerics.differing_parts(other, pinned)[0][0] == part
    elif applies is False:  # MKL and oneDNN are not there: the variable changes nothing
        assert other["digest"] == pinned["digest"]
    else:  # PyTorch's other instruction sets (NEON, SVE) may or may not differ from its plain kernels
        assert other.keys() == pinned.keys()


def test_the_verdict_names_what_differs_in_both_languages():
    stored = {
        "digest": "0123",
        "torch": "2.13.0",
        "machine": "x86_64",
        "capability": "AVX2",
        "threads": 2,
        "seed": 0,
        "device": "cpu",
    }
    assert "reproduce" in numerics.verdict(stored, stored, "en") and "0123" in numerics.verdict(stored, stored, "es")
    assert numerics.verdict(stored, stored, "es").startswith("Numérica: esta máquina reproduce")
    arm = {**stored, "digest": "9", "machine": "arm64", "capability": "DEFAULT"}
    es, en = numerics.verdict(arm, stored, "es"), numerics.verdict(arm, stored, "en")
    assert "no reproduce" in es and "procesador: arm64 en vez de x86_64" in es
    assert "does not reproduce" in en and "processor: arm64 instead of x86_64" in en
    assert "CPU kernels: DEFAULT instead of AVX2" in en and "kernels de CPU: DEFAULT en vez de AVX2" in es
    other_bits = {**stored, "digest": "9"}
    assert "another CPU or maths library" in numerics.verdict(other_bits, stored, "en")
    assert "otra CPU u otra biblioteca" in numerics.verdict(other_bits, stored, "es")
    # With the parts stored, the line names those that differ: as an Intel Xeon did against the stored
    # profile (made on an AMD EPYC), where every part agreed but the training's weights.
    parts = dict.fromkeys(numerics.PARTS, "a")
    xeon = {**stored, "digest": "9", "parts": {**parts, "training": "b"}}
    es_xeon, en_xeon = (
        numerics.verdict(xeon, {**stored, "parts": parts}, "es"),
        numerics.verdict(xeon, {**stored, "parts": parts}, "en"),
    )
    assert "other bits in: the weights after three Adam steps)" in en_xeon and "MKL" not in en_xeon
    assert "otros bits en: pesos tras tres pasos de Adam)" in es_xeon and "MKL" not in es_xeon
    mkl = {**stored, "digest": "9", "parts": {**parts, "matmul": "b", "forward": "b"}}
    assert "matrix products (MKL); the models' forward pass" in numerics.verdict(mkl, {**stored, "parts": parts}, "en")
    for text in (es, en):
        assert "\n" not in text


def test_the_parts_cover_the_digest_and_the_stored_fingerprint_has_them():
    """The digest hashes the same tensors as before the parts existed (the stored outputs keep their fingerprint);
    every part has a name in both languages, and the stored fingerprint carries every part."""
    assert set(STORED["fingerprint"]["parts"]) == set(numerics.PARTS)
    for es, en in numerics.PARTS.values():
        assert es and en and es != en


@pytest.mark.slow
def test_this_machine_measures_every_part(pinned):
    assert set(pinned["parts"]) == set(numerics.PARTS)
    assert numerics.differing_parts(pinned, pinned) == ([], list(numerics.PARTS))


@pytest.mark.parametrize(
    "environ, lang",
    [
        ({"LANG": "es_ES.UTF-8"}, "es"),
        ({"LANG": "en_GB.UTF-8", "LC_ALL": "es_MX.UTF-8"}, "es"),
        ({"LANG": "es_ES.UTF-8", "LC_ALL": "C.UTF-8"}, "en"),
        ({"LANGUAGE": "es"}, "es"),
        ({}, "en"),
    ],
)
def test_the_users_language_comes_from_the_locale(environ, lang):
    assert numerics.user_language(environ) == lang


def test_the_profile_applies_where_a_variable_is_unset():
    env = numerics.profile_environ({"MINITRANSFORMER_THREADS": "1", "PATH": "/bin"})
    assert env["MINITRANSFORMER_THREADS"] == "1" and env["PATH"] == "/bin"
    assert all(env[k] == v for k, v in numerics.PROFILE.items() if k != "MINITRANSFORMER_THREADS")


def test_every_notebook_has_its_cells_classified():
    """A notebook whose code changed must be classified again (`tools/notebooks.py numerics NN`)."""
    assert nbt.unclassified() == []
    for number, entry in STORED["cells"].items():
        [src] = nbt.sources([number])
        keys = set(nbt.cell_keys(src))
        assert set(entry["dependent"]) <= keys


def test_notebooks_keep_the_seed_in_force():
    """``MINITRANSFORMER_SEED`` replaces the setup cell's seed (CI's second leg runs under seed 1). A cell that seeds
    with a number of its own puts the seed in force back to that number for every cell below it, which then run
    under the stored profile's seed instead of the other one."""
    for source in sorted((ROOT / "notebooks" / "source").glob("*.md")):
        found = re.findall(r"\bset_seed\(\s*\d", source.read_text(encoding="utf-8"))
        assert not found, f"{source.name}: {found} (use set_seed(seed()))"


def test_ci_second_leg_runs_under_the_first_foreign_profile():
    """The cells are classified under CI's second leg's profile, so that leg compares what holds there."""
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    leg = next(line for line in ci.splitlines() if "MINITRANSFORMER_SEED" in line and not line.startswith("#"))
    assigned = dict(re.findall(r"(\w+)=(\S+)", leg))
    assert {k: v for k, v in assigned.items() if k in nbt.FOREIGN_PROFILES[0]} == nbt.FOREIGN_PROFILES[0]


def _pytest(notebook: Path, environ: dict, *options: str) -> subprocess.CompletedProcess:
    """The test command (the repository's settings and conftest) on one notebook."""
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", *options, str(notebook)],
        cwd=ROOT,
        env=environ,
        capture_output=True,
        text=True,
    )


@pytest.fixture
def notebook05(tmp_path_factory):
    """A copy of English notebook 05 in the notebooks folder (so the repository's conftest applies)."""
    original = next((ROOT / "notebooks" / "en").glob("05_*.ipynb"))
    copy = original.with_name(f".test-{original.name}")
    shutil.copy(original, copy)
    yield copy
    copy.unlink(missing_ok=True)


def _tamper(path: Path, dependent: bool) -> None:
    """Change the stored text output of the first cell that is (or is not) listed as dependent."""
    nb = nbformat.read(path, as_version=4)
    listed = set(STORED["cells"]["05"]["dependent"])
    for cell in nb.cells:
        key = cell.get("id", "").split("-", 2)[-1]
        streams = [o for o in cell.get("outputs", []) if o["output_type"] == "stream"]
        if cell.cell_type == "code" and streams and (key in listed) == dependent:
            streams[0]["text"] = f"tampered {'dependent' if dependent else 'independent'}\n" + streams[0]["text"]
            break
    else:
        raise AssertionError("no such cell")
    nbformat.write(nb, path)


@pytest.mark.slow
def test_the_test_run_says_whether_it_compares_strictly(notebook05, pinned):
    reproduces = not numerics.differences(pinned, STORED["fingerprint"])
    done = _pytest(notebook05, _clean(os.environ, LANG="en_US.UTF-8"))
    assert done.returncode == 0, done.stdout[-3000:]
    said = [line for line in done.stdout.splitlines() if line.startswith("Numerics:")]
    assert len(said) == 2 and ("this machine reproduces" in said[0]) == reproduces  # at the start and at the end


@pytest.mark.slow
def test_a_foreign_machine_still_compares_the_outputs_that_do_not_depend_on_numerics(notebook05):
    """On another profile, a changed output of a dependent cell passes and one of an independent cell
    fails; with pytest-xdist, as ``python course.py test`` runs, the workers get the main process's verdict."""
    _tamper(notebook05, dependent=True)
    _tamper(notebook05, dependent=False)
    foreign = _clean(os.environ, LANG="es_ES.UTF-8", MINITRANSFORMER_THREADS="1", MINITRANSFORMER_SEED="1")
    done = _pytest(notebook05, foreign, "-n", "2", "--dist", "loadfile")
    assert done.returncode == 1 and re.search(r"\b1 failed, ", done.stdout), done.stdout[-3000:]
    assert "tampered independent" in done.stdout and "tampered dependent" not in done.stdout
    said = "Numérica: esta máquina no reproduce el perfil de las salidas guardadas (hilos: 1 en vez de 2"
    assert done.stdout.count(said) == 1  # once, at the end (the workers do not print)


def test_run_refuses_to_store_outputs_a_machine_cannot_reproduce(tmp_path, monkeypatch):
    monkeypatch.setattr(nbt, "ROOT", tmp_path)
    (tmp_path / "notebooks").mkdir()
    stored = {"digest": "1", "torch": "2.13.0", "machine": "x86_64", "capability": "AVX2", "threads": 2}
    stored |= {"seed": 0, "device": "cpu"}
    nbt.write_numerics({"fingerprint": stored, "cells": {}})
    monkeypatch.setattr(numerics, "measure", lambda environ=None: {**stored, "threads": 1, "digest": "2"})
    refused = nbt.check_profile()
    assert refused and "threads: 1 instead of 2" in refused.replace("hilos: 1 en vez de 2", "threads: 1 instead of 2")
    assert "--new-profile" in refused
    assert nbt.check_profile(new=True) is None
    assert nbt.read_numerics()["fingerprint"]["digest"] == "2"
    monkeypatch.setattr(numerics, "measure", lambda environ=None: {**stored, "threads": 1, "digest": "2"})
    assert nbt.check_profile() is None  # now the stored profile is this machine's
