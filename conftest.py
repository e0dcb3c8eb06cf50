"""Marks for the whole test run (unit tests and notebooks): every cell that nbval re-executes
from a notebook is `slow`, so that `pytest -m "not slow"` is the quick loop."""

import pytest


def pytest_collection_modifyitems(items):
    for item in items:
        if item.path.suffix == ".ipynb":
            item.add_marker(pytest.mark.slow)
