"""Settings for the whole test run (unit tests and notebooks).

- Notebook kernels started by nbval inherit the numerics profile of the stored outputs
  (``minitransformer.numerics.PROFILE``: thread count, CPU kernels, MKL's code path). A variable
  already set in the environment wins, so a run under another profile stays possible (CI's
  second leg runs the English notebooks on one thread with another seed).
- Before comparing notebooks with their stored outputs, the run measures whether this machine
  reproduces that profile: a fingerprint (``python -m minitransformer.numerics``) against the one
  kept in ``notebooks/numerics.json``. It says which in one line, in the user's language. Where
  it does not reproduce, every cell still runs and its assertions are checked, and the outputs
  are compared except those of the cells listed there as depending on float numerics or the seed.
- Every cell that nbval re-executes from a notebook is `slow`, so that `pytest -m "not slow"`
  is the quick loop.
"""

import json
import os
from pathlib import Path

import pytest

from minitransformer import numerics

ROOT = Path(__file__).resolve().parent
STORED = ROOT / "notebooks" / "numerics.json"

os.environ.update(numerics.profile_environ())
_verdict = pytest.StashKey[str]()


def pytest_collection_modifyitems(config, items):
    cells = [item for item in items if item.path.suffix == ".ipynb"]
    for item in cells:
        item.add_marker(pytest.mark.slow)
    strict = config.getoption("nbval", False) and not config.getoption("nbval_lax", False)
    if not cells or not strict:
        return
    stored = json.loads(STORED.read_text(encoding="utf-8"))
    measured = numerics.measure()
    config.stash[_verdict] = numerics.verdict(measured, stored["fingerprint"], numerics.user_language())
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        reporter.write_line(config.stash[_verdict])
    if not numerics.differences(measured, stored["fingerprint"]):
        return
    for item in cells:
        _, number, key = (item.cell.get("id") or "--").split("-", 2)  # "en-07-<key>", as tools/notebooks.py builds it
        classified = stored["cells"].get(number)
        if classified is None or key in classified["dependent"]:
            item.options["check"] = False


def pytest_terminal_summary(terminalreporter, config):
    if _verdict in config.stash:
        terminalreporter.write_line(config.stash[_verdict])
