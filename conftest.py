"""Notebook kernels started by pytest (nbval) inherit MINITRANSFORMER_THREADS, so their setup
cell uses the thread count their stored outputs were computed with. A value already set in
the environment wins (CI's second leg runs the notebooks on one thread)."""

import os

from minitransformer.runtime import STORED_THREADS, THREADS_ENV

os.environ.setdefault(THREADS_ENV, str(STORED_THREADS))
