"""Reproducibility and device helpers shared by the notebooks and the training code.

A notebook's setup cell calls :func:`setup`, which fixes the seed, the language of the
package's messages and the figure style (:data:`FIGURE_STYLE`). Two environment variables let the runners that
compare outputs, and the tests that try the course under other numerics, change what the
setup cell asks for without editing a notebook:

- ``MINITRANSFORMER_SEED``: the seed in force instead of the one the cell names;
- ``MINITRANSFORMER_THREADS``: the number of CPU threads (by default PyTorch's own choice,
  which uses every core). Float sums depend on how the work is split, so the same kernels,
  thread count and seed give bit-identical numbers; the stored outputs' thread count is part
  of their numerics profile (:mod:`minitransformer.course.numerics`);
- ``MINITRANSFORMER_DEVICE``: the device the notebooks use, where the user chooses one
  (:func:`default_device`).
"""

from __future__ import annotations

import os
import platform
import random
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import torch

from .i18n import error, set_language

__all__ = [
    "SEED_ENV",
    "THREADS_ENV",
    "DEVICE_ENV",
    "FIGURE_STYLE",
    "set_seed",
    "seed",
    "setup",
    "default_device",
    "eval_mode",
    "cpu_threads",
    "machine",
]

SEED_ENV = "MINITRANSFORMER_SEED"
THREADS_ENV = "MINITRANSFORMER_THREADS"
DEVICE_ENV = "MINITRANSFORMER_DEVICE"

# One look for every figure: large, legible on a projector (matplotlib rcParams).
FIGURE_STYLE = {
    "figure.dpi": 100,
    "savefig.dpi": 100,
    "figure.figsize": (7.0, 4.5),
    "font.size": 12,
    "axes.titlesize": 14,
    "axes.labelsize": 12,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "image.cmap": "viridis",
    "svg.hashsalt": "minitransformer",
}

_seed = 0


def set_seed(value: int = 0) -> None:
    """Seed Python, NumPy and PyTorch (CPU and GPU), and remember the seed (see :func:`seed`)."""
    global _seed
    _seed = int(value)
    random.seed(_seed)
    np.random.seed(_seed)
    torch.manual_seed(_seed)


def seed() -> int:
    """The seed in force: the last one given to :func:`set_seed` or :func:`setup` (0 at first)."""
    return _seed


def default_device(gpu: bool = True) -> torch.device:
    """The device the course runs on: the one ``MINITRANSFORMER_DEVICE`` names ("cpu", "cuda", "mps"), else
    the CUDA GPU when there is one and ``gpu`` (a notebook whose models are too small to gain from a GPU passes
    ``gpu=False``), else the CPU. Apple's MPS only when asked: it has no float64 (which the course's corpus losses
    use) and some operations fall back to the CPU."""
    asked = os.environ.get(DEVICE_ENV, "").strip().lower()
    if not asked:
        return torch.device("cuda" if gpu and torch.cuda.is_available() else "cpu")
    available = {
        "cpu": True,
        "cuda": torch.cuda.is_available(),
        "mps": getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available(),
    }
    if asked not in available:
        raise error(
            f"{DEVICE_ENV}={asked!r}: el curso usa «cpu», «cuda» o «mps».",
            f"{DEVICE_ENV}={asked!r}: the course uses 'cpu', 'cuda' or 'mps'.",
        )
    if not available[asked]:
        raise error(
            f"{DEVICE_ENV}={asked}: este equipo no tiene ese dispositivo (o este torch no lo admite); quita la "
            "variable para usar la GPU CUDA si la hay, o la CPU.",
            f"{DEVICE_ENV}={asked}: this machine has no such device (or this torch does not support it); unset the "
            "variable to use the CUDA GPU if there is one, else the CPU.",
        )
    return torch.device(asked)


def setup(seed: int = 0, lang: str | None = None) -> torch.device:
    """Prepare a notebook: seed, language of messages, readable printing, large figures.

    ``MINITRANSFORMER_SEED`` replaces ``seed`` and ``MINITRANSFORMER_THREADS`` fixes the CPU
    threads when they are set; otherwise PyTorch uses every core. Returns the device to use
    (the GPU when there is one).
    """
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    if os.environ.get(THREADS_ENV):
        torch.set_num_threads(int(os.environ[THREADS_ENV]))
    set_seed(int(os.environ.get(SEED_ENV) or seed))
    if lang is not None:
        set_language(lang)
    torch.set_printoptions(precision=4, sci_mode=False)
    np.set_printoptions(precision=4, suppress=True)
    import matplotlib as mpl

    mpl.rcParams.update(FIGURE_STYLE)
    return default_device()


@contextmanager
def eval_mode(model: torch.nn.Module) -> Iterator[None]:
    """Run the block with ``model`` in eval mode (no dropout), then give it back its own mode."""
    was_training = model.training
    model.eval()
    try:
        yield
    finally:
        model.train(was_training)


@contextmanager
def cpu_threads(n: int) -> Iterator[None]:
    """Run the block with ``n`` CPU threads, then give PyTorch back the count it had.

    A timing that compares a large step with a small one depends on the core count: the large step's matrix
    products spread over every core, the small one's cannot. On a fixed number of threads it measures the work.
    """
    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def machine() -> dict:
    """What a stored run records of the machine it ran on: the CPU's model name, its cores, PyTorch's thread count,
    and the versions that set the numbers (Python, torch, the system)."""
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "threads": torch.get_num_threads(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "system": platform.system(),
    }
