"""Settings for the whole test run (unit tests and notebooks).

- Notebook kernels started by nbval inherit MINITRANSFORMER_THREADS, so their setup cell uses
  the thread count their stored outputs were computed with. A value already set in the
  environment wins (CI's second leg runs the notebooks on one thread).
- Every cell that nbval re-executes from a notebook is `slow`, so that `pytest -m "not slow"`
  is the quick loop.
"""

import os

import pytest

from minitransformer.runtime import STORED_THREADS, THREADS_ENV

os.environ.setdefault(THREADS_ENV, str(STORED_THREADS))


def pytest_collection_modifyitems(items):
    for item in items:
        if item.path.suffix == ".ipynb":
            item.add_marker(pytest.mark.slow)
