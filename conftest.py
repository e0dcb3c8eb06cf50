"""Settings for the whole test run (unit tests and notebooks).

- Notebook kernels started by nbval inherit the numerics profile of the stored outputs
  (``minitransformer.course.numerics.PROFILE``: thread count, CPU kernels, MKL's code path). A variable
  already set in the environment wins, so a run under another profile stays possible (CI's
  second leg runs the English notebooks on one thread with another seed).
- Before comparing notebooks with their stored outputs, the run measures whether this machine
  reproduces that profile: a fingerprint (``python -m minitransformer.course.numerics``) against the one
  kept in ``notebooks/numerics.json``. It says which in one line, in the user's language. Where
  it does not reproduce, every cell still runs and its assertions are checked, and the outputs
  are compared except those of the cells listed there as depending on float numerics or the seed.
- Every cell that nbval re-executes from a notebook is `slow`, so that `pytest -m "not slow"`
  is the quick loop.
- With pytest-xdist (``python course.py test`` starts one worker per core, up to four, each
  taking whole files), the main process measures the fingerprint once and hands the verdict to
  the workers (only when the paths it was given can hold a notebook: a run of unit tests does not
  pay for it); it prints the verdict at the end if any notebook ran.
- xdist hands out whole files in the order they were collected (``course.py`` passes ``--no-loadscope-reorder``:
  by default xdist hands out the files with the most tests first), so the longest ones are moved to the front
  (``LONGEST_FIRST``, from ``--durations``): started last, one of them would keep one worker busy alone at the
  end. Within a file the order never changes (a notebook's cells run in sequence).
- The two copies of a notebook (Spanish and English) run the same code under the same profile, so they train the
  same models: the notebook kernels of the run start with ``tests/twin_training.py``, which gives the copy that
  trains second the result of the first (keyed by everything the result depends on), and the Spanish notebooks go
  after everything else so that their English twins have trained by then. They still compute everything after
  training and are compared with outputs stored from live training in each language.
- At the end the run lists each notebook's time (its cells' setup, call and teardown added up),
  so a change sees what it costs a lecture and CI.
"""

import atexit
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

import pytest

from minitransformer.course import numerics

ROOT = Path(__file__).resolve().parent
STORED = ROOT / "notebooks" / "numerics.json"
sys.path.insert(0, str(ROOT / "tests"))
import twin_training  # noqa: E402

os.environ.update(numerics.profile_environ())
if twin_training.CACHE_ENV not in os.environ:  # the run's first process (with xdist, the main one, before its workers)
    _twins = Path(tempfile.mkdtemp(prefix="minitransformer-twins-"))
    os.environ.update(twin_training.prepare(_twins))
    atexit.register(shutil.rmtree, _twins, True)
# The files that take longest in a full run (slowest first, from a fresh-clone CI's --durations): the slide decks
# (built, opened in Chromium, 13 run without its optional sections), the notebooks that train live, the language
# model's full round trip, JupyterLab in Chromium, the numerics tests' end-to-end runs. Matched against the start of
# a file name.
LONGEST_FIRST = (
    "test_slides",
    "12_",
    "09_",
    "test_language_model",
    "07_",
    "test_browser",
    "13_",
    "14_",
    "10_",
    "08_",
    "test_numerics",
)
_notebook_seconds: dict[str, float] = {}  # per notebook file, the seconds its cells took (seen by the main process)
_judgement = pytest.StashKey[tuple[str, bool]]()  # (the verdict line, whether this machine differs)


def _strict(config) -> bool:
    return bool(config.getoption("nbval", False)) and not config.getoption("nbval_lax", False)


def _judge(config) -> tuple[str, bool]:
    """The verdict on this machine's numerics, measured once per run (a worker gets it from the main process)."""
    if _judgement not in config.stash:
        handed = getattr(config, "workerinput", {}).get("numerics")
        if handed is not None:
            config.stash[_judgement] = (handed[0], bool(handed[1]))
        else:
            stored = json.loads(STORED.read_text(encoding="utf-8"))["fingerprint"]
            measured = numerics.measure()
            line = numerics.verdict(measured, stored, numerics.user_language())
            config.stash[_judgement] = (line, bool(numerics.differences(measured, stored)))
    return config.stash[_judgement]


def _may_run_notebooks(config) -> bool:
    """Whether the paths the run was given (or the testpaths) can hold the course's notebooks: a notebook, the
    notebooks folder, something inside it or above it. Measuring the verdict costs a fresh process that trains
    small models (seconds to tens of seconds on a busy machine): a run of unit tests alone does not need it. A
    worker that finds notebooks anyway (in another folder) measures it itself."""
    notebooks = ROOT / "notebooks"
    for arg in config.args:
        path = Path(config.invocation_params.dir, arg.split("::", 1)[0]).resolve()
        if path.suffix == ".ipynb" or path == notebooks or notebooks in path.parents or path in notebooks.parents:
            return True
        if not path.exists():  # something pytest will resolve itself: stay on the safe side
            return True
    return False


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node):
    """pytest-xdist, main process: hand each worker the verdict (measured here once) when notebooks may run."""
    if _strict(node.config) and _may_run_notebooks(node.config):
        node.workerinput["numerics"] = list(_judge(node.config))


def _rank(item) -> tuple[bool, int]:
    """Where a file goes in the run: the Spanish notebooks after everything else (their twins in English train the
    models they take: tests/twin_training.py), and within each part the longest files first."""
    name = item.path.name
    twin = item.path.suffix == ".ipynb" and item.path.parent.name == "es"
    return twin, next((i for i, start in enumerate(LONGEST_FIRST) if name.startswith(start)), len(LONGEST_FIRST))


def pytest_collection_modifyitems(config, items):
    items.sort(key=_rank)  # stable: each file keeps its own order
    cells = [item for item in items if item.path.suffix == ".ipynb"]
    for item in cells:
        item.add_marker(pytest.mark.slow)
    if not cells or not _strict(config):
        return
    line, differs = _judge(config)
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None and not hasattr(config, "workerinput"):
        reporter.write_line(line)
    if not differs:
        return
    stored = json.loads(STORED.read_text(encoding="utf-8"))
    for item in cells:
        _, number, key = (item.cell.get("id") or "--").split("-", 2)  # "en-07-<key>", as tools/notebooks.py builds it
        classified = stored["cells"].get(number)
        if classified is None or key in classified["dependent"]:
            item.options["check"] = False


def pytest_runtest_logreport(report):
    """Main process: add up each notebook's time (with xdist, the reports come from the workers)."""
    path, _, rest = report.nodeid.partition("::")
    if path.endswith(".ipynb") and rest:
        _notebook_seconds[path] = _notebook_seconds.get(path, 0.0) + report.duration


def pytest_terminal_summary(terminalreporter, config):
    if _notebook_seconds:
        terminalreporter.section("notebook times")
        for path, seconds in sorted(_notebook_seconds.items()):
            terminalreporter.write_line(f"{seconds:6.1f} s  {path}")
    if _judgement in config.stash and _notebook_seconds:
        terminalreporter.write_line(config.stash[_judgement][0])
