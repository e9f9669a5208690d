"""Real server processes on loopback ports, and an SSE reader that parses frames back into events."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from phasegraph.nodes.events import Event, parse_event
from phasegraph.nodes.models import DEMO_WORKSPACE

PHASEGRAPH = str(Path(sys.executable).parent / "phasegraph")
#: How long a starting server may take to answer /healthz (its imports alone take 10 s on a busy machine).
START_SECONDS = 90
#: Tests that need Postgres skip on a laptop without it; CI always sets the URL.
needs_postgres = pytest.mark.skipif(
    not os.environ.get("PHASEGRAPH_TEST_POSTGRES_URL"), reason="PHASEGRAPH_TEST_POSTGRES_URL unset"
)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class Server:
    """One ``phasegraph serve`` process."""

    env: dict[str, str]
    port: int = field(default_factory=free_port)
    process: subprocess.Popen[bytes] | None = None
    log: Path | None = None
    cwd: Path | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> Server:
        assert self.log is not None
        env = {**os.environ, **self.env}
        with self.log.open("ab") as log:
            self.process = subprocess.Popen(
                [PHASEGRAPH, "serve", "--port", str(self.port)],
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=self.cwd,
            )
        deadline = time.monotonic() + START_SECONDS
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"server exited early:\n{self.log.read_text()}")
            try:
                if httpx.get(f"{self.url}/healthz", timeout=1).status_code == 200:
                    return self
            except httpx.HTTPError:
                time.sleep(0.1)
        self.process.kill()  # never left running behind a failed start
        self.process.wait()
        raise RuntimeError(f"server did not come up in {START_SECONDS} s:\n{self.log.read_text()}")

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
        if self.process and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(10)

    def stop(self) -> None:
        if self.process and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.kill()


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
