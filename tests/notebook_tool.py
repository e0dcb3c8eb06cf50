"""``tools/notebooks.py`` loaded as a module for the tests (``tools/`` is not a package):
``from notebook_tool import nbt``."""

import importlib.util
import sys
from pathlib import Path

_spec = importlib.util.spec_from_file_location(
    "notebooks_tool", Path(__file__).resolve().parents[1] / "tools" / "notebooks.py"
)
nbt = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = nbt  # dataclasses look their module up there
_spec.loader.exec_module(nbt)
