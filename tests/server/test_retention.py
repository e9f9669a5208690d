"""Checkpoint retention on a live server: 200 runs under keep_latest=5, paused requests resumed to
their final answer, and ``phasegraph prune`` (the real command) shrinking the sqlite file."""

from __future__ import annotations

import json
import os
import re
import sqlite3
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from phasegraph.nodes.events import Event, Final, Paused, Resumed
from phasegraph.nodes.models import DEMO_WORKSPACE
from phasegraph.nodes.settings import ServerSettings
from phasegraph.server.app import create_app
from phasegraph.server.cli.main import app
from tests.server.conftest import PHASEGRAPH, slow_script, stream

KEEP = 5
THREADS, TURNS = 40, 5  # 200 runs
HELD = 3  # threads whose last request is paused
ROUTE = "/api/runs/triggered_phase/stream"


def _body(thread: str, request: str, **extra: Any) -> dict[str, Any]:
    return {
        "message": "Summarise the roadmap",
        "projectId": "p",
        "threadId": thread,
        "requestId": request,
        **extra,
    }


def _counts(database: Path) -> dict[tuple[str, str], int]:
    """Checkpoints per (thread, namespace), read straight from the file."""
    with sqlite3.connect(f"file:{database}?mode=ro", uri=True) as db:
        rows = db.execute(
            "SELECT thread_id, checkpoint_ns, count(*) FROM checkpoints GROUP BY 1, 2"
        ).fetchall()
    return {(thread, ns): n for thread, ns, n in rows}


def _size(database: Path) -> int:
    return sum(p.stat().st_size for p in (database, Path(f"{database}-wal")) if p.exists())


def _converse(url: str, thread: str) -> list[Event]:
    """``TURNS`` runs on one thread, one after the other; the last run's events."""
    with httpx.Client(base_url=url) as client:
        for turn in range(TURNS):
            events = stream(client, "POST", ROUTE, json=_body(thread, f"{thread}-{turn}"))
            assert isinstance(events[-1], Final), events[-1]
    return events


def _pause_after_first_tool(client: httpx.Client, thread: str, request: str, model: str) -> list[Event]:
    def pause_at_first_call(event: Event) -> None:
        if event.type == "tool_call":
            assert client.post(f"/api/requests/{request}/pause").status_code == 202

    body = _body(thread, request, model=model)
    events = stream(client, "POST", ROUTE, json=body, on_event=pause_at_first_call)
    assert isinstance(events[-1], Paused) and events[-1].reason == "requested"
    return events


def _resume_to_final(client: httpx.Client, request: str, before: list[Event]) -> None:
    rest = stream(client, "POST", f"/api/requests/{request}/resume", json={})
    assert isinstance(rest[0], Resumed) and not rest[0].fork and isinstance(rest[-1], Final)
    assert rest[-1].answer == "The roadmap has two milestones."
    events = before + rest
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    assert [e.name for e in events if e.type == "tool_call"] == ["list_files", "read_file"]  # none twice


def _environment(database: Path) -> dict[str, str]:
    return {"PHASEGRAPH_CHECKPOINTER": f"sqlite:{database}", "PHASEGRAPH_RETENTION": f"keep_latest={KEEP}"}


def _prune(database: Path, *args: str) -> str:
    """The real command, in a process of its own."""
    env = {**os.environ, **_environment(database)}
    done = subprocess.run([PHASEGRAPH, "prune", *args], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout


def _dry_run(database: Path, *args: str) -> str:
    """The same command in this process (no second start-up to wait for)."""
    done = CliRunner().invoke(app, ["prune", "--dry-run", *args], env=_environment(database))
    assert done.exit_code == 0, done.output
    return done.stdout


def _figure(output: str, label: str) -> int:
    found = re.search(rf"{re.escape(label)}\s*│\s*(\d+)", output)
    assert found, output
    return int(found[1])


def test_keep_latest_bounds_every_thread_while_paused_requests_still_finish(servers, tmp_path: Path):
    database = tmp_path / "state.db"
    slow = slow_script(tmp_path, delay_ms=5)  # two tools, then the answer: paused after the first
    answer = tmp_path / "answer.json"  # the 200 runs: one answer each, no tool (5 checkpoints a run)
    answer.write_text(json.dumps({"turns": [{"content": "Done."}]}), encoding="utf-8")
    env = {"PHASEGRAPH_RETENTION": f"keep_latest={KEEP}", "PHASEGRAPH_RETENTION_INTERVAL_SECONDS": "0.3"}
    server = servers(**env, PHASEGRAPH_MODEL=f"scripted:{answer}", PHASEGRAPH_ALLOWED_MODELS=slow)
    held: dict[str, list[Event]] = {}
    with httpx.Client(base_url=server.url) as client:
        # Each held thread has two finished turns, then a request paused right after its first tool.
        for i in range(HELD):
            for turn in range(2):
                stream(client, "POST", ROUTE, json=_body(f"held-{i}", f"held-{i}-{turn}"))
            held[f"held-{i}-2"] = _pause_after_first_tool(client, f"held-{i}", f"held-{i}-2", slow)
        with ThreadPoolExecutor(8) as pool:
            last = list(pool.map(lambda t: _converse(server.url, f"chat-{t}"), range(THREADS)))
        assert len(last) == THREADS

        # Rounds every 0.3 s prune meanwhile; once the runs stop, every namespace is down to KEEP.
        _wait_until(lambda: max(_counts(database).values()) <= KEEP)
        counts = _counts(database)
        assert {t for t, _ in counts} == {f"p/chat-{t}" for t in range(THREADS)} | {
            f"p/held-{i}" for i in range(HELD)
        }
        log = (tmp_path / "server-0.log").read_text()
        removed = [
            int(n)
            for n in re.findall(r"checkpoint retention \(keep_latest=5\) removed (\d+) checkpoints", log)
        ]
        assert sum(removed) >= THREADS * TURNS  # each run saves several checkpoints; most went

        # What is left is each thread's newest state: its conversation goes on.
        values = _latest_values(client, "chat-0")
        assert [m["kwargs"]["type"] for m in values["messages"]] == ["human", "ai"] * TURNS
        assert isinstance(stream(client, "POST", ROUTE, json=_body("chat-0", "chat-0-more"))[-1], Final)

        # Paused requests resume from their newest checkpoint to their final answer.
        for request in ("held-0-2", "held-1-2"):
            assert client.get(f"/api/requests/{request}").json()["status"] == "paused"
            _resume_to_final(client, request, held.pop(request))
        # Once pruned again, an earlier phase whose checkpoint is gone cannot be resumed from: a clear
        # refusal, not a crash.
        _wait_until(lambda: _counts(database)[("p/held-0", "")] <= KEEP)
        phases = {c["phaseIndex"] for c in client.get("/api/threads/held-0/checkpoints").json()}
        assert 1 not in phases and 5 in phases
        refused = client.post("/api/requests/held-0-2/resume", json={"resumeFromPhaseIndex": 1})
        assert refused.status_code == 404 and "phase 1" in refused.json()["message"]
        assert client.get("/healthz").status_code == 200
    server.stop()

    # The command: a dry run changes nothing; a run removes, VACUUMs, and the file shrinks.
    before, size = _counts(database), _size(database)
    dry = _dry_run(database, "--keep-latest", "1")
    assert "Retention keep_latest=1 on" in dry and "would remove" in dry  # the flag overrides the variable
    assert _counts(database) == before
    would = _figure(dry, "checkpoints")
    assert {ns for _, ns in before} == {""} and would == sum(n - 1 for n in before.values())
    done = _prune(database, "--keep-latest", "1")
    after = _counts(database)
    assert _figure(done, "checkpoints") == would == sum(before.values()) - sum(after.values()) > 0
    assert set(after.values()) == {1} and _size(database) < size
    assert _figure(done, "file after VACUUM") == _size(database) < _figure(done, "file before")

    # The last paused request still resumes, on the pruned file (an app in this process this time).
    settings = ServerSettings(checkpointer=f"sqlite:{database}", workspace=str(DEMO_WORKSPACE))
    with TestClient(create_app(settings)) as client:
        _resume_to_final(client, "held-2-2", held["held-2-2"])


def _latest_values(client: httpx.Client, thread: str) -> dict[str, Any]:
    page = client.get(f"/api/threads/{thread}/checkpoints").json()
    assert 1 <= len(page) <= KEEP
    newest = page[-1]["checkpointId"]
    values: dict[str, Any] = client.get(f"/api/threads/{thread}/checkpoints/{newest}").json()["values"]
    return values


def _wait_until(condition: Any, seconds: float = 30) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "retention never caught up"
        time.sleep(0.1)


def _rows(database: Path) -> dict[str, int]:
    """Rows of the request store's tables, read straight from the file."""
    tables = ("phasegraph_requests", "phasegraph_events", "phasegraph_traces", "phasegraph_threads")
    with sqlite3.connect(f"file:{database}?mode=ro", uri=True) as db:
        return {t: db.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in tables}


def test_under_a_ttl_many_short_requests_leave_nothing_behind(servers, tmp_path: Path):
    # Each request on a thread of its own, as clients that never name a thread send them: before,
    # their checkpoints went under the ttl but requests, event logs and traces stayed forever.
    database = tmp_path / "state.db"
    env = {"PHASEGRAPH_RETENTION": "ttl=1s", "PHASEGRAPH_RETENTION_INTERVAL_SECONDS": "0.3"}
    server = servers(**env)
    with httpx.Client(base_url=server.url) as client:
        for i in range(10):
            events = stream(
                client, "POST", ROUTE, json={"message": "Summarise the roadmap", "requestId": f"r{i}"}
            )
            assert isinstance(events[-1], Final)
        assert client.post("/threads", json={"thread_id": "made-not-run"}).status_code == 200
        _wait_until(lambda: _rows(database) == dict.fromkeys(_rows(database), 0) and not _counts(database))
        assert client.get("/api/requests/r0").status_code == 404
    server.stop()


def test_prune_dry_run_reports_the_request_rows_an_expiry_takes(servers, tmp_path: Path):
    database = tmp_path / "state.db"
    server = servers()
    with httpx.Client(base_url=server.url) as client:
        for i in range(3):
            stream(client, "POST", ROUTE, json={"message": "Summarise the roadmap", "requestId": f"r{i}"})
    server.stop()
    rows = _rows(database)
    _wait_until(
        lambda: "threads expired by the ttl │ 3" in " ".join(_dry_run(database, "--ttl", "1s").split())
    )
    dry = _dry_run(database, "--ttl", "1s")
    assert _figure(dry, "requests of expired threads") == 3 and _rows(database) == rows
    assert _figure(dry, "their events") == rows["phasegraph_events"] > 0
    assert _figure(dry, "their trace entries") == rows["phasegraph_traces"] > 0
    done = _prune(database, "--ttl", "1s")
    assert (
        _figure(done, "requests of expired threads") == 3
        and _figure(done, "their events") == rows["phasegraph_events"]
    )
    assert _rows(database) == dict.fromkeys(rows, 0)
