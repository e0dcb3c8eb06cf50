"""benchmarks/notebooks.py times a notebook in the environment it says: a student's (this process's, without
the test run's numerics profile) or the test run's (with it). Its kernels once started with an empty
environment (it was read after being cleared): no PATH or HOME, and under ``--profile`` threads that spun."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import nbformat
import pytest

from minitransformer.course.numerics import PROFILE

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("benchmark_notebooks", ROOT / "benchmarks" / "notebooks.py")
bench = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench)


@pytest.fixture
def environment(monkeypatch):
    """A user's environment with one profile variable of their own (it wins under the profile)."""
    monkeypatch.setenv("MINITRANSFORMER_THREADS", "1")
    monkeypatch.setenv("MINITRANSFORMER_SEED", "5")
    monkeypatch.delenv("MKL_CBWR", raising=False)
    monkeypatch.delenv("OMP_WAIT_POLICY", raising=False)
    return dict(os.environ)


def test_a_student_kernel_keeps_the_environment_without_the_profile(environment):
    env = bench.kernel_environ(profile=False)
    assert env["PATH"] == environment["PATH"] and env.get("HOME") == environment.get("HOME")
    assert not set(env) & (set(PROFILE) | {"MINITRANSFORMER_SEED", "OMP_WAIT_POLICY"})


def test_a_profile_kernel_gets_the_profile_where_the_user_set_nothing(environment):
    env = bench.kernel_environ(profile=True)
    assert env["PATH"] == environment["PATH"]
    assert env["MINITRANSFORMER_THREADS"] == "1" and env["MINITRANSFORMER_SEED"] == "5"  # the user's win
    assert env["MKL_CBWR"] == PROFILE["MKL_CBWR"] and env["ATEN_CPU_CAPABILITY"] == PROFILE["ATEN_CPU_CAPABILITY"]
    assert env["OMP_WAIT_POLICY"] == "PASSIVE"


@pytest.mark.slow
@pytest.mark.parametrize("profile", [False, True])
def test_the_kernel_starts_with_that_environment(environment, tmp_path, profile):
    """run() fails when a cell fails: this notebook's cell asserts the environment its kernel got."""
    expected = bench.kernel_environ(profile)
    keys = ["PATH", "MINITRANSFORMER_THREADS", "MKL_CBWR", "OMP_WAIT_POLICY"]
    wanted = {k: expected.get(k) for k in keys}
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell(f"import os\nassert {{k: os.environ.get(k) for k in {keys!r}}} == {wanted!r}")
    ]
    path = tmp_path / "environment.ipynb"
    nbformat.write(nb, path)
    seconds, cells = bench.run(path, timeout=120, profile=profile)
    assert seconds > 0 and len(cells) == 1
