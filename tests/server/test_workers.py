"""``phasegraph serve --workers N``: worker processes on one port, any of them answering any request.

Each request goes over a connection of its own, so the kernel hands it to whichever worker accepts
first: a run started on one worker is followed, replayed from ``Last-Event-ID``, paused, resumed and
cancelled from whichever worker the next connection reaches (the runs' owners in the store show that
both workers drove runs). A worker killed mid-run is replaced by the supervisor and its run is taken
over by a sibling; a supervisor killed with SIGKILL takes its workers with it.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from pathlib import Path
from uuid import uuid4

import httpx
import pytest
import sqlalchemy as sa

from phasegraph.nodes.events import Event
from phasegraph.server.cli.serving import usable_cpus
from phasegraph.server.runs.socket_wakeups import wake_folder
from tests.server.conftest import PHASEGRAPH, Server, needs_postgres, slow_script, stream

RUN = "/api/runs/triggered_phase/stream"
#: Runs started before the test gives up waiting for both workers to drive some.
MAX_STARTS = 16


def _workers(server: Server) -> list[int]:
    """The pids of the server's worker processes (children started by multiprocessing's spawn)."""
    return server.children(b"spawn_main")


def _all_started(server: Server, count: int = 2) -> Server:
    """``server`` once ``count`` workers finished starting (it answers as soon as the first one has)."""
    assert server.log is not None
    deadline = time.monotonic() + 90
    while server.log.read_text().count("Application startup complete.") < count:
        assert time.monotonic() < deadline, server.log.read_text()
        time.sleep(0.2)
    return server


def _start(
    server: Server, request_id: str, stop_after: str = "phase_start", model: str | None = None
) -> list[Event]:
    """Start a run on a connection of its own and hang up after its first ``stop_after`` (the run goes on)."""
    body = {"message": "Summarise the roadmap", "requestId": request_id, "onDisconnect": "continue"}
    if model is not None:
        body["model"] = model
    with httpx.Client(base_url=server.url) as client:
        return stream(client, "POST", RUN, stop_after=stop_after, json=body)


def _call(server: Server, method: str, path: str, **kwargs) -> httpx.Response:
    with httpx.Client(base_url=server.url, timeout=60) as client:
        return client.request(method, path, **kwargs)


def _follow(server: Server, request_id: str, after: int | None = None, stop_after: str | None = None):
    headers = {} if after is None else {"Last-Event-ID": str(after)}
    with httpx.Client(base_url=server.url) as client:
        return stream(client, "GET", f"/api/requests/{request_id}/stream", stop_after, headers=headers)


def _owners(database: str, request_ids: list[str]) -> dict[str, str]:
    """Each request's owner as the store has it (``host:pid:id`` of the worker that drove it last)."""
    engine = sa.create_engine(database.replace("sqlite:", "sqlite:///", 1) if database.startswith("sqlite:")
                              else database.replace("postgresql://", "postgresql+psycopg://", 1))  # fmt: skip
    try:
        with engine.connect() as conn:
            rows = conn.execute(
                sa.text(
                    "SELECT request_id, owner FROM phasegraph_requests WHERE request_id IN :ids"
                ).bindparams(sa.bindparam("ids", expanding=True)),
                {"ids": request_ids},
            )
            return {row.request_id: row.owner for row in rows}
    finally:
        engine.dispose()


def _pid(owner: str) -> int:
    return int(owner.split(":")[1])


def _seqs(events: list[Event]) -> list[int]:
    return [event.seq for event in events]


def _database(tmp_path: Path, kind: str) -> str:
    return (
        f"sqlite:{tmp_path / 'workers.db'}"
        if kind == "sqlite"
        else os.environ["PHASEGRAPH_TEST_POSTGRES_URL"]
    )


@pytest.mark.parametrize("kind", ["sqlite", pytest.param("postgres", marks=needs_postgres)])
def test_any_worker_follows_replays_pauses_resumes_and_cancels_a_run_another_worker_drives(
    servers, tmp_path: Path, kind: str
):
    database = _database(tmp_path, kind)
    (tmp_path / "slower").mkdir()
    slower = slow_script(tmp_path / "slower", delay_ms=250)  # the runs paused and cancelled
    server = _all_started(servers(PHASEGRAPH_WORKERS="2", PHASEGRAPH_CHECKPOINTER=database,
                                  PHASEGRAPH_MODEL=slow_script(tmp_path, delay_ms=80),
                                  PHASEGRAPH_ALLOWED_MODELS=slower))  # fmt: skip
    workers = _workers(server)
    assert len(workers) == 2
    if kind == "sqlite":  # each worker listens for the others' commits on a socket of its own
        assert sorted(int(p.name.split("-")[0]) for p in wake_folder(Path(database[7:])).iterdir()) == sorted(
            workers
        )

    tag = uuid4().hex[:8]
    followed: list[str] = []
    while len(followed) < MAX_STARTS:
        followed.append(f"w-{tag}-{len(followed)}")
        assert _start(server, followed[-1])[0].seq == 1
        drivers = {_pid(owner) for owner in _owners(database, followed).values()}
        if len(followed) >= 3 and drivers == set(workers):
            break
    assert drivers == set(workers), "every run went to one worker"

    # Two runs paused and one cancelled, each asked right after its start on a connection of its own (the
    # slower script keeps them going meanwhile: a pause goes to the run's next pause point, so a run that
    # had finished first would end with its answer, and a finished one cannot be cancelled).
    paused, cancelled = [f"p-{tag}-0", f"p-{tag}-1"], f"c-{tag}"
    for request_id in paused:
        assert _start(server, request_id, model=slower)[0].seq == 1
        assert _call(server, "POST", f"/api/requests/{request_id}/pause").status_code == 202
    assert _start(server, cancelled, model=slower)[0].seq == 1
    assert _call(server, "POST", f"/api/requests/{cancelled}/cancel").status_code == 200
    ids = [*followed, *paused, cancelled]

    for request_id in followed:  # the rest of each run, from its second event, on any worker
        rest = _follow(server, request_id, after=1)
        assert rest[-1].type == "final" and _seqs(rest) == list(range(2, rest[-1].seq + 1))
    for request_id in paused:
        head = _follow(server, request_id)
        assert head[-1].type == "paused" and _seqs(head) == list(range(1, head[-1].seq + 1)), head[-3:]
        with httpx.Client(base_url=server.url) as client:
            resumed = stream(client, "POST", f"/api/requests/{request_id}/resume", json={})
        assert resumed[-1].type == "final" and _seqs(resumed)[0] == head[-1].seq + 1
    ended = _follow(server, cancelled)
    assert ended[-1].type == "cancelled" and _seqs(ended) == list(range(1, ended[-1].seq + 1)), ended[-3:]

    for request_id in ids:  # the whole log, once more, from wherever: no gap, no repeat
        events = _follow(server, request_id)
        assert _seqs(events) == list(range(1, len(events) + 1))
        status = _call(server, "GET", f"/api/requests/{request_id}").json()["status"]
        assert status == ("cancelled" if request_id == cancelled else "completed")


def test_a_killed_worker_is_replaced_and_its_run_taken_over_by_its_sibling(servers, tmp_path: Path):
    database = _database(tmp_path, "sqlite")
    server = _all_started(servers(PHASEGRAPH_WORKERS="2", PHASEGRAPH_CHECKPOINTER=database,
                                  PHASEGRAPH_MODEL=slow_script(tmp_path, delay_ms=150)))  # fmt: skip
    workers = _workers(server)
    request_id = f"k-{uuid4().hex[:8]}"
    # past its first tool: the phase after it starts only once the tool's results are saved, so the run
    # has a point to go on from (killed before any, it would end with an error instead, as documented)
    first = _start(server, request_id, stop_after="tool_result")
    first += _follow(server, request_id, after=first[-1].seq, stop_after="phase_start")
    victim = _pid(_owners(database, [request_id])[request_id])
    os.kill(victim, signal.SIGKILL)

    deadline = time.monotonic() + 60  # the supervisor starts a new worker; the sibling takes the run over
    while time.monotonic() < deadline:
        replaced = set(_workers(server))
        if len(replaced) == 2 and victim not in replaced:
            break
        time.sleep(0.2)
    assert len(replaced) == 2 and victim not in replaced and set(workers) - {victim} <= replaced
    rest = _follow(server, request_id, after=first[-1].seq)
    assert rest[-1].type == "paused" and rest[-1].reason == "crashed"
    with httpx.Client(base_url=server.url) as client:
        resumed = stream(client, "POST", f"/api/requests/{request_id}/resume", json={})
    assert resumed[-1].type == "final"
    events = _follow(server, request_id)
    assert _seqs(events) == list(range(1, len(events) + 1))
    assert _pid(_owners(database, [request_id])[request_id]) in replaced


def test_workers_stop_with_their_supervisor_even_when_it_is_killed(servers, tmp_path: Path):
    server = _all_started(
        servers(PHASEGRAPH_WORKERS="2", PHASEGRAPH_CHECKPOINTER=_database(tmp_path, "sqlite"))
    )
    workers = _workers(server)
    assert len(workers) == 2
    server.kill()
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and any(Path(f"/proc/{pid}").exists() for pid in workers):
            time.sleep(0.2)
        assert not any(Path(f"/proc/{pid}").exists() for pid in workers), "a worker outlived its supervisor"
        with pytest.raises(httpx.ConnectError):  # nobody serves the port any more
            httpx.get(f"{server.url}/healthz", timeout=2)
    finally:  # never leave a worker behind, even when the test fails
        for pid in workers:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def test_the_default_is_a_worker_per_cpu_and_memory_refuses_more_than_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.delenv("PHASEGRAPH_WORKERS")

    def serve(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
        command = [PHASEGRAPH, "serve", *args]
        return subprocess.run(command, env={**os.environ, **env}, capture_output=True, text=True, timeout=60,
                              cwd=tmp_path)  # fmt: skip

    refused = serve("--workers", "2", PHASEGRAPH_CHECKPOINTER="memory")
    assert refused.returncode == 2
    assert "2 workers cannot share the memory checkpointer" in refused.stderr
    bad = serve(PHASEGRAPH_WORKERS="0")
    assert bad.returncode == 2 and "workers" in bad.stderr
    missing = tmp_path / "missing"  # checked once, in the supervisor, not by workers restarted forever
    refused = serve("--workers", "2", PHASEGRAPH_WORKSPACE=str(missing))
    assert refused.returncode == 2 and f"{str(missing)!r} is not a folder" in refused.stderr
    database = tmp_path / "default.db"
    server = Server(env={"PHASEGRAPH_CHECKPOINTER": f"sqlite:{database}"}, log=tmp_path / "server.log")
    try:
        cpus = usable_cpus()
        _all_started(server.start(), cpus)
        assert len(_workers(server)) == (cpus if cpus > 1 else 0)  # one worker is the supervisor itself
    finally:
        server.stop()
