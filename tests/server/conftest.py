"""Real server processes on loopback ports, and an SSE reader that parses frames back into events."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from uuid import uuid4

import httpx
import pytest

from phasegraph.nodes.events import Event, parse_event
from phasegraph.nodes.models import DEMO_WORKSPACE
from tests.helpers import turn
from tests.processes import Process, answers, free_port

PHASEGRAPH = str(Path(sys.executable).parent / "phasegraph")
#: Tests that need Postgres skip on a laptop without it; CI always sets the URL.
needs_postgres = pytest.mark.skipif(
    not os.environ.get("PHASEGRAPH_TEST_POSTGRES_URL"), reason="PHASEGRAPH_TEST_POSTGRES_URL unset"
)


@dataclass
class Server:
    """One ``phasegraph serve`` process."""

    env: dict[str, str]
    port: int = field(default_factory=free_port)
    log: Path | None = None
    cwd: Path | None = None
    running: Process | None = field(default=None, repr=False)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def process(self) -> subprocess.Popen[bytes] | None:
        """The server's process (``returncode`` set once it ended)."""
        return self.running.popen if self.running is not None else None

    def start(self) -> Server:
        assert self.log is not None
        command = [PHASEGRAPH, "serve", "--port", str(self.port)]
        self.running = Process(command, self.log, env=self.env, cwd=self.cwd)
        self.running.start(answers(f"{self.url}/healthz"))
        return self

    def children(self, marker: bytes) -> list[int]:
        """This server's live child processes whose command line holds ``marker`` (read from /proc)."""
        assert self.process is not None
        found = []
        for stat in Path("/proc").glob("[0-9]*/stat"):
            try:
                pid, parent = int(stat.parent.name), int(stat.read_text().rpartition(")")[2].split()[1])
                command = (stat.parent / "cmdline").read_bytes()
            except (OSError, ValueError):
                continue  # gone meanwhile
            if parent == self.process.pid and marker in command:
                found.append(pid)
        return found

    def kill(self) -> None:
        """SIGKILL: no shutdown hooks run."""
        if self.running is not None:
            self.running.kill()

    def stop(self) -> None:
        if self.running is not None:
            self.running.stop()


def slow_script(directory: Path, delay_ms: int = 40) -> str:
    """A three-turn script (two tools, then an answer) paced so a test can act mid-run."""
    path = directory / "slow.json"
    turns = [
        {"content": "Let me look.", "tool_calls": [{"name": "list_files", "args": {"path": "docs"}}]},
        {
            "content": "Reading it.",
            "tool_calls": [{"name": "read_file", "args": {"path": "docs/roadmap.md"}}],
        },
        {"content": "The roadmap has two milestones."},
    ]
    path.write_text(json.dumps({"turns": turns, "chunk_delay_ms": delay_ms}), encoding="utf-8")
    return f"scripted:{path}"


@pytest.fixture
def servers(tmp_path: Path) -> Iterator[Any]:
    """Start servers with ``servers(**env)``; all are stopped at the end of the test."""
    started: list[Server] = []

    def start(**env: str) -> Server:
        base = {
            "PHASEGRAPH_CHECKPOINTER": f"sqlite:{tmp_path / 'state.db'}",
            "PHASEGRAPH_WORKSPACE": str(DEMO_WORKSPACE),
            "PHASEGRAPH_TWO_STAGE_ENABLED": "true",
        }
        server = Server(env={**base, **env}, log=tmp_path / f"server-{len(started)}.log")
        started.append(server)
        return server.start()

    yield start
    for server in started:
        server.stop()


@pytest.fixture(scope="session")
def shared_servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """Servers the session's tests share, one per distinct settings (``shared_servers(**env)``), each started
    at its first use and stopped when the session ends.

    For tests that only start runs and read them through public routes: every earlier test's requests,
    threads and projects are in its database too, so such a test names its own with ``unique(...)``. A
    test that kills, restarts or signals a server, or counts what a whole server holds, starts its own
    (``servers``).
    """
    started: dict[tuple[tuple[str, str], ...], Server] = {}

    def start(**env: str) -> Server:
        key = tuple(sorted(env.items()))
        if key not in started:
            folder = tmp_path_factory.mktemp("shared-server")
            base = {
                "PHASEGRAPH_CHECKPOINTER": f"sqlite:{folder / 'state.db'}",
                "PHASEGRAPH_WORKSPACE": str(DEMO_WORKSPACE),
                "PHASEGRAPH_TWO_STAGE_ENABLED": "true",
            }
            started[key] = Server(env={**base, **env}, log=folder / "server.log").start()
        server = started[key]
        assert server.running is not None and server.running.running(), (
            f"a shared server died (tests must not stop one):\n{server.running and server.running.output()}"
        )
        return server

    yield start
    for server in started.values():
        server.stop()


#: The session's server with bearer tokens (alpha-secret reaches projA, beta-secret projB, root-secret
#: every project) and CORS for two origins: test_api's, test_networks_api's, test_hostile_input's and
#: test_cors's tests share it (``shared_servers(**GUARDED)``).
TOKENS = "alpha-secret:projA;beta-secret:projB;root-secret:*"
CORS_ORIGINS = "http://localhost:5173, https://studio.example.com"
GUARDED = {"PHASEGRAPH_API_TOKENS": TOKENS, "PHASEGRAPH_CORS_ORIGINS": CORS_ORIGINS}
#: Words the ``words`` script streams.
WORDS = 20


def scripts(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """The scripts a test may pick per request (``"model"``), by name, as model specs.

    Written once per test process into one folder, so every test allowing them
    (``shared_servers(**allowing_scripts(...))``) shares one server. ``slow``: two tools and an answer,
    paced so a test can act mid-run; ``other``: one answer; ``words``: ``WORDS`` words 30 ms apart and
    no tool; ``loop``: lists the docs again and again.
    """
    folder = tmp_path_factory.getbasetemp() / "scripts"
    if not folder.exists():
        folder.mkdir()
        slow_script(folder)
        contents = {
            "other": {"turns": [{"content": "From the other model."}]},
            "words": {
                "turns": [{"content": " ".join(f"word{i}" for i in range(WORDS))}],
                "repeat_last": True,
                "chunk_delay_ms": 30,
            },
            "loop": {"turns": [turn("", ("list_files", {"path": "docs"}))], "repeat_last": True},
        }
        for name, script in contents.items():
            (folder / f"{name}.json").write_text(json.dumps(script), encoding="utf-8")
    return {name: f"scripted:{folder / name}.json" for name in ("slow", "other", "words", "loop")}


def allowing_scripts(tmp_path_factory: pytest.TempPathFactory, **env: str) -> dict[str, str]:
    """The settings of a server whose requests may pick any of ``scripts``."""
    return {"PHASEGRAPH_ALLOWED_MODELS": ",".join(scripts(tmp_path_factory).values()), **env}


def unique(prefix: str) -> str:
    """An id no other test uses (requests, threads and projects on a shared server)."""
    return f"{prefix}-{uuid4().hex[:10]}"


def read_sse(
    response: httpx.Response, stop_after: str | None = None, on_event: Any = None
) -> list[tuple[str, str, Event]]:
    """Parse SSE frames into (event field, id field, parsed event); stop early after a type."""
    frames: list[tuple[str, str, Event]] = []
    fields: dict[str, str] = {}
    for line in response.iter_lines():
        if line == "":
            if "data" in fields:
                frames.append((fields.get("event", ""), fields.get("id", ""), parse_event(fields["data"])))
                if on_event is not None:
                    on_event(frames[-1][2])
                if stop_after and frames[-1][2].type == stop_after:
                    return frames
            fields = {}
        elif not line.startswith(":"):
            name, _, value = line.partition(":")
            fields[name] = value.removeprefix(" ")
    return frames


def stream(
    client: httpx.Client,
    method: str,
    url: str,
    stop_after: str | None = None,
    on_event: Any = None,
    **kwargs: Any,
) -> list[Event]:
    """Open an SSE route and return its events (all of them, or up to ``stop_after``)."""
    with client.stream(method, url, timeout=60, **kwargs) as response:
        assert response.status_code == 200, response.read()
        frames = read_sse(response, stop_after, on_event)
    for event_name, event_id, event in frames:
        assert event_name == event.type and event_id == str(event.seq)
    return [event for _, _, event in frames]


@contextmanager
def demo_server(tmp_path_factory: pytest.TempPathFactory, name: str, **env: str) -> Iterator[Server]:
    """One server on the demo workspace with a database of its own, shared by a test module's tests."""
    folder = tmp_path_factory.mktemp(name)
    base = {
        "PHASEGRAPH_CHECKPOINTER": f"sqlite:{folder / 'state.db'}",
        "PHASEGRAPH_WORKSPACE": str(DEMO_WORKSPACE),
    }
    started = Server(env={**base, **env}, log=folder / "server.log").start()
    try:
        yield started
    finally:
        started.stop()
