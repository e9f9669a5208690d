"""The built wheel installs one name, ``phasegraph``, with every module and data file of the tree.

The wheel is built from this checkout by pip (with build isolation, as a user's ``pip install .``
builds it) and installed with ``--no-deps`` into a fresh venv whose dependencies come from the
test venv's site-packages as a plain path: the editable install of the work tree is not visible there.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import sysconfig
import venv
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]
LAYERS = ("graphs", "nodes", "tools", "server")


#: What a build must not see: venvs, caches, and an earlier build's ``build/lib`` (stale modules in it
#: would be packed into the wheel as if they were still in the tree).
NOT_SOURCE = shutil.ignore_patterns(".git", ".venv*", "build", "dist", "site", "*.egg-info", "__pycache__",
                                    "node_modules", ".*cache")  # fmt: skip


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The work tree as a checkout has it."""
    source = tmp_path_factory.mktemp("source") / "phasegraph"
    shutil.copytree(ROOT, source, symlinks=True, ignore=NOT_SOURCE)
    return source


def _wheel_of(target: Path, out: Path) -> Path:
    """Build the wheel of ``target`` in ``out``; what the build printed is kept beside it (``build.log``)."""
    done = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--wheel-dir", str(out), str(target)],
        check=True,
        capture_output=True,
        text=True,
        timeout=300,
    )
    (out / "build.log").write_text(done.stdout + done.stderr, encoding="utf-8")
    (built,) = out.glob("phasegraph-*.whl")
    return built


@pytest.fixture(scope="module")
def wheel(source: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel ``pip install .`` builds, straight from the tree."""
    return _wheel_of(source, tmp_path_factory.mktemp("wheel"))


@pytest.fixture(scope="module")
def wheel_from_sdist(source: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel ``python -m build`` makes (and an index serves): built from the sdist, not the tree."""
    out = tmp_path_factory.mktemp("sdist")
    subprocess.run(
        [sys.executable, "-m", "build", "--sdist", "--outdir", str(out), str(source)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    (sdist,) = out.glob("phasegraph-*.tar.gz")
    return _wheel_of(sdist, tmp_path_factory.mktemp("wheel-from-sdist"))


@pytest.fixture(scope="module")
def installed(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh venv with the wheel installed; returns its python."""
    home = tmp_path_factory.mktemp("venv")
    venv.EnvBuilder(with_pip=True).create(home)
    python = home / "bin" / "python"
    subprocess.run(
        [python, "-m", "pip", "install", "--quiet", "--no-deps", "--no-index", str(wheel)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    site = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    # the dependencies, as a path only: the test venv's own .pth files (its editable finder) do not run
    (Path(site) / "dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n", encoding="utf-8")
    return python


def _python(python: Path, code: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([python, "-c", code], cwd=cwd, capture_output=True, text=True, timeout=120)


def test_the_wheel_has_one_top_level_name(wheel: Path):
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        top_level = next(n for n in names if n.endswith(".dist-info/top_level.txt"))
        assert archive.read(top_level).decode().split() == ["phasegraph"]
    assert {name.split("/")[0] for name in names} == {
        "phasegraph",
        f"{wheel.name.split('-py3')[0]}.dist-info",
    }


@pytest.mark.parametrize("built", ["wheel", "wheel_from_sdist"])
def test_the_build_prints_no_packaging_warning(built: str, request: pytest.FixtureRequest):
    """Every data folder is declared: setuptools warns of none left to its package-data globs."""
    wheel: Path = request.getfixturevalue(built)
    log = (wheel.parent / "build.log").read_text(encoding="utf-8")
    assert "absent from the `packages` configuration" not in log
    assert "BuildBackendWarning" not in log, log


@pytest.mark.parametrize("built", ["wheel", "wheel_from_sdist"])
def test_the_wheel_has_every_file_of_the_tree(built: str, request: pytest.FixtureRequest):
    """Modules and the data they read (demo scripts, templates, static pages, migrations)."""
    wheel: Path = request.getfixturevalue(built)
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
    tree = {
        "phasegraph/" + path.relative_to(ROOT).as_posix()
        for layer in LAYERS
        for path in (ROOT / layer).rglob("*")
        if path.is_file() and "__pycache__" not in path.parts
    }
    assert len([name for name in tree if not name.endswith(".py")]) > 40
    assert tree - names == set()
    assert "phasegraph/__init__.py" in names
    packed = {name for name in names if name.startswith("phasegraph/") and name != "phasegraph/__init__.py"}
    assert packed - tree == set(), "the wheel has files the tree does not (a stale build?)"


def test_import_phasegraph_gives_the_public_api(installed: Path, tmp_path: Path):
    shown = _python(
        installed,
        "import phasegraph; print(phasegraph.__file__, phasegraph.run, phasegraph.protocols)",
        tmp_path,
    )
    assert shown.returncode == 0, shown.stderr
    location, *rest = shown.stdout.split(" ", 1)
    assert str(ROOT) not in location, "the wheel's copy is imported, not the work tree"
    assert "<function run" in rest[0]
    assert "'triggered_phase'" in rest[0]


@pytest.mark.parametrize("name", LAYERS)
def test_no_generic_name_is_importable(installed: Path, tmp_path: Path, name: str):
    found = _python(installed, f"import {name}", tmp_path)
    assert found.returncode != 0
    assert f"No module named '{name}'" in found.stderr


def test_a_run_works_from_the_installed_wheel(installed: Path, tmp_path: Path):
    code = (
        "import asyncio, phasegraph\n"
        "message = 'Summarise the roadmap in the docs folder.'\n"
        "result = asyncio.run(phasegraph.run('triggered_phase', message))\n"
        "print(type(result.final).__name__, result.final.answer[:40])\n"
    )
    ran = _python(installed, code, tmp_path)
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.startswith("Final ")


def test_the_command_is_installed(installed: Path, tmp_path: Path):
    command = installed.parent / "phasegraph"
    listed = subprocess.run([command, "protocols"], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert listed.returncode == 0, listed.stderr
    assert "xml_contract" in listed.stdout
