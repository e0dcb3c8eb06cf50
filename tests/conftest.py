"""Unit tests run on one CPU thread: small tensors gain nothing from more, and results do
not depend on the machine's core count. Notebooks run in their own kernels, started with
MINITRANSFORMER_THREADS set so that their setup cell uses the thread count their stored
outputs were computed with (runtime.STORED_THREADS)."""

import os

import torch

from minitransformer.runtime import STORED_THREADS, THREADS_ENV

os.environ.setdefault(THREADS_ENV, str(STORED_THREADS))
torch.set_num_threads(1)
