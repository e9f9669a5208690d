"""A hundred runs at once on two workers, one worker killed mid-way: every run ends well, nothing lost.

Each run calls the Python tool ``log_key``, which appends the call's idempotency key to a ledger every
time it runs, then answers. Once the runs are under way, the worker driving the most of them is killed
(SIGKILL). Its sibling takes its runs over (paused, reason ``crashed``); each is resumed to ``final``.
Then, for every request: its events have one gapless ``seq`` (none lost, none twice), it ended ``final``,
and a call whose ``tool_result`` the log shows before the crash (its result was saved first) ran once.
"""

from __future__ import annotations

import contextlib
import os
import signal
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from uuid import uuid4

import httpx
import sqlalchemy as sa

from phasegraph.nodes.events import Event, Paused
from tests.server.conftest import Server, stream
from tests.server.pausing import wait_for, wait_until_not_running
from tests.server.test_workers import _all_started, _pid, _workers
from tests.tool_projects import write_project, write_script

ROOT = Path(__file__).resolve().parents[2]
RUNS = 100
#: Runs under way in the killed worker before the kill, at least.
IN_FLIGHT = 10
#: Runs past their call before the kill, at least: runs started early are in their last step by then.
PAST_THE_CALL = 25


def _env(tmp_path: Path, ledger: Path) -> dict[str, str]:
    words = " ".join(f"w{n}" for n in range(12))
    call = {"name": "log_key", "args": {"path": str(ledger)}}
    script = write_script(
        tmp_path,
        [{"content": f"Logging. {words}", "tool_calls": [call]}, {"content": f"Done. {words}"}],
        chunk_delay_ms=60,  # slow enough that most runs are under way at the kill
    )
    project = write_project(tmp_path, {"python_tools": {"log_key": "tests.user_tools:log_key"}})
    return {
        "PHASEGRAPH_WORKERS": "2",
        "PHASEGRAPH_CHECKPOINTER": f"sqlite:{tmp_path / 'load.db'}",
        "PHASEGRAPH_MODEL": f"scripted:{script}",
        "PHASEGRAPH_CONFIG": str(project),
        "PYTHONPATH": str(ROOT),  # the servers import tests.user_tools
    }


def _running(database: str) -> Counter[int]:
    """How many running requests each worker drives (by pid), as the store has it."""
    engine = sa.create_engine(database.replace("sqlite:", "sqlite:///", 1))
    try:
        with engine.connect() as conn:
            rows = conn.execute(sa.text("SELECT owner FROM phasegraph_requests WHERE status = 'running'"))
            return Counter(_pid(row.owner) for row in rows if row.owner)
    finally:
        engine.dispose()


def _under_way(database: str, ledger: Path) -> bool:
    """Many runs are past their call, and a worker drives enough runs (some before, some after theirs)."""
    running = _running(database)
    past = len(ledger.read_text(encoding="utf-8").splitlines())
    return past >= PAST_THE_CALL and bool(running) and running.most_common(1)[0][1] >= IN_FLIGHT


def _start(server: Server, request_id: str) -> None:
    """Start a run on a connection of its own and hang up after its first event (the run goes on).

    A start that reaches the worker as it is killed may fail: its client is told (no run, or the run
    goes on and is checked like the others).
    """
    body = {"message": "Log it.", "projectId": "load", "requestId": request_id, "onDisconnect": "continue"}
    with httpx.Client(base_url=server.url, timeout=60) as client, contextlib.suppress(httpx.HTTPError):
        stream(client, "POST", "/api/runs/unified/stream", stop_after="phase_start", json=body)


def _finish(server: Server, request_id: str) -> list[Event] | None:
    """Wait until the request stops; resume it if its driver died; all its events (``None``: never made)."""
    with httpx.Client(base_url=server.url, timeout=60) as client:
        if client.get(f"/api/requests/{request_id}?projectId=load").status_code == 404:
            return None  # its start reached the killed worker before the request was made: its client knows
        if wait_until_not_running(client, request_id) == "paused":
            resumed = stream(client, "POST", f"/api/requests/{request_id}/resume", json={})
            assert resumed[-1].type == "final", resumed[-1]
        return stream(client, "GET", f"/api/requests/{request_id}/stream")


def _saved_before_the_crash(events: list[Event]) -> list[str]:
    """Call ids whose result the log shows before the run's crash pause (all of them if it had none)."""
    crash = next((e.seq for e in events if isinstance(e, Paused) and e.reason == "crashed"), None)
    return [e.call_id for e in events if e.type == "tool_result" and (crash is None or e.seq < crash)]


def test_a_worker_killed_under_a_hundred_runs_loses_nothing_and_reruns_no_saved_call(servers, tmp_path: Path):
    ledger = tmp_path / "ledger.txt"
    ledger.touch()
    env = _env(tmp_path, ledger)
    server = _all_started(servers(**env))
    database = env["PHASEGRAPH_CHECKPOINTER"]
    ids = [f"load-{n}-{uuid4().hex[:6]}" for n in range(RUNS)]
    with ThreadPoolExecutor(16) as pool:
        starts = [pool.submit(_start, server, request_id) for request_id in ids]
        wait_for(lambda: _under_way(database, ledger), "no worker ever drove enough runs past their call")
        killed = _running(database).most_common(1)[0][0]  # the worker driving the most runs
        assert killed in _workers(server)
        os.kill(killed, signal.SIGKILL)
        for start in starts:
            start.result()
        finished = dict(zip(ids, pool.map(lambda request_id: _finish(server, request_id), ids), strict=True))
    logs = {request_id: events for request_id, events in finished.items() if events is not None}
    assert len(logs) >= RUNS - 16, f"only {len(logs)} of {RUNS} runs were made"

    crashed = [
        i
        for i, events in logs.items()
        if any(isinstance(e, Paused) and e.reason == "crashed" for e in events)
    ]
    assert crashed, "the kill interrupted no run"
    ran = Counter(ledger.read_text(encoding="utf-8").splitlines())
    saved = {i: _saved_before_the_crash(logs[i]) for i in crashed}
    assert any(saved.values()), "no interrupted run had a saved call: the check below would check nothing"
    for request_id, events in logs.items():
        assert [e.seq for e in events] == list(range(1, len(events) + 1)), request_id  # none lost or twice
        assert events[-1].type == "final", (request_id, events[-1])
        for call_id in _saved_before_the_crash(events):
            assert ran[f"load/{request_id}/{call_id}"] == 1, (request_id, call_id, "its saved call ran again")
        calls = {e.call_id for e in events if e.type == "tool_call"}
        assert all(ran[f"load/{request_id}/{call_id}"] >= 1 for call_id in calls), request_id
