"""``make`` finds a Python 3.11 or newer by itself, says what it needs when there is none, and installs
only what a target needs.

Each case runs the real Makefile in an empty folder whose ``PATH`` holds only what the case names.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
import tomllib
from pathlib import Path

MAKEFILE = Path(__file__).parents[1] / "Makefile"
MAKE = shutil.which("make") or "/usr/bin/make"


def _make(folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
    (folder / "pyproject.toml").touch()
    return subprocess.run(
        [MAKE, "-f", str(MAKEFILE), *args],
        cwd=folder,
        env={"PATH": str(folder / "bin"), "HOME": str(folder)},
        capture_output=True,
        text=True,
        timeout=60,
    )


def _path_with(folder: Path, **commands: str) -> None:
    (folder / "bin").mkdir()
    for name, target in commands.items():
        (folder / "bin" / name).symlink_to(target)


def test_python3_is_used_when_there_is_no_python3_11(tmp_path: Path) -> None:
    assert sys.version_info >= (3, 11)
    _path_with(tmp_path, python3=os.path.realpath(sys.executable))
    done = _make(tmp_path, "--dry-run", "demo")
    assert done.returncode == 0, done.stderr
    assert "python3 -m venv .venv" in done.stdout.splitlines()


def test_without_a_python_it_says_what_it_needs(tmp_path: Path) -> None:
    _path_with(tmp_path)
    done = _make(tmp_path, "demo")
    assert done.returncode == 2
    assert "phasegraph needs Python 3.11 or newer" in done.stderr
    assert "make PYTHON=/path/to/python3.12 demo" in done.stderr
    assert not (tmp_path / ".venv").exists()


def test_a_named_python_that_is_not_one_is_refused(tmp_path: Path) -> None:
    _path_with(tmp_path)
    done = _make(tmp_path, "demo", "PYTHON=/nowhere/python3.12")
    assert done.returncode == 2
    assert "PYTHON=/nowhere/python3.12 is" in done.stderr
    assert not (tmp_path / ".venv").exists()


def test_a_built_environment_is_not_installed_again(tmp_path: Path) -> None:
    # As `make test` leaves it: the bench extra installed last, which rewrote bin/phasegraph after the dev
    # extra's stamp. A second `make test` installs nothing (it used to install both extras every time).
    _path_with(tmp_path, python3=os.path.realpath(sys.executable))
    made = [".venv/.base", ".venv/.dev", ".venv/.bench", ".venv-studio/bin/langgraph",
            "tests/js/package-lock.json", "tests/js/node_modules/.ci", ".venv/bin/phasegraph"]  # fmt: skip
    later = time.time() + 100  # after pyproject.toml, which _make touches
    for step, name in enumerate(made):  # each newer than the one before
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.touch()
        os.utime(path, (later + step, later + step))
    done = _make(tmp_path, "--dry-run", "test")
    assert done.returncode == 0, done.stderr
    assert not [line for line in done.stdout.splitlines() if "install" in line], done.stdout


def test_make_notebooks_installs_jupyterlab_and_opens_the_notebooks_folder(tmp_path: Path) -> None:
    # Only a dry run: the real target starts JupyterLab, which runs until it is stopped.
    _path_with(tmp_path, python3=os.path.realpath(sys.executable), id=shutil.which("id") or "/usr/bin/id")
    done = _make(tmp_path, "--dry-run", "notebooks")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert ".venv/bin/pip install -qq -e '.[notebooks]'" in lines
    assert not [line for line in lines if "[dev]" in line or "[bench]" in line]  # JupyterLab only
    opened = ".venv/bin/jupyter lab notebooks/"
    assert lines[-1] == (f"{opened} --allow-root" if os.geteuid() == 0 else opened)
    project = tomllib.loads(MAKEFILE.with_name("pyproject.toml").read_text("utf-8"))["project"]
    assert [r for r in project["optional-dependencies"]["notebooks"] if r.startswith("jupyterlab>=")]
