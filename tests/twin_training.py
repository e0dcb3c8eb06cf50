"""The Spanish and English copy of a notebook train the same model: the second one takes what the first trained.

The test run executes every notebook twice, once per language, with the same code (``test_parity``) under the same
numerics profile, so the two copies of 07, 09, 10, 12 and 13 train the same models bit for bit. The test run starts every
notebook kernel with this file as an IPython startup script (``conftest.py`` sets ``IPYTHONDIR``). It wraps the
package's training functions that notebooks call, when a notebook imports them. A call is keyed by everything its
result depends on: the function, its arguments, the random generators' states before it, the numerics profile, the
thread count, the seed in force, torch's version and the package's files. Its result is stored in
``MINITRANSFORMER_TWIN_CACHE`` with the generators' states after it; the same call in the other language gets that
result and those states back instead of training again, and anything else trains as before. Where the result
cannot be stored (an argument or a result that cannot be pickled, a GPU), the call trains.

Where the run compares strictly, a wrong result would fail: the twin that takes the result still computes
everything after it, and its outputs are compared with the stored ones, which were computed with training live in
each language (``tools/notebooks.py run``, outside the test run, trains every time).
"""

from __future__ import annotations

import functools
import hashlib
import importlib.abc
import importlib.machinery
import io
import os
import pickle
import random
import sys
from pathlib import Path

CACHE_ENV = "MINITRANSFORMER_TWIN_CACHE"
_UNPICKLABLE = (pickle.PicklingError, TypeError, AttributeError)  # what pickle raises for a value it cannot write
# module -> the functions of it that train (each one's result is fully set by its arguments, the generators' states
# and the numerics; none of them draws a progress bar into a compared output). A function missing here would not
# fail: it would train in both languages.
TRAINING = {
    "minitransformer.course.translator": ("train_number_translator",),
    "minitransformer.course.counting": ("train_counting_gpt",),
    "minitransformer.course.ablation": ("run_ablation",),
    "minitransformer.course.induction": ("train_induction_model",),
    "minitransformer.course.language_model": ("train_prose_model",),
}


def _generators():
    import numpy
    import torch

    return torch.get_rng_state(), random.getstate(), numpy.random.get_state()


def _restore(states) -> None:
    import numpy
    import torch

    torch.set_rng_state(states[0])
    random.setstate(states[1])
    numpy.random.set_state(states[2])


@functools.cache
def _source_digest() -> bytes:
    import minitransformer

    digest = hashlib.sha256()
    for path in sorted(Path(minitransformer.__file__).parent.rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts:
            digest.update(path.as_posix().encode() + path.read_bytes())
    return digest.digest()


class _Canonical(pickle._Pickler):
    """pickle, with the same bytes for the same value in any process: a tensor by its dtype, shape and data (pickle
    writes where its storage lives), a set in sorted order (its order follows the process's string hashing). The
    Python implementation of the pickler: the C one does not ask ``reducer_override`` about sets."""

    def reducer_override(self, obj):
        import torch

        if isinstance(obj, torch.Tensor):
            t = obj.detach().cpu().contiguous()
            return tuple, ((str(t.dtype), tuple(t.shape), t.reshape(-1).view(torch.uint8).numpy().tobytes()),)
        if isinstance(obj, (set, frozenset)):
            return tuple, (sorted(obj, key=repr),)
        return NotImplemented


def _canonical(value) -> bytes:
    out = io.BytesIO()
    _Canonical(out, protocol=4).dump(value)
    return out.getvalue()


def _key(module: str, name: str, args: tuple, kwargs: dict) -> str:
    import torch

    from minitransformer import runtime
    from minitransformer.course.numerics import PROFILE

    environment = {k: os.environ.get(k) for k in (*PROFILE, "MINITRANSFORMER_SEED")}
    settings = (runtime.seed(), torch.get_num_threads(), torch.__version__)  # the seed in force: a seed=None default
    digest = hashlib.sha256(_source_digest())
    digest.update(_canonical((module, name, args, kwargs, environment, settings)))
    digest.update(_canonical(_generators()))
    return digest.hexdigest()


def shared(module: str, function, folder: Path):
    """``function`` (of ``module``), taking its result from ``folder`` when the same call was made before."""

    @functools.wraps(function)
    def wrapper(*args, **kwargs):
        import torch

        try:
            key = None if torch.cuda.is_available() else _key(module, function.__name__, args, kwargs)
        except _UNPICKLABLE:
            key = None
        path = folder / f"{key}.pt"
        if key is not None and path.exists():
            result, after = torch.load(path, weights_only=False)
            _restore(after)
            return result
        result = function(*args, **kwargs)
        if key is not None:
            partial = path.with_name(f"{key}.{os.getpid()}.part")
            try:
                torch.save((result, _generators()), partial)
                os.replace(partial, path)  # whole or absent, for the worker that reads it
            except _UNPICKLABLE:
                partial.unlink(missing_ok=True)
        return result

    wrapper.twin_shared = True
    return wrapper


class _WrapAfterImport(importlib.abc.MetaPathFinder):
    """Wraps the training functions of a module of ``TRAINING`` once it has been imported (no import before the
    notebook asks for it: a kernel that never trains pays nothing)."""

    def __init__(self, folder: Path):
        self.folder = folder

    def find_spec(self, fullname, path, target=None):
        if fullname not in TRAINING:
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is None or spec.loader is None:
            return None
        execute, folder = spec.loader.exec_module, self.folder

        def exec_module(module):
            execute(module)
            for name in TRAINING[fullname]:
                setattr(module, name, shared(fullname, getattr(module, name), folder))

        spec.loader.exec_module = exec_module
        return spec


def install() -> bool:
    """Wrap the training functions in this process (the folder: ``MINITRANSFORMER_TWIN_CACHE``); whether it did."""
    folder = os.environ.get(CACHE_ENV)
    if not folder or any(isinstance(f, _WrapAfterImport) for f in sys.meta_path):
        return False
    Path(folder).mkdir(parents=True, exist_ok=True)
    sys.meta_path.insert(0, _WrapAfterImport(Path(folder)))
    return True


STARTUP = """\
# Written by conftest.py for the test run's notebook kernels: tests/twin_training.py (it leaves no names behind).
def _twin_training():
    import importlib.util

    spec = importlib.util.spec_from_file_location("twin_training", {path!r})
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.install()


_twin_training()
del _twin_training
"""


def prepare(folder: Path) -> dict[str, str]:
    """An IPython folder in ``folder`` whose startup script installs this file, and the cache beside it: the
    environment variables that give both to the kernels."""
    startup = folder / "ipython" / "profile_default" / "startup" / "50-twin-training.py"
    startup.parent.mkdir(parents=True, exist_ok=True)
    startup.write_text(STARTUP.format(path=str(Path(__file__).resolve())), encoding="utf-8")
    return {"IPYTHONDIR": str(folder / "ipython"), CACHE_ENV: str(folder / "cache")}
