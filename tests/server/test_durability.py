"""Runs survive a killed server and move between replicas on a shared database."""

import os
from pathlib import Path
from uuid import uuid4

import httpx

from tests.server.conftest import needs_postgres, slow_script, stream

TWO_STAGE = "/api/chat/messages_two_stage"


def _pause_after_first_tool(client: httpx.Client, request_id: str):
    def on_event(event):
        if event.type == "tool_call" and event.name == "list_files":
            assert client.post(f"/api/requests/{request_id}/pause").status_code == 202

    return on_event


def _run_until_paused(server, request_id: str) -> list:
    with httpx.Client(base_url=server.url) as client:
        body = {"message": "Summarise the roadmap", "projectId": "p", "requestId": request_id}
        events = stream(
            client, "POST", TWO_STAGE, json=body, on_event=_pause_after_first_tool(client, request_id)
        )
    assert events[-1].type == "paused"
    return events


def _resume(server, request_id: str) -> tuple[list, list]:
    with httpx.Client(base_url=server.url) as client:
        events = stream(client, "POST", f"{TWO_STAGE}/resume", json={"requestId": request_id})
        trace = client.get(f"/api/requests/{request_id}/trace").json()
    return events, trace


def _two_replicas(servers, tmp_path: Path):
    """Two servers on the test Postgres, and a fresh request id (the database is shared)."""
    env = {
        "PHASEGRAPH_MODEL": slow_script(tmp_path),
        "PHASEGRAPH_CHECKPOINTER": os.environ["PHASEGRAPH_TEST_POSTGRES_URL"],
    }
    return servers(**env), servers(**env), f"req-{uuid4().hex}"


def test_sigkill_while_paused_then_restart_and_resume(servers, tmp_path: Path):
    env = {
        "PHASEGRAPH_MODEL": slow_script(tmp_path),
        "PHASEGRAPH_CHECKPOINTER": f"sqlite:{tmp_path / 'kill.db'}",
    }
    first = servers(**env)
    before = _run_until_paused(first, "req-kill")
    first.kill()

    second = servers(**env)
    with httpx.Client(base_url=second.url) as client:
        assert client.get("/api/requests/req-kill").json()["status"] == "paused"
    after, trace = _resume(second, "req-kill")
    events = before + after
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    assert events[-1].type == "final" and "two milestones" in events[-1].answer
    assert not [e for e in after if e.type == "duplicate_tool_call"]  # the script went on from turn 2
    calls = [t["details"]["name"] for t in trace if t["type"] == "tool_call"]
    assert calls == ["list_files", "read_file"]  # list_files ran before the kill and never again
    kinds = {t["type"] for t in trace}
    assert {
        "tool_registration",
        "orchestration_phase_start",
        "orchestration_phase_end",
        "tool_result",
    } <= kinds


@needs_postgres
def test_pause_on_one_replica_and_resume_on_another(servers, tmp_path: Path):
    replica_a, replica_b, request_id = _two_replicas(servers, tmp_path)
    before = _run_until_paused(replica_a, request_id)
    with httpx.Client(base_url=replica_b.url) as client:
        assert client.get(f"/api/requests/{request_id}").json()["status"] == "paused"
        replayed = stream(client, "GET", f"/api/requests/{request_id}/stream")
        assert [e.seq for e in replayed] == [e.seq for e in before]
    after, trace = _resume(replica_b, request_id)
    events = before + after
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    assert events[-1].type == "final"
    assert not [e for e in after if e.type == "duplicate_tool_call"]
    assert [t["details"]["name"] for t in trace if t["type"] == "tool_call"] == ["list_files", "read_file"]


@needs_postgres
def test_cancel_on_another_replica_stops_the_run(servers, tmp_path: Path):
    replica_a, replica_b, request_id = _two_replicas(servers, tmp_path)
    with httpx.Client(base_url=replica_a.url) as client_a, httpx.Client(base_url=replica_b.url) as client_b:

        def cancel_on_b(event):
            if event.type == "tool_call":
                assert client_b.post(f"/api/requests/{request_id}/cancel").status_code == 200

        body = {"message": "Summarise", "projectId": "p", "requestId": request_id}
        events = stream(client_a, "POST", TWO_STAGE, json=body, on_event=cancel_on_b)
        assert events[-1].type == "cancelled"
        assert not [e for e in events if e.type == "final"]
        assert client_b.get(f"/api/requests/{request_id}").json()["status"] == "cancelled"
        refused = client_b.post(f"{TWO_STAGE}/resume", json={"requestId": request_id})
        assert refused.status_code == 409
        # A fork of the cancelled thread is a new request; the cancellation does not carry over to it.
        start = client_b.get(f"/api/threads/{request_id}/checkpoints").json()[1]["checkpointId"]
        forked = stream(client_b, "POST", f"/api/threads/{request_id}/checkpoints/{start}/fork")
        assert forked[-1].type == "final"
