"""A server killed mid-run: its runs are taken over, followers end cleanly, re-runs say what they replace."""

import sqlite3
from pathlib import Path

import httpx
import pytest

from phasegraph.nodes.events import Event, Paused, Resumed
from tests.server.conftest import Server, read_sse, slow_script, stream

RUN = "/api/runs/triggered_phase/stream"


def _kill_mid_phase(server: Server, request_id: str) -> list[Event]:
    """Start a run and SIGKILL its server while the second action phase streams text."""
    seen: list[Event] = []
    body = {"message": "Summarise the roadmap", "requestId": request_id}
    with (
        httpx.Client(base_url=server.url) as client,
        client.stream("POST", RUN, json=body, timeout=60) as response,
    ):

        def on_event(event: Event) -> None:
            seen.append(event)
            tool_done = any(e.type == "tool_result" for e in seen)
            if tool_done and event.type == "text":
                server.kill()

        with pytest.raises(httpx.HTTPError):  # the connection dies with the server
            read_sse(response, on_event=on_event)
    assert server.process is not None and server.process.returncode is not None
    return seen


def _kept(events: list[Event]) -> list[Event]:
    """What a client shows after dropping the attempts that ``resumed`` events say were replaced."""
    kept: list[Event] = []
    for event in events:
        if isinstance(event, Resumed) and event.replaces_from_seq is not None:
            kept = [e for e in kept if e.seq < event.replaces_from_seq or e.graph_step is None]
        kept.append(event)
    return kept


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    return {
        "PHASEGRAPH_MODEL": slow_script(tmp_path, delay_ms=60),
        "PHASEGRAPH_CHECKPOINTER": f"sqlite:{tmp_path / 'crash.db'}",
        **extra,
    }


def test_a_restarted_server_pauses_the_crashed_run_and_resumes_it_without_repeats(servers, tmp_path: Path):
    env = _env(tmp_path)
    before = _kill_mid_phase(servers(**env), "req-crash")
    interrupted = [e for e in before if e.type == "phase_start"][-1]
    assert interrupted.phase == "action_phase" and before[-1].phase_index == interrupted.phase_index

    restarted = servers(**env)
    with httpx.Client(base_url=restarted.url) as client:
        # Taken over at start-up: nobody has to wait for a heartbeat to go stale.
        assert client.get("/api/requests/req-crash").json()["status"] == "paused"
        replay = stream(client, "GET", "/api/requests/req-crash/stream")
        assert isinstance(replay[-1], Paused) and replay[-1].reason == "crashed"
        assert [e.seq for e in replay] == list(range(1, len(replay) + 1))
        refused = client.post("/api/requests/req-crash/pause")
        assert refused.status_code == 409 and "paused" in refused.json()["message"]

        after = stream(client, "POST", "/api/requests/req-crash/resume", json={})
        trace = client.get("/api/requests/req-crash/trace").json()
    resumed = after[0]
    assert isinstance(resumed, Resumed) and resumed.reason == "crashed"
    assert resumed.replaces_from_seq == interrupted.seq  # the interrupted phase is dropped whole
    events = replay + after
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    kept = _kept(events)
    starts = [(e.phase, e.phase_index) for e in kept if e.type == "phase_start"]
    assert len(starts) == len(set(starts)), starts  # no phase shown twice
    assert kept[-1].type == "final" and "two milestones" in kept[-1].answer
    assert [t["details"]["name"] for t in trace if t["type"] == "tool_call"] == ["list_files", "read_file"]


def test_on_orphan_resume_continues_the_run_for_its_followers(servers, tmp_path: Path):
    env = _env(tmp_path, PHASEGRAPH_ON_ORPHAN="resume")
    before = _kill_mid_phase(servers(**env), "req-auto")
    restarted = servers(**env)
    with httpx.Client(base_url=restarted.url) as client:
        followed = stream(client, "GET", "/api/requests/req-auto/stream")
        assert client.get("/api/requests/req-auto").json()["status"] == "completed"
    resumed = [e for e in followed if isinstance(e, Resumed)]
    assert len(resumed) == 1 and resumed[0].reason == "crashed"
    assert resumed[0].replaces_from_seq is not None and resumed[0].replaces_from_seq <= before[-1].seq
    assert not [e for e in followed if isinstance(e, Paused)]
    kept = _kept(followed)
    starts = [(e.phase, e.phase_index) for e in kept if e.type == "phase_start"]
    assert len(starts) == len(set(starts)) and kept[-1].type == "final"


def test_a_run_killed_while_paused_is_left_paused(servers, tmp_path: Path):
    """Only running requests are orphans: a paused one keeps its state and gets no extra event."""
    env = _env(tmp_path)
    first = servers(**env)
    with httpx.Client(base_url=first.url) as client:

        def pause_at_first_tool(event: Event) -> None:
            if event.type == "tool_call":
                assert client.post("/api/requests/req-p/pause").status_code == 202

        events = stream(client, "POST", RUN, json={"message": "Hi", "requestId": "req-p"},
                        on_event=pause_at_first_tool)  # fmt: skip
    assert isinstance(events[-1], Paused) and events[-1].reason == "requested"
    first.kill()
    with httpx.Client(base_url=servers(**env).url) as client:
        replay = stream(client, "GET", "/api/requests/req-p/stream")
    assert [e.seq for e in replay] == [e.seq for e in events]


def test_a_driver_whose_run_was_taken_over_stops_without_a_word(servers, tmp_path: Path):
    """A replica that only looked dead (its heartbeat went stale) must not go on driving a run
    another replica took over: it stops silently and the new owner's events are the only ones."""
    env = _env(tmp_path)
    server = servers(**env)
    body = {"message": "Summarise", "requestId": "req-stale"}

    def look_dead(event: Event) -> None:
        if event.type == "tool_call":
            with sqlite3.connect(tmp_path / "crash.db") as db:
                db.execute(
                    "UPDATE phasegraph_requests SET owner = 'elsewhere:1:gone', heartbeat_at = 0 "
                    "WHERE request_id = 'req-stale'"
                )

    with httpx.Client(base_url=server.url) as client:
        events = stream(client, "POST", RUN, json=body, on_event=look_dead)
        assert isinstance(events[-1], Paused) and events[-1].reason == "crashed"
        assert not [e for e in events if e.type in ("cancelled", "final", "error")]
        after = stream(client, "POST", "/api/requests/req-stale/resume", json={})
        assert after[-1].type == "final"
        log = stream(client, "GET", "/api/requests/req-stale/stream")
        trace = client.get("/api/requests/req-stale/trace").json()
    assert [e.seq for e in log] == list(range(1, len(log) + 1))
    assert [e.type for e in log].count("final") == 1  # one driver: the old one stopped
    assert [t["details"]["name"] for t in trace if t["type"] == "tool_call"] == ["list_files", "read_file"]
    assert server.log is not None
    log_text = server.log.read_text()
    assert "another replica took it over; stopped here" in log_text and "Traceback" not in log_text


def _lose_the_newest_checkpoint(database: Path, request_id: str) -> None:
    """Make the thread look as a crash leaves it when a step's writes were saved but the checkpoint after
    them was still queued (durability ``async`` saves it while the next step runs): drop the newest one."""
    with sqlite3.connect(database) as db:
        [(thread, newest)] = db.execute(
            "SELECT thread_id, max(checkpoint_id) FROM checkpoints WHERE thread_id LIKE ? GROUP BY thread_id",
            (f"%/{request_id}",),
        ).fetchall()
        db.execute("DELETE FROM writes WHERE thread_id = ? AND checkpoint_id = ?", (thread, newest))
        db.execute("DELETE FROM checkpoints WHERE thread_id = ? AND checkpoint_id = ?", (thread, newest))


def test_a_run_whose_last_steps_writes_were_saved_without_their_checkpoint_is_paused_and_resumes(
    servers, tmp_path: Path
):
    env = _env(tmp_path)
    before = _kill_mid_phase(servers(**env), "req-writes")
    _lose_the_newest_checkpoint(tmp_path / "crash.db", "req-writes")

    restarted = servers(**env)
    with httpx.Client(base_url=restarted.url) as client:
        state = client.get("/threads/req-writes/state").json()
        assert state["next"] == [] and state["tasks"], state  # LangGraph shows nothing next, yet a task wrote
        assert client.get("/api/requests/req-writes").json()["status"] == "paused"
        replay = stream(client, "GET", "/api/requests/req-writes/stream")
        assert isinstance(replay[-1], Paused) and replay[-1].reason == "crashed", replay[-2:]
        after = stream(client, "POST", "/api/requests/req-writes/resume", json={})
    events = replay + after
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    kept = _kept(events)
    assert kept[-1].type == "final" and "two milestones" in kept[-1].answer
    tools = [(e.name, e.call_id) for e in kept if e.type == "tool_result"]
    assert len(tools) == len(set(tools)) and len(before) > 0  # no finished call shown twice


def _lose_the_checkpoints_after(database: Path, thread_key_end: str, kept: str | None) -> None:
    """Make the thread look as a crash leaves it when the turn's first checkpoint was still queued: drop every
    checkpoint after ``kept`` (every one when ``None``)."""
    with sqlite3.connect(database) as db:
        where, args = "thread_id LIKE ? AND checkpoint_id > ?", (f"%/{thread_key_end}", kept or "")
        db.execute(f"DELETE FROM writes WHERE {where}", args)
        db.execute(f"DELETE FROM checkpoints WHERE {where}", args)


def _newest_checkpoint(database: Path, thread_key_end: str) -> str:
    with sqlite3.connect(database) as db:
        [(newest,)] = db.execute(
            "SELECT max(checkpoint_id) FROM checkpoints WHERE thread_id LIKE ?", (f"%/{thread_key_end}",)
        ).fetchall()
    return newest


@pytest.mark.parametrize("turn", ["first", "second"])
def test_a_turn_killed_before_it_saved_anything_is_paused_and_resumes_from_its_message(
    servers, tmp_path: Path, turn: str
):
    env = _env(tmp_path)
    database, thread, request_id = tmp_path / "crash.db", f"t-{turn}", f"req-unsaved-{turn}"
    first = servers(**env)
    kept = None
    if turn == "second":  # a thread with a finished turn: the killed turn's is the next
        with httpx.Client(base_url=first.url) as client:
            body = {"message": "Summarise the roadmap", "threadId": thread}
            assert stream(client, "POST", RUN, json=body)[-1].type == "final"
        kept = _newest_checkpoint(database, thread)
    body = {"message": "Summarise the roadmap", "requestId": request_id, "threadId": thread}
    with (
        httpx.Client(base_url=first.url) as client,
        client.stream("POST", RUN, json=body, timeout=60) as response,
        pytest.raises(httpx.HTTPError),
    ):  # killed at the turn's first text
        read_sse(response, on_event=lambda event: event.type == "text" and first.kill())
    _lose_the_checkpoints_after(database, thread, kept)

    restarted = servers(**env)
    with httpx.Client(base_url=restarted.url) as client:
        assert client.get(f"/api/requests/{request_id}").json()["status"] == "paused"  # not failed
        replay = stream(client, "GET", f"/api/requests/{request_id}/stream")
        assert isinstance(replay[-1], Paused) and replay[-1].reason == "crashed", replay[-2:]
        after = stream(client, "POST", f"/api/requests/{request_id}/resume", json={})
        messages = client.get(f"/threads/{thread}/state").json()["values"]["messages"]
    events = replay + after
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    resumed = after[0]
    assert (
        isinstance(resumed, Resumed) and resumed.reason == "crashed" and resumed.replaces_from_seq is not None
    )
    kept_events = _kept(events)
    assert kept_events[-1].type == "final" and "two milestones" in kept_events[-1].answer
    assert [e.type for e in kept_events].count("phase_start") == [e.type for e in after].count("phase_start")
    humans = [m["content"] for m in messages if m["type"] == "human"]
    assert humans == ["Summarise the roadmap"] * (2 if turn == "second" else 1)  # the turn's message, once


def test_a_finished_turn_is_never_run_again_by_a_resume(servers, tmp_path: Path):
    """A turn whose thread went on in a later turn looks, from the thread, like one that saved nothing."""
    server = servers(**_env(tmp_path))
    with httpx.Client(base_url=server.url) as client:
        for request_id in ("done-1", "done-2"):
            body = {"message": "Summarise the roadmap", "requestId": request_id, "threadId": "t-done"}
            assert stream(client, "POST", RUN, json=body)[-1].type == "final"
        refused = client.post("/api/requests/done-1/resume", json={})
        assert refused.status_code == 409, refused.text
        messages = client.get("/threads/t-done/state").json()["values"]["messages"]
        assert [m["type"] for m in messages].count("human") == 2  # nothing ran again
        assert client.get("/api/requests/done-1").json()["status"] == "completed"
