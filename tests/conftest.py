"""Shared test set-up. Unit tests run on one CPU thread: small tensors gain nothing from more, and
results do not depend on the machine's core count. (Notebook kernels get their thread count from the
repository's top-level conftest.py.)"""

import sys

import pytest
import torch

from minitransformer import i18n

torch.set_num_threads(1)


@pytest.fixture
def language():
    """Set the package's language for one test (``language("es")``), and put the previous one back
    afterwards."""
    before = i18n.language()
    yield i18n.set_language
    i18n.set_language(before)


@pytest.fixture(autouse=True)
def close_figures():
    """Close the figures a test drew, so that they do not pile up in memory (matplotlib is only
    touched where a test has imported it)."""
    yield
    if "matplotlib.pyplot" in sys.modules:
        sys.modules["matplotlib.pyplot"].close("all")
