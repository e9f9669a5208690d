"""Execute every notebook in notebooks/ top to bottom; any failing cell fails the test."""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

REPO_ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((REPO_ROOT / "notebooks").glob("*.ipynb"))


def test_there_are_notebooks_to_run():
    assert NOTEBOOKS, f"no notebooks found in {REPO_ROOT / 'notebooks'}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_notebook_executes_without_errors(path: Path):
    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(
        nb, timeout=120, kernel_name="python3", resources={"metadata": {"path": str(REPO_ROOT)}}
    )
    client.execute()  # raises CellExecutionError on the first failing cell
