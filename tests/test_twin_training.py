"""tests/twin_training.py: the second copy of a notebook gets the first one's training, and only the same training."""

from __future__ import annotations

import dataclasses
import os
import random
import subprocess
import sys
from pathlib import Path

import numpy
import pytest
import torch
import twin_training

from minitransformer import runtime
from minitransformer.course import counting

SMALL = dataclasses.replace(counting.COUNTING_RECIPE, steps=3, batch_size=8)


@pytest.fixture
def counted(tmp_path):
    """train_counting_gpt wrapped as the notebook kernels have it, and the number of times it really trained."""
    calls = []

    def training(*args, **kwargs):
        calls.append(args)
        return counting.train_counting_gpt(*args, **kwargs)

    training.__name__ = "train_counting_gpt"
    return twin_training.shared("minitransformer.course.counting", training, tmp_path), calls


def start(seed: int = 7) -> None:
    """The generators at a known state (not runtime.set_seed: the seed in force, also in the key, stays)."""
    torch.manual_seed(seed)
    random.seed(seed)
    numpy.random.seed(seed)


def test_the_twin_gets_the_same_model_and_the_generators_as_training_leaves_them(counted):
    train, calls = counted
    start()
    model, corpus, losses = train(None, SMALL, progress=False)
    torch.rand(1)  # training left the generators somewhere: the twin must find them there too
    after = twin_training._generators()
    start()
    again, corpus_again, losses_again = train(None, SMALL, progress=False)
    torch.rand(1)
    assert len(calls) == 1  # the second call did not train
    assert losses_again == losses and corpus_again.keys() == corpus.keys()
    for (name, p), (_, q) in zip(model.state_dict().items(), again.state_dict().items()):
        assert torch.equal(p, q), name
    now = twin_training._generators()
    assert torch.equal(now[0], after[0]) and now[1] == after[1] and numpy.array_equal(now[2][1], after[2][1])
    assert not again.training  # as train_counting_gpt returns it


@pytest.mark.parametrize(
    "change",
    ["generator state", "argument", "seed variable", "seed in force", "thread count"],
)
def test_anything_the_result_depends_on_trains_again(counted, monkeypatch, change):
    train, calls = counted
    start()
    train(None, SMALL, progress=False)
    start(8 if change == "generator state" else 7)
    recipe = dataclasses.replace(SMALL, lr=SMALL.lr / 2) if change == "argument" else SMALL
    if change == "seed variable":
        monkeypatch.setenv("MINITRANSFORMER_SEED", "3")
    if change == "seed in force":  # what seed=None means (the generators stay as they were)
        monkeypatch.setattr(runtime, "_seed", 4)
    if change == "thread count":
        monkeypatch.setattr(torch, "get_num_threads", lambda: 5)
    train(None, recipe, progress=False)
    assert len(calls) == 2


def test_what_cannot_be_keyed_trains_every_time(tmp_path):
    calls = []

    def run_ablation(task, seeds):
        calls.append(seeds)
        return {"modern": [1.0]}

    wrapped = twin_training.shared("minitransformer.course.ablation", run_ablation, tmp_path)
    for _ in range(2):
        assert wrapped(lambda: None, (0,)) == {"modern": [1.0]}  # a lambda cannot be pickled
    assert len(calls) == 2 and not list(tmp_path.iterdir())


def test_the_key_is_the_same_for_the_same_values_in_any_process():
    a = torch.arange(6.0).reshape(2, 3)
    assert twin_training._canonical(a) == twin_training._canonical(a.clone())  # another storage
    assert twin_training._canonical(a.T.contiguous()) != twin_training._canonical(a)
    assert twin_training._canonical(a.double()) != twin_training._canonical(a)
    assert twin_training._canonical(torch.ones(2, dtype=torch.bfloat16)) != twin_training._canonical(
        torch.full((2,), 2.0, dtype=torch.bfloat16)
    )
    assert twin_training._canonical({"b", "a", "c"}) == twin_training._canonical({"c", "a", "b"})
    # in two processes with different string hashing (where pickle writes a set in another order)
    code = (
        "import hashlib, torch, twin_training; torch.manual_seed(0); "
        "print(hashlib.sha256(twin_training._canonical(({'x', 'y', 'z', 'w'}, torch.get_rng_state()))).hexdigest())"
    )
    digests = {
        subprocess.run(
            [sys.executable, "-c", code],
            env={**os.environ, "PYTHONHASHSEED": seed, "PYTHONPATH": str(Path(__file__).parent)},
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        for seed in ("1", "2")
    }
    assert len(digests) == 1, digests


def run_after_startup(folder: Path, code: str) -> dict[str, str]:
    """Run ``code`` in a fresh Python after the kernels' startup script (as a notebook cell would); its environment."""
    environ = twin_training.prepare(folder)
    startup = next(Path(environ["IPYTHONDIR"]).rglob("startup/*.py")).read_text(encoding="utf-8")
    preamble = f"namespace = {{'__name__': '__main__'}}\nexec({startup!r}, namespace)\n"
    done = subprocess.run(
        [sys.executable, "-c", preamble + code],
        env={**os.environ, **environ},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return environ


def test_the_startup_script_wraps_the_training_functions_once_imported_and_leaves_no_names(tmp_path):
    code = (
        "import sys\n"
        "assert 'minitransformer.course.counting' not in sys.modules  # nothing imported before a notebook asks\n"
        "from minitransformer.course.counting import train_counting_gpt\n"
        "from minitransformer.course.translator import train_number_translator\n"
        "from minitransformer.course.ablation import run_ablation\n"
        "from minitransformer.generation import generate\n"
        "assert all(f.twin_shared for f in (train_counting_gpt, train_number_translator, run_ablation))\n"
        "assert not hasattr(generate, 'twin_shared')\n"
        "assert set(namespace) == {'__name__', '__builtins__'}, set(namespace)\n"
    )
    environ = run_after_startup(tmp_path, code)
    assert Path(environ[twin_training.CACHE_ENV]).is_dir()


def test_every_training_function_is_where_the_cache_looks_for_it():
    """A function that moved without its new module here would not fail: it would train in both languages."""
    import importlib

    for module, names in twin_training.TRAINING.items():
        for name in names:
            function = getattr(importlib.import_module(module), name)
            home = function.__module__
            assert home in twin_training.TRAINING and name in twin_training.TRAINING[home], (module, name, home)


def test_every_training_function_a_notebook_imports_is_shared():
    """Each ``train_…`` function a notebook imports from ``minitransformer.course`` is in the table: one left out
    would not fail, it would train in both languages."""
    import re

    root = Path(__file__).resolve().parents[1]
    imported = set()
    for source in (root / "notebooks" / "source").glob("*.md"):
        text = source.read_text(encoding="utf-8")
        for module, names in re.findall(r"from (minitransformer\.course\.\w+) import (\([^)]*\)|[^\n]+)", text):
            imported |= {(module, name) for name in re.findall(r"\b(train_\w+)", names)}
    assert ("minitransformer.course.counting", "train_counting_gpt") in imported  # the search finds them
    for module, name in sorted(imported):
        assert name in twin_training.TRAINING.get(module, ()), (module, name)
