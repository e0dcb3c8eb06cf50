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


_gpu_spec = importlib.util.spec_from_file_location("benchmark_gpu", ROOT / "benchmarks" / "gpu.py")
gpu = importlib.util.module_from_spec(_gpu_spec)
_gpu_spec.loader.exec_module(gpu)


def test_the_goals_are_the_decided_ones():
    """A notebook that trains a model live within 60 s, 11 within 30 s, any other within 20 s."""
    assert [bench.goal(n) for n in ("07", "09", "10", "12", "13")] == [60.0] * 5
    assert bench.goal("11") == 30.0 and bench.goal("00") == bench.goal("08") == 20.0


def test_the_gpu_script_refuses_to_pretend_without_a_gpu(monkeypatch, capsys):
    monkeypatch.setattr(gpu.torch.cuda, "is_available", lambda: False)
    assert gpu.main(["00"]) == 2
    assert "--cpu" in capsys.readouterr().err


@pytest.mark.slow
def test_the_gpu_script_reports_times_failures_and_the_gpu_branch(tmp_path, capsys):
    """On the CPU (--cpu), on two small notebooks: one whose GPU branch prints the CPU's line, one whose
    assertion fails; the report names the failing cell and its error, and the exit status is 1."""
    good = nbformat.v4.new_notebook()
    good.cells = [
        nbformat.v4.new_markdown_cell("# good"),
        nbformat.v4.new_code_cell("import torch\nx = 2"),
        nbformat.v4.new_code_cell("if torch.cuda.is_available():\n    print('fused')\nelse:\n    print('no GPU here')"),
    ]
    bad = nbformat.v4.new_notebook()
    bad.cells = [nbformat.v4.new_code_cell("y = 1"), nbformat.v4.new_code_cell("assert y == 2, 'not on this device'")]
    nbformat.write(good, tmp_path / "00_good.ipynb")
    nbformat.write(bad, tmp_path / "01_bad.ipynb")
    status = gpu.main(["--cpu", "--no-verdict", "--folder", str(tmp_path)])
    out = capsys.readouterr().out
    assert status == 1, out
    assert "no GPU: the CPU" in out
    assert "00_good.ipynb" in out and "cell 2 (branches on the GPU):" in out and "        no GPU here" in out
    assert "01_bad.ipynb" in out and "FAILED at cell 1: AssertionError: not on this device" in out
    assert "1 notebooks ran, 1 failed" in out
