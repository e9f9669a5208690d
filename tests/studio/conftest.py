"""A real ``langgraph dev`` (what LangGraph Studio talks to), one per test module, offline and headless."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from langgraph_sdk import get_sync_client
from langgraph_sdk.client import SyncLangGraphClient

from phasegraph.nodes.emit import EVENT_KEY
from phasegraph.nodes.events import Event, parse_event
from tests.processes import START_SECONDS, Process, answers, free_port, running

ROOT = Path(__file__).parents[2]
CONFIG = json.loads((ROOT / "langgraph.json").read_text(encoding="utf-8"))
#: `make test` builds this venv (langgraph-cli[inmem] cannot share one with the dev tools).
LANGGRAPH = ROOT / ".venv-studio" / "bin" / "langgraph"
#: More events than any scripted run here produces: a stream that gets this far is not ending.
MAX_EVENTS = 2_000
OFFLINE = {
    "LANGGRAPH_CLI_NO_ANALYTICS": "1",
    "LANGSMITH_TRACING": "false",
    "LANGCHAIN_TRACING_V2": "false",
    "LANGSMITH_API_KEY": "",
}


def _config_in(folder: Path) -> Path:
    """The project's langgraph.json with its dependency made absolute, so the server can run in
    ``folder`` (its in-memory state goes there, not into the work tree) without file persistence.
    The graphs are module targets (``phasegraph.graphs.<protocol>:graph``): they need no path."""
    config = {**CONFIG, "dependencies": [str(ROOT)], "disable_persistence": True}
    path = folder / "langgraph.json"
    path.write_text(json.dumps(config), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def studio(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """Start ``langgraph dev`` (no browser, no reload, loopback, no telemetry); stop it after the module."""
    if not LANGGRAPH.exists():
        # CI always has it (`make test` builds it); a bare `pytest` on a laptop may not.
        message = f"{LANGGRAPH} is missing: run `make test` (or `make studio`) to build .venv-studio"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    with langgraph_dev(tmp_path_factory.mktemp("langgraph-dev"), dict(os.environ)) as url:
        yield url


@contextmanager
def langgraph_dev(folder: Path, env: dict[str, str]) -> Iterator[str]:
    """``langgraph dev`` started in ``folder`` with ``env`` (offline), stopped at the end: its URL."""
    port = free_port()
    command = [
        *(str(LANGGRAPH), "dev", "--no-browser", "--no-reload", "--host", "127.0.0.1", "--port", str(port)),
        *("--config", str(_config_in(folder))),
    ]
    url = f"http://127.0.0.1:{port}"
    process = Process(command, folder / "server.log", env={**env, **OFFLINE}, cwd=folder)
    with running(process, answers(f"{url}/ok")):
        yield url


@pytest.fixture
def client(studio: str) -> Iterator[SyncLangGraphClient]:
    """A langgraph-sdk client on the module's server, as Studio uses the API."""
    sdk = get_sync_client(url=studio, timeout=START_SECONDS)
    yield sdk
    sdk.http.client.close()


def stream_events(
    client: SyncLangGraphClient, thread_id: str, graph_id: str, graph_input: Any, **options: Any
) -> tuple[list[Event], list[dict[str, Any]]]:
    """Run one segment with ``stream_mode="custom"``: our events, and the API's ``error`` parts.

    With ``stream_subgraphs=True`` a subgraph's events come as ``custom|<node>:<task id>``; they are ours too.
    """
    events: list[Event] = []
    errors: list[dict[str, Any]] = []
    for part in client.runs.stream(thread_id, graph_id, input=graph_input, stream_mode="custom", **options):
        if part.event.split("|", 1)[0] == "custom" and EVENT_KEY in part.data:
            events.append(parse_event(part.data[EVENT_KEY]))
            assert len(events) < MAX_EVENTS, "the run does not end"
        elif part.event == "error":
            errors.append(part.data)
    return events, errors
