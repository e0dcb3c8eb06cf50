"""The install and test entry points agree with each other and with the README."""

from __future__ import annotations

import importlib.metadata
import os
import re
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
from notebook_tool import nbt

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10: pytest's dependency tomli is the same parser
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]


def read(name: str) -> str:
    return (ROOT / name).read_text(encoding="utf-8")


def test_ci_runs_the_readme_test_command():
    readme_commands = re.findall(r"^python course\.py (\w+)", read("README.md"), re.M)
    assert readme_commands.count("lab") == 2 and readme_commands.count("test") == 2  # es + en
    assert re.search(r"^python3? course\.py test\b", read(".ci/run"), re.M)


def test_torch_pinned_in_the_one_lock_everyone_uses():
    constraints = read("constraints.txt").splitlines()
    assert "torch==2.13.0" in constraints
    pins = [l for l in constraints if l and not l.startswith("#")]
    assert all("==" in l for l in pins), [l for l in pins if "==" not in l]
    assert "-c constraints.txt" in read("environment.yml")
    assert re.search(r'"-c",\s*str\(ROOT / "constraints.txt"\)', read("course.py"))
    # The package itself asks for a range, so Colab keeps its preinstalled torch.
    deps = tomllib.loads(read("pyproject.toml"))["project"]["dependencies"]
    torch_dep = next(d for d in deps if d.startswith("torch"))
    assert "==" not in torch_dep


def test_readme_lists_every_notebook_in_both_languages():
    """Each notebook is linked, and its Colab badge opens the latest release's copy, which installs that release."""
    text = read("README.md")
    release = nbt.latest_release()
    for lang in ("es", "en"):
        for nb in sorted((ROOT / "notebooks" / lang).glob("[0-9][0-9]_*.ipynb")):
            rel = nb.relative_to(ROOT).as_posix()
            assert f"]({rel})" in text, f"README.md does not link {rel}"
            assert f"/blob/v{release}/{rel})" in text, f"README.md has no Colab badge for {rel} at v{release}"


def test_warnings_from_our_code_are_errors_and_third_party_ones_are_named():
    with pytest.raises(UserWarning):
        warnings.warn_explicit("ours", UserWarning, "data.py", 1, module="minitransformer.data")
    with pytest.raises(DeprecationWarning):
        warnings.warn("from a test", DeprecationWarning, stacklevel=1)
    ignores = [
        f
        for f in tomllib.loads(read("pyproject.toml"))["tool"]["pytest"]["ini_options"]["filterwarnings"]
        if f.startswith("ignore")
    ]
    assert all(f.split(":")[1] for f in ignores), f"a third-party warning is silenced without naming it: {ignores}"


def test_slow_marker_registered_and_notebook_cells_marked(pytestconfig):
    markers = tomllib.loads(read("pyproject.toml"))["tool"]["pytest"]["ini_options"]["markers"]
    assert any(m.startswith("slow:") for m in markers)
    assert "item.add_marker(pytest.mark.slow)" in read("conftest.py")


def load(name: str, file: str):
    """A module of the repository's top level (course.py, conftest.py), imported from its file."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(name, ROOT / file)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def load_course():
    return load("course", "course.py")


def test_the_install_compiles_the_environment_on_every_core(tmp_path):
    """pip installs without compiling; course.py byte-compiles the environment afterwards, in parallel, so every
    kernel imports from .pyc files even where PYTHONDONTWRITEBYTECODE is set. A file that this Python cannot
    compile is left as it is (as pip does), without failing the install."""
    import sysconfig
    import venv

    course = load_course()
    venv.EnvBuilder(with_pip=False).create(tmp_path / "env")
    py = tmp_path / "env" / ("Scripts/python.exe" if os.name == "nt" else "bin/python")
    site = Path(
        subprocess.run(
            [str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    )
    (site / "good_module.py").write_text("VALUE = 1\n", encoding="utf-8")
    (site / "future_syntax.py").write_text("def f[T(:\n", encoding="utf-8")
    course.compile_environment(py)
    tag = sysconfig.get_config_var("py_version_nodot")
    assert any(p.name.startswith("good_module.") for p in (site / "__pycache__").glob(f"*{tag}*.pyc"))
    assert not any(p.name.startswith("future_syntax.") for p in (site / "__pycache__").iterdir())
    assert '"--no-compile"' in read("course.py")


def test_reading_a_notebook_does_not_compile_a_grammar():
    """jsonschema 4.25 added rfc3987-syntax to its format-nongpl extra (jupyter-events asks for it); importing
    jsonschema then builds that package's grammar with lark, about 3 s in every process that imports nbformat
    (each test worker, the subprocesses the tests start, JupyterLab, the slide builder). constraints.txt keeps
    jsonschema at 4.24, and an environment installed from it imports neither."""
    pins = dict(re.findall(r"^([A-Za-z0-9_.-]+)==([^\s;]+)", read("constraints.txt"), re.M))
    assert tuple(int(part) for part in pins["jsonschema"].split(".")[:2]) < (4, 25)
    assert "rfc3987-syntax" not in pins and "lark" not in pins
    probe = "import sys, nbformat; print(sorted({'lark', 'rfc3987_syntax'} & set(sys.modules)))"
    imported = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    installed = tuple(int(part) for part in importlib.metadata.version("jsonschema").split(".")[:2])
    # here, installed from constraints.txt, neither; an environment with a later jsonschema (the floors check, which
    # pins only pyproject's lower bounds) imports both, which is what the pin avoids
    assert imported == ("[]\n" if installed < (4, 25) else "['lark', 'rfc3987_syntax']\n"), (installed, imported)


def test_the_test_command_runs_files_in_parallel_unless_the_user_chose(monkeypatch):
    course = load_course()
    monkeypatch.setattr(course.os, "cpu_count", lambda: 2)
    # a notebook stays in one worker; the files go out in the collected order (longest first)
    assert course.parallel(["--durations=10"]) == ["-n", "2", "--dist", "loadfile", "--no-loadscope-reorder"]
    monkeypatch.setattr(course.os, "cpu_count", lambda: 64)
    assert course.parallel([]) == ["-n", "4", "--dist", "loadfile", "--no-loadscope-reorder"]
    for chosen in (["-n", "1"], ["-n3"], ["--numprocesses=2"], ["-p", "no:xdist"], ["--dist", "load"]):
        assert course.parallel(chosen) == []
    monkeypatch.setattr(course.os, "cpu_count", lambda: 1)
    assert course.parallel([]) == []
    assert "pytest-xdist" in read("constraints.txt")


def test_the_longest_files_are_handed_out_first_and_each_file_keeps_its_order(monkeypatch):
    """The test run collects the long files first (LONGEST_FIRST), and xdist, with the test command's options,
    hands whole files out in that order: one worker takes the numerics tests (a long file, one test selected)
    before the i18n tests (many: xdist's default hands out the files with the most tests first), and runs
    each file's tests in their order (a notebook's cells share one kernel)."""
    course = load_course()
    monkeypatch.setattr(course.os, "cpu_count", lambda: 2)
    options = course.parallel([])
    options[options.index("-n") + 1] = "1"
    files = ["tests/test_i18n.py", "tests/test_numerics.py"]
    out = subprocess.run(
        [sys.executable, "-m", "pytest", *options, "-v", "-k", "verdict or i18n", *files],
        capture_output=True,
        text=True,
        cwd=ROOT,
    ).stdout
    ran = [line.split(" PASSED ", 1)[1].strip() for line in out.splitlines() if " PASSED " in line]
    assert list(dict.fromkeys(i.split("::")[0] for i in ran)) == [files[1], files[0]], out[-2000:]
    functions = [i.split("::")[1].split("[")[0] for i in ran if i.startswith(files[0])]
    defined = re.findall(r"^def (test_\w+)", read(files[0]), re.M)
    assert len(functions) > 20 and list(dict.fromkeys(functions)) == defined, functions


@pytest.mark.parametrize(
    "args,expected",
    [
        (["tests"], False),
        (["tests/test_i18n.py", "tests/test_numerics.py::test_the_profile_applies_where_a_variable_is_unset"], False),
        (["tests", "notebooks/en/05_decoder_block.ipynb"], True),
        (["notebooks/en"], True),
        (["notebooks/es/05_bloque_decodificador.ipynb::Cell 3"], True),
        (["tests", "notebooks"], True),  # the testpaths: the run with no arguments
        (["."], True),
        (["tests/../notebooks/en"], True),
        (["no/such/path"], True),  # what pytest resolves itself: measured, to be safe
    ],
)
def test_the_verdict_is_measured_only_when_notebooks_may_run(args, expected):
    """With xdist the main process measures the numerics verdict (a fresh process that trains small models) before
    the workers collect; it does so only when the run's paths can hold a notebook."""
    from types import SimpleNamespace

    conftest = load("root_conftest", "conftest.py")
    config = SimpleNamespace(args=args, invocation_params=SimpleNamespace(dir=ROOT))
    assert conftest._may_run_notebooks(config) is expected


def test_the_spanish_notebooks_run_after_everything_else_longest_first():
    """Their English twins train first (tests/twin_training.py): the Spanish copies go at the end, the longest first."""
    from types import SimpleNamespace

    conftest = load("root_conftest", "conftest.py")
    paths = [
        "notebooks/es/00_introduccion.ipynb",
        "notebooks/es/09_de_gpt_a_la_generacion.ipynb",
        "notebooks/en/00_introduction.ipynb",
        "tests/test_i18n.py",
        "notebooks/en/09_from_gpt_to_generation.ipynb",
        "tests/test_slides.py",
    ]
    items = [SimpleNamespace(path=ROOT / p) for p in paths]
    assert [str(i.path.relative_to(ROOT)) for i in sorted(items, key=conftest._rank)] == [
        "tests/test_slides.py",
        "notebooks/en/09_from_gpt_to_generation.ipynb",
        "notebooks/en/00_introduction.ipynb",
        "tests/test_i18n.py",
        "notebooks/es/09_de_gpt_a_la_generacion.ipynb",
        "notebooks/es/00_introduccion.ipynb",
    ]


def test_another_python_makes_the_environment_anew(tmp_path):
    """`python3.13 course.py test` after a 3.11 install must test on 3.13: course.py reads which Python made
    `.venv` (pyvenv.cfg) and makes it anew when another one calls it."""
    course = load_course()
    assert course.venv_version(tmp_path) is None
    (tmp_path / "pyvenv.cfg").write_text("home = /usr/bin\nversion = 3.10.13\n", encoding="utf-8")
    assert course.venv_version(tmp_path) == "3.10"
    (tmp_path / "pyvenv.cfg").write_text("home = /usr/bin\nversion_info = 3.13.0.final.0\n", encoding="utf-8")
    assert course.venv_version(tmp_path) == "3.13"
    assert course.PYTHON == f"{sys.version_info.major}.{sys.version_info.minor}"
    assert course.venv_version(Path(sys.prefix)) in (course.PYTHON, None)


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("as_root", [True, False])
def test_lab_command_allows_root_and_nothing_more(as_root, capsys):
    course = load_course()
    args = course.lab_command(Path("python"), ["--no-browser"], is_root=as_root)
    said = capsys.readouterr().out
    assert ("--allow-root" in args) is as_root
    assert ("Running as root" in said and "Ejecutas como root" in said) is as_root
    assert not any(
        a.startswith(("--ip", "--ServerApp.ip", "--ServerApp.token", "--IdentityProvider.token")) for a in args
    )
    assert course.lab_command(Path("python"), ["--allow-root"], is_root=True).count("--allow-root") == 1


def stand_ins(folder: Path) -> Path:
    """A folder of stand-in ``jupyter`` and ``jupyter-lab`` commands (as another environment's, first on PATH would
    be) that say FAKE and fail."""
    folder.mkdir()
    for name in ("jupyter", "jupyter-lab"):
        script = folder / name
        script.write_text(f"#!/bin/sh\necho FAKE {name} from PATH\nexit 1\n", encoding="utf-8")
        script.chmod(0o755)
        (folder / f"{name}.bat").write_text(f"@echo FAKE {name} from PATH\r\n@exit /b 1\r\n", encoding="utf-8")
    return folder


def with_stand_ins_first(tmp_path: Path) -> dict[str, str]:
    fake = stand_ins(tmp_path / "fakebin")
    assert subprocess.run(
        ["jupyter-lab"],
        capture_output=True,
        text=True,
        env=dict(os.environ, PATH=f"{fake}{os.pathsep}{os.environ['PATH']}"),
        shell=os.name == "nt",
    ).stdout.startswith("FAKE")
    return dict(os.environ, PATH=f"{fake}{os.pathsep}{os.environ['PATH']}")


def test_the_course_environment_comes_first_whatever_is_on_path(tmp_path):
    """Every command course.py starts gets the course environment's scripts folder first on PATH, Jupyter's
    environment paths before the user's, and no PYTHONHOME: the ``python3`` kernel that nbval, nbclient and
    JupyterLab start is the course's Python even where the user's own folder holds another Python's kernel and
    the user's settings prefer it."""
    import json

    course = load_course()
    user = tmp_path / "user-data"
    kernel = user / "kernels" / "python3"
    kernel.mkdir(parents=True)
    other = tmp_path / "other-python"
    spec = {"argv": [str(other), "-m", "ipykernel_launcher", "-f", "{connection_file}"], "language": "python"}
    (kernel / "kernel.json").write_text(json.dumps(spec | {"display_name": "another Python"}), encoding="utf-8")
    outside = with_stand_ins_first(tmp_path) | {
        "JUPYTER_DATA_DIR": str(user),
        "JUPYTER_PREFER_ENV_PATH": "0",  # as where the user does not own the environment (a classroom image)
        "PYTHONHOME": str(tmp_path / "elsewhere"),
    }
    env = course.course_env(Path(sys.executable), outside)
    assert env["PATH"].split(os.pathsep)[0] == str(Path(sys.executable).parent)
    assert env["PATH"].count(str(Path(sys.executable).parent)) == 1 and "PYTHONHOME" not in env
    probe = (
        "import sys; from jupyter_client.manager import KernelManager;"
        "print(KernelManager(kernel_name='python3').format_kernel_cmd()[0] == sys.executable)"
    )
    outside.pop("PYTHONHOME")
    run = lambda e: subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=e).stdout  # noqa: E731
    assert run(outside) == "False\n"  # without the course's environment: the other Python's kernel
    assert run(env) == "True\n"
    # a `jupyter` subcommand a child starts by name is the course's, not the stand-in first on PATH
    jupyter = subprocess.run(["jupyter", "--paths"], capture_output=True, text=True, env=env, shell=os.name == "nt")
    assert "FAKE" not in jupyter.stdout and jupyter.returncode == 0, jupyter.stdout + jupyter.stderr


def test_no_command_of_the_course_looks_jupyter_up_on_path():
    """``python -m jupyter lab`` (``jupyter trust``, ``jupyter nbconvert`` ...) runs the first ``jupyter-lab``
    on PATH, another environment's where one comes first: the course, its tools, its tests and its docs call each
    subcommand by its module (``-m jupyterlab``, ``-m nbformat.sign``) or in-process (nbconvert, nbclient)."""
    tracked = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    in_code = re.compile(r"""["']-m["'],\s*["']jupyter["'],\s*["'][a-z]""")  # python, -m, jupyter, a subcommand
    in_shell = re.compile(  # a command line, or a command in a Markdown code span
        r"(?:^\s*|`)(?:\$ )?(?:\S*python3?(?:\.exe)? )?(?:-m )?jupyter[ -]"
        r"(?:lab|nbconvert|kernelspec|trust|execute|notebook|server)\b",
        re.M,
    )
    found = {}
    for name in tracked:
        pattern = in_code if name.endswith(".py") else in_shell
        if name.endswith((".py", ".md", ".yml", ".toml", ".cfg", ".sh")) or name.startswith(".ci/"):
            hits = pattern.findall((ROOT / name).read_text(encoding="utf-8", errors="replace"))
            if hits:
                found[name] = hits
    assert not found, found


@pytest.mark.slow
def test_lab_opens_the_course_as_whoever_runs_it(tmp_path):
    """`python course.py lab` starts JupyterLab as this user (root in CI, a container or a classroom image):
    it listens on localhost with a login token, and nbclassic's extension (and its banner) stays off. It is the
    course environment's own JupyterLab, with the course's settings, even with another ``jupyter-lab`` and
    ``jupyter`` first on PATH (Anaconda's base, a system JupyterLab, ``pip install --user jupyterlab``)."""
    import json
    import signal
    import time
    import urllib.request

    course = load_course()
    course.write_lab_settings(Path(sys.prefix))
    port = free_port()
    args = course.lab_command(Path(sys.executable), ["--no-browser", f"--port={port}", "--ServerApp.port_retries=0"])
    outside = with_stand_ins_first(tmp_path) | {"JUPYTER_RUNTIME_DIR": str(tmp_path / "runtime")}
    env = course.course_env(Path(sys.executable), outside)
    server = subprocess.Popen(args, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines: list[str] = []
    settings = {}
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            line = server.stdout.readline()
            if not line:
                break
            lines.append(line)
            if "Use Control-C to stop this server" in line:
                break
        token = re.search(r"/lab\?token=(\w+)", "".join(lines))
        if token:  # the settings this server gives JupyterLab and RISE
            for plugin in ("@jupyterlab/apputils-extension:notification", "jupyterlab-rise:plugin"):
                url = f"http://localhost:{port}/lab/api/settings/{plugin}?token={token[1]}"
                schema = {}
                for _attempt in range(60):  # the banner can come a moment before the server answers
                    try:
                        with urllib.request.urlopen(url, timeout=30) as reply:
                            schema = json.load(reply)["schema"]["properties"]  # the overrides are its defaults
                        break
                    except OSError:
                        time.sleep(0.5)
                settings[plugin] = {k: v.get("default") for k, v in schema.items()}
    finally:
        server.send_signal(signal.SIGTERM)
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            server.kill()
    log = "".join(lines)
    assert "FAKE" not in log, log
    assert f"http://localhost:{port}/lab?token=" in log, log
    assert "Notebook 7" not in log and "nbclassic" not in log, log
    assert "Running as root is not recommended" not in log
    for plugin, chosen in course.LAB_SETTINGS.items():
        assert {k: settings[plugin][k] for k in chosen} == chosen, settings


def test_the_first_install_says_what_it_does_and_shows_pip_at_work(tmp_path, monkeypatch, capsys):
    """The first `python course.py lab` installs 2 GB for minutes: it says so, size and time, in both languages, and
    lets pip name each package as it goes (no -q), then says when the environment is ready."""
    course = load_course()
    calls = []
    monkeypatch.setattr(course, "VENV", tmp_path / "env")
    monkeypatch.setattr(course, "STAMP", tmp_path / "env" / ".course-env-stamp")
    monkeypatch.setattr(course, "venv_version", lambda path: course.PYTHON)
    monkeypatch.setattr(course.subprocess, "run", lambda args, **kw: calls.append((args, kw)))
    monkeypatch.setattr(course, "compile_environment", lambda py: calls.append((["compile"], {})))
    course.venv_python().parent.mkdir(parents=True)
    course.venv_python().write_text("", encoding="utf-8")  # an environment made, nothing installed in it yet
    course.ensure_env()
    said = capsys.readouterr().out
    (pip, options), compiled = calls
    assert pip[1:4] == ["-m", "pip", "install"] and "-q" not in pip and "--quiet" not in pip
    assert options["env"]["PATH"].split(os.pathsep)[0] == str(course.venv_python().parent)
    assert compiled[0] == ["compile"]
    for es, en in (("Instalando el curso", "Installing the course"), ("Compilando", "Compiling"), ("listo", "ready")):
        assert es in said and en in said, said
    assert said.count("2 GB") == 2 and said.count("4 minut") == 2, said
    capsys.readouterr()
    course.ensure_env()  # up to date: nothing is installed and nothing said
    assert len(calls) == 2 and capsys.readouterr().out == ""
