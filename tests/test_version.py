"""The version is written once, as ``__version__`` in the package; the metadata is built from it."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

import minitransformer

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10: pytest's dependency tomli is the same parser
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]


def source_version() -> str:
    text = (ROOT / "src" / "minitransformer" / "__init__.py").read_text(encoding="utf-8")
    found = re.findall(r'^__version__ = "([^"]+)"$', text, flags=re.M)
    assert len(found) == 1, "__init__.py must assign __version__ exactly once, as a string literal"
    return found[0]


def test_pyproject_takes_the_version_from_the_package():
    data = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert "version" not in data["project"], "the version is written in __init__.py, not in pyproject.toml"
    assert "version" in data["project"]["dynamic"]
    assert data["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "minitransformer.__version__"}


def test_imported_version_is_the_one_in_the_source():
    assert minitransformer.__version__ == source_version()
    # a release, or a development version between releases (PEP 440): what the notebooks install follows from it
    assert re.fullmatch(r"\d+\.\d+\.\d+(\.dev\d+)?", minitransformer.__version__)


def release_tuple(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.split(".")[:3])


def test_the_changelog_names_the_release_or_an_older_one_between_releases():
    """A release has its note in CHANGELOG.md (its heading first); a development version comes after the newest
    release the changelog names (1.1.0.dev0 follows 1.0.0)."""
    text = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    releases = re.findall(r"^## (\d+\.\d+\.\d+)\b", text, re.M)
    assert releases, "CHANGELOG.md names no release ('## X.Y.Z' headings, newest first)"
    assert releases == sorted(releases, key=release_tuple, reverse=True), "the changelog lists the newest first"
    version = source_version()
    if ".dev" in version:
        assert release_tuple(version) > release_tuple(releases[0]), (version, releases[0])
    else:
        assert releases[0] == version, f"CHANGELOG.md has no note for {version} at the top"


def test_setuptools_reads_the_package_version(tmp_path):
    # Let setuptools (the build backend) read the project's configuration from a copy of it
    # whose __version__ is changed, to prove the version in the metadata comes from there.
    from setuptools.config.pyprojecttoml import read_configuration

    project = tmp_path / "project"
    (project / "src" / "minitransformer").mkdir(parents=True)
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, project / name)
    init = (ROOT / "src" / "minitransformer" / "__init__.py").read_text(encoding="utf-8")
    bumped = init.replace(f'__version__ = "{source_version()}"', '__version__ = "9.8.7"')
    assert bumped != init
    (project / "src" / "minitransformer" / "__init__.py").write_text(bumped, encoding="utf-8")
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(project)  # setuptools resolves the package directory from the working directory
        config = read_configuration(project / "pyproject.toml")
    assert config["project"]["version"] == "9.8.7"
