"""SIGTERM pauses the runs a server drives at once, even while their clients stream them.

Uvicorn waits for open answers to end before the app's shutdown; an event stream ends only with its
run, so without pausing on the signal itself a server would finish every attached run (or be killed
by its deployment's grace period) instead of pausing it for another replica to resume.
"""

from __future__ import annotations

import signal
import threading
import time
from pathlib import Path
from uuid import uuid4

import httpx
import pytest

from tests.server.conftest import slow_script, stream

TWO_STAGE = "/api/chat/messages_two_stage"
#: How long a signalled server may take to stop: the pause commits at once; no run is waited for.
STOP_SECONDS = 15.0


def _stream_in_background(server, request_id: str, started: threading.Event) -> dict:
    """Stream a new run on ``server`` from a thread; ``started`` is set at its first event."""
    out: dict = {}

    def read() -> None:
        with httpx.Client(base_url=server.url) as client:
            body = {"message": "Summarise the roadmap", "projectId": "p", "requestId": request_id}
            out["events"] = stream(client, "POST", TWO_STAGE, json=body, on_event=lambda _: started.set())

    out["thread"] = threading.Thread(target=read, daemon=True)
    out["thread"].start()
    return out


def _stopped_within(server, seconds: float) -> float:
    """Seconds the server took to exit after SIGTERM (it must, within ``seconds``)."""
    signalled = time.monotonic()
    server.running.signal(signal.SIGTERM)
    server.process.wait(timeout=seconds)
    return time.monotonic() - signalled


@pytest.mark.parametrize("workers", ["1", "2"])  # with 2, uvicorn's supervisor passes SIGTERM on
def test_sigterm_pauses_a_streamed_run_instead_of_finishing_it(servers, tmp_path: Path, workers: str):
    env = {"PHASEGRAPH_MODEL": slow_script(tmp_path, delay_ms=250), "PHASEGRAPH_WORKERS": workers}
    first = servers(**env)
    request_id = f"req-{uuid4().hex}"
    started = threading.Event()
    reader = _stream_in_background(first, request_id, started)
    assert started.wait(30), first.running.output()

    _stopped_within(first, STOP_SECONDS)
    reader["thread"].join(10)
    events = reader["events"]
    assert events[-1].type == "paused", [event.type for event in events]
    assert events[-1].reason == "shutdown"
    assert "final" not in {event.type for event in events}

    second = servers(**env)  # the same database: the paused run resumes to its end
    with httpx.Client(base_url=second.url) as client:
        assert client.get(f"/api/requests/{request_id}").json()["status"] == "paused"
        resumed = stream(client, "POST", f"{TWO_STAGE}/resume", json={"requestId": request_id})
    assert resumed[-1].type == "final"


def test_sigterm_ends_streams_of_runs_another_server_drives(servers, tmp_path: Path):
    env = {"PHASEGRAPH_MODEL": slow_script(tmp_path, delay_ms=250)}
    driver, follower = servers(**env), servers(**env)  # two servers on one sqlite file
    request_id = f"req-{uuid4().hex}"
    started = threading.Event()
    reader = _stream_in_background(driver, request_id, started)
    assert started.wait(30), driver.running.output()

    followed: dict = {}

    def follow() -> None:
        with httpx.Client(base_url=follower.url) as client:
            followed["events"] = stream(client, "GET", f"/api/requests/{request_id}/stream")

    watcher = threading.Thread(target=follow, daemon=True)
    watcher.start()
    time.sleep(1.0)  # the follower's stream is open
    _stopped_within(follower, STOP_SECONDS)
    watcher.join(10)
    assert not watcher.is_alive()
    assert reader["thread"].is_alive(), "the run ended before the follower's server stopped"

    reader["thread"].join(60)  # the run goes on where it is driven
    driven = reader["events"]
    assert driven[-1].type == "final"
    # The follower's stream ended cleanly before the run did, with the run's first events, no stop.
    seen = followed["events"]
    assert seen and seen[-1].type not in {"final", "paused", "error", "cancelled"}
    assert [event.seq for event in seen] == [event.seq for event in driven[: len(seen)]]
    with httpx.Client(base_url=driver.url) as client:
        assert client.get(f"/api/requests/{request_id}").json()["status"] == "completed"
