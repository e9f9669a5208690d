"""Shared fixtures: a private workspace, a run collector with its own traces, a fresh Postgres database,
phasegraph's spans and metrics read back in process."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from uuid import uuid4

import psycopg
import pytest
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from phasegraph.graphs.run import RunResult, run
from phasegraph.nodes import telemetry
from phasegraph.nodes.models import DEMO_WORKSPACE
from phasegraph.nodes.redact import redactor
from phasegraph.nodes.settings import provider_settings, run_settings
from phasegraph.nodes.trace import MemoryTraceStore

#: Servers the tests start run one process (``phasegraph serve`` runs one worker per CPU by default), so that
#: a test's SIGKILL stops every process that drives its runs; tests/server/test_workers.py runs several.
os.environ.setdefault("PHASEGRAPH_WORKERS", "1")

#: The key 'openai:' specs use against the fake provider (tests check it never leaks).
PROVIDER_KEY = "sk-test-SECRET-0123456789abcdef"


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


@pytest.fixture
def provider_env(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """Point 'openai:' specs at a (fake) provider for one test; cached settings re-read before and after."""

    def configure(base_url: str, **env: str) -> None:
        monkeypatch.setenv("OPENAI_API_KEY", PROVIDER_KEY)
        monkeypatch.setenv("OPENAI_BASE_URL", base_url)
        for name, value in env.items():
            monkeypatch.setenv(name, value)
        _clear_settings()

    yield configure
    monkeypatch.undo()
    _clear_settings()


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    """phasegraph's spans, kept in memory for the test (back to the global tracer provider after)."""
    exporter = InMemorySpanExporter()
    telemetry.use_exporter(exporter)
    yield exporter
    telemetry.use_exporter(None)


@pytest.fixture
def reader() -> Iterator[InMemoryMetricReader]:
    """phasegraph's metrics, readable in memory (a fresh meter provider, and another after)."""
    reader = InMemoryMetricReader()
    telemetry.use_metric_reader(reader)
    yield reader
    telemetry.use_metric_reader()


def _clear_settings() -> None:
    provider_settings.cache_clear()
    run_settings.cache_clear()
    redactor.cache_clear()


@pytest.fixture
def fresh_postgres() -> Iterator[str]:
    """A new, empty Postgres database on the test server (``PHASEGRAPH_TEST_POSTGRES_URL``), dropped after."""
    base = os.environ.get("PHASEGRAPH_TEST_POSTGRES_URL")
    if not base:
        pytest.skip("PHASEGRAPH_TEST_POSTGRES_URL unset")
    name = f"phasegraph_test_{uuid4().hex[:12]}"
    with psycopg.connect(base, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    try:
        yield base.rsplit("/", 1)[0] + f"/{name}"
    finally:
        with psycopg.connect(base, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Stop the Chromium the browser tests shared (tests/browser.py), if this process launched one."""
    from tests.browser import close_browser

    close_browser()
