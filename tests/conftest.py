"""Shared fixtures: a private workspace and a run collector with its own trace store."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from graphs.run import RunResult, run
from nodes.models import DEMO_WORKSPACE
from nodes.trace import MemoryTraceStore


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    """A private copy of the demo workspace."""
    target = tmp_path / "workspace"
    shutil.copytree(DEMO_WORKSPACE, target)
    return target


@pytest.fixture
def collect(workspace: Path):
    """Run a protocol on the workspace with a fresh trace store and return the RunResult."""

    async def _collect(protocol: str, message: str = "Summarise the roadmap", **fields: Any) -> RunResult:
        fields.setdefault("workspace", str(workspace))
        return await run(protocol, message, traces=MemoryTraceStore(), **fields)

    return _collect
