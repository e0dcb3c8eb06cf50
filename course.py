"""One entry point for the course, for people who only have Python.

    python course.py lab     # install (first time) and open the notebooks in JupyterLab
    python course.py slides [NN ...] [--lang es|en]   # write the slide decks into slides/
    python course.py test    # install (first time) and run the whole test suite
    python course.py run     # re-execute the notebooks and store their outputs (maintainers)

The first call creates a virtual environment in `.venv/` and installs the package with the
exact versions of `constraints.txt`; later calls reuse it (a call with another Python version makes it
anew for that version; `COURSE_VENV=path` puts it elsewhere). Extra arguments are passed on
(`python course.py test -k attention`).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent
VENV = ROOT / (os.environ.get("COURSE_VENV") or ".venv")
STAMP = VENV / ".course-env-stamp"
PYTHON = f"{sys.version_info.major}.{sys.version_info.minor}"

# JupyterLab settings for a classroom: no question pops up over the notebook on the projector
# (JupyterLab asks whether to fetch Jupyter's news and checks for updates, both online).
# Written as an "overrides.d" file of the environment, so a user's own settings still win.
# RISE's slides scroll: at 1280 x 720 a live control's figure and 09's "sample" button fall below the slide's edge,
# out of reach. jupyterlab-rise's `scroll` (off by default) makes a slide scroll only if it is taller than the window
# when it is shown, not once a live cell run on it has grown it: the course's style rule makes every slide scroll
# once it is taller. Slides start at the top (reveal.js centres a slide by its height when it is shown, and a live
# cell's output that grows it then pushes its foot below the window, out of the scroll's reach). JupyterLab's
# "Click to add a cell." button at the notebook's foot, which RISE leaves floating over every slide, is hidden there.
# RISE puts its `overlay` setting's HTML into the slideshow as it is: the style rules apply to the slideshow only.
LAB_SETTINGS = {
    "@jupyterlab/apputils-extension:notification": {"fetchNews": "false", "checkForUpdates": False},
    "jupyterlab-rise:plugin": {
        "scroll": True,
        "center": False,
        "overlay": "<style>.reveal .jp-Notebook-footer { display: none; }"
        " .reveal .slides section:not(.stack) { max-height: 95vh; overflow-y: auto; }</style>",
    },
}
# The course takes only static files from nbclassic (require.js and jQuery for bertviz's views offline), not its
# server extension, which would print its "migrate to Notebook 7" banner at every start. Jupyter reads the files of
# jupyter_server_config.d in name order, and a later one wins: this one comes after nbclassic's.
SERVER_SETTINGS = {"ServerApp": {"jpserver_extensions": {"nbclassic": False}}}


# What the first run says while it installs; pip's own lines follow (each package as it is downloaded, with its size,
# and a progress bar in a terminal). Measured from a fresh clone: 2.0 GB, most of it torch and its libraries, in
# 3 min 49 s.
INSTALLING = (
    "Instalando el curso y sus dependencias fijadas: unos 2 GB (sobre todo PyTorch), unos 4 minutos con una conexión "
    "rápida, más con la de un aula compartida; solo la primera vez. pip nombra cada paquete al descargarlo.\n"
    "Installing the course and its pinned dependencies: about 2 GB (mostly PyTorch), about 4 minutes on a fast "
    "connection, longer on a classroom's shared one; only the first time. pip names each package as it downloads it."
)
COMPILING = "Compilando los paquetes instalados ...\nCompiling the installed packages ..."
READY = "El entorno del curso está listo.\nThe course's environment is ready."


def venv_python() -> Path:
    sub = "Scripts/python.exe" if os.name == "nt" else "bin/python"
    return VENV / sub


def requirements_hash() -> str:
    h = hashlib.sha256()
    for name in ("pyproject.toml", "constraints.txt"):
        h.update((ROOT / name).read_bytes())
    return h.hexdigest()


def ensure_env(compile_all: bool = True) -> Path:
    """Create `.venv` and install the course into it, unless it is already up to date. ``compile_all=False`` leaves
    the packages to be byte-compiled as they are first imported (CI's third leg, installed beside the first two: what
    its tests import is a small part of what compiling everything costs the legs that run meanwhile)."""
    py = venv_python()
    made_by = venv_version(VENV)
    if made_by is not None and made_by != PYTHON:
        print(
            f"{VENV} lo hizo Python {made_by}; se hace de nuevo para Python {PYTHON} ...\n"
            f"{VENV} was made by Python {made_by}; making it anew for Python {PYTHON} ...",
            flush=True,
        )
        venv.EnvBuilder(with_pip=True, clear=True).create(VENV)
    elif not py.exists():
        print(f"Creando el entorno virtual {VENV} ...\nCreating the virtual environment {VENV} ...", flush=True)
        venv.EnvBuilder(with_pip=True).create(VENV)
    wanted = requirements_hash()
    if not STAMP.exists() or STAMP.read_text() != wanted:
        print(INSTALLING, flush=True)
        subprocess.run(
            [
                str(py),
                "-m",
                "pip",
                "install",
                "--disable-pip-version-check",
                "--no-compile",
                "-c",
                str(ROOT / "constraints.txt"),
                "-e",
                f"{ROOT}[dev]",
            ],
            check=True,
            env=course_env(py),
        )
        if compile_all:
            print(COMPILING, flush=True)
            compile_environment(py)
        STAMP.write_text(wanted)
        print(READY, flush=True)
    return py


def venv_version(path: Path) -> str | None:
    """The Python version ("3.11") that made the virtual environment at ``path``, or None if there is none."""
    try:
        cfg = (path / "pyvenv.cfg").read_text(encoding="utf-8")
    except OSError:
        return None
    found = re.search(r"^version(?:_info)?\s*=\s*(\d+)\.(\d+)", cfg, re.M)
    return f"{found[1]}.{found[2]}" if found else None


def compile_environment(py: Path) -> None:
    """Byte-compile the installed packages on every core (pip compiles them one file at a time: half of the
    install's time on two cores). A file that does not compile on this Python (a few test helpers written for a
    newer one) stays as it is, as pip leaves it."""
    paths = subprocess.run(
        [str(py), "-c", "import sysconfig; p = sysconfig.get_paths(); print(p['purelib']); print(p['platlib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split("\n")
    folders = sorted({p.strip() for p in paths if p.strip()})
    subprocess.run([str(py), "-m", "compileall", "-qq", "-j", "0", *folders], check=False)


def write_lab_settings(prefix: Path) -> list[Path]:
    """Write the course's JupyterLab and Jupyter server settings into the environment at ``prefix``; returns
    the files."""
    files = {
        prefix
        / "share"
        / "jupyter"
        / "lab"
        / "settings"
        / "overrides.d"
        / "transformers-desde-cero.json": LAB_SETTINGS,
        prefix / "etc" / "jupyter" / "jupyter_server_config.d" / "zz-transformers-desde-cero.json": SERVER_SETTINGS,
    }
    for path, settings in files.items():
        text = json.dumps(settings, indent=2) + "\n"
        if not path.exists() or path.read_text(encoding="utf-8") != text:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
    return list(files)


def course_env(py: Path, environ: dict[str, str] | None = None) -> dict[str, str]:
    """The environment variables of every command the course starts with the course's Python ``py``: as in its
    activated virtual environment, whatever another environment (Anaconda's base, a system JupyterLab, a
    ``pip install --user jupyterlab``, an active conda or virtual environment) put first on PATH.

    - its scripts folder (``bin``, ``Scripts`` on Windows) comes first on PATH: a ``jupyter`` subcommand, a kernel
      or a tool that a child starts by name is the course's (``python -m jupyter`` looks its subcommands up on PATH
      and puts its own folder last);
    - Jupyter looks for kernels and settings in the environment before the user's folders
      (``JUPYTER_PREFER_ENV_PATH``): the kernel ``python3`` is the environment's, which runs the course's Python,
      not one that another Python installed in the user's folder;
    - ``PYTHONHOME``, which would make the course's Python read another installation's library, is dropped.
    """
    env = dict(os.environ if environ is None else environ)
    scripts = str(Path(py).parent)
    path = [p for p in env.get("PATH", "").split(os.pathsep) if p and os.path.normcase(p) != os.path.normcase(scripts)]
    env["PATH"] = os.pathsep.join([scripts, *path])
    env["VIRTUAL_ENV"] = str(Path(py).parent.parent)
    env["JUPYTER_PREFER_ENV_PATH"] = "1"
    env.pop("PYTHONHOME", None)
    return env


def lab_command(py: Path, rest: list[str], is_root: bool | None = None) -> list[str]:
    """The command that opens the course in JupyterLab: the course environment's own JupyterLab, by its module
    (``python -m jupyter lab`` would run the first ``jupyter-lab`` on PATH). As root (a container, a classroom image), JupyterLab
    refuses to start unless told ``--allow-root``: the course says so and tells it, and nothing else changes
    (the server still listens on localhost only and still asks for its login token)."""
    if is_root is None:
        is_root = hasattr(os, "geteuid") and os.geteuid() == 0
    args = [str(py), "-m", "jupyterlab", "notebooks", *rest]
    if is_root and "--allow-root" not in rest:
        print(
            "Ejecutas como root (un contenedor, una imagen de aula): JupyterLab se abre con --allow-root; sigue "
            "escuchando solo en localhost y pidiendo su token.\n"
            "Running as root (a container, a classroom image): JupyterLab starts with --allow-root; it still listens "
            "on localhost only and still asks for its token.",
            flush=True,
        )
        args.append("--allow-root")
    return args


def parallel(rest: list[str]) -> list[str]:
    """pytest-xdist's options for the test run: one worker per CPU core (up to four), each taking
    whole files (a notebook's cells share one kernel) in the order the test run collected them (xdist would
    otherwise hand out the files with the most tests first, not the longest: conftest.py's LONGEST_FIRST),
    unless the user chose (``-n``, ``-p no:xdist``) or the machine has one core."""
    cores = min(os.cpu_count() or 1, 4)
    chose = any(a == "-n" or a.startswith(("-n", "--numprocesses", "--dist")) or a == "no:xdist" for a in rest)
    return [] if chose or cores < 2 else ["-n", str(cores), "--dist", "loadfile", "--no-loadscope-reorder"]


def main(argv: list[str]) -> int:
    if not argv or argv[0] not in {"lab", "slides", "test", "run"}:
        print(__doc__)
        return 2
    command, rest = argv[0], argv[1:]
    py = ensure_env()
    os.chdir(ROOT)
    # Idle OpenMP threads sleep instead of spinning: on a busy 2-core machine spinning threads
    # slow training several times over. Results are unchanged.
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    if command == "lab":
        write_lab_settings(VENV)
        args = lab_command(py, rest)
    elif command == "slides":
        args = [str(py), "tools/slides.py", *rest]
    elif command == "test":
        args = [str(py), "-m", "pytest", *parallel(rest), *rest]
    else:
        args = [str(py), "tools/notebooks.py", "run", *rest]
    return subprocess.call(args, env=course_env(py))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
