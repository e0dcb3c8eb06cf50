"""Reproducibility and device helpers shared by the notebooks and the training code."""

from __future__ import annotations

import os
import random

import numpy as np
import torch

__all__ = ["set_seed", "setup", "default_device", "NUM_THREADS"]

# The stored notebook outputs are computed with this many CPU threads: float sums depend on
# how the work is split, so the same thread count (and seed) gives bit-identical results.
NUM_THREADS = 2


def set_seed(seed: int = 0) -> None:
    """Seed Python, NumPy and PyTorch (CPU and GPU)."""
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def default_device() -> torch.device:
    """The GPU when there is one, else the CPU."""
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def setup(seed: int = 0, threads: int = NUM_THREADS) -> torch.device:
    """Prepare a notebook: fixed threads and seed, readable printing, large figures.

    Returns the device to use (the GPU when there is one).
    """
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    torch.set_num_threads(threads)
    set_seed(seed)
    torch.set_printoptions(precision=4, sci_mode=False)
    np.set_printoptions(precision=4, suppress=True)
    from .viz import style

    style.apply()
    return default_device()
