"""The HTTP API against a real server process; SSE frames are parsed back into the event union."""

from pathlib import Path

import httpx

from phasegraph.nodes.events import Final
from tests.server.conftest import slow_script, stream

TWO_STAGE = "/api/chat/messages_two_stage"


def _body(**extra):
    return {"message": "Summarise the roadmap", "projectId": "proj", **extra}


def test_two_stage_stream_carries_phase_metadata_on_every_event(servers):
    server = servers()
    with httpx.Client(base_url=server.url) as client:
        events = stream(client, "POST", TWO_STAGE, json=_body(requestId="req-meta"))
        assert isinstance(events[-1], Final) and "two milestones" in events[-1].answer
        assert [e.seq for e in events] == list(range(1, len(events) + 1))
        for event in events:
            assert (event.request_id, event.project_id, event.protocol) == (
                "req-meta",
                "proj",
                "triggered_phase",
            )
            assert event.phase is not None and event.phase_index is not None and event.cycle_index is not None
        assert client.get("/api/requests/req-meta").json()["status"] == "completed"
        trace = client.get("/api/requests/req-meta/trace").json()
        raw = [t["details"]["output"] for t in trace if t["type"] == "tool_result"]
        assert raw[0] == "docs/roadmap.md\ndocs/team.md"  # raw outputs live in the trace only
        assert all("output" not in e.to_dict() for e in events if e.type == "tool_result")
        assert {t["requestId"] for t in trace} == {"req-meta"}
        finished = client.post("/api/requests/req-meta/cancel")
        assert finished.status_code == 409 and "already completed" in finished.json()["message"]


def test_fallback_and_generic_routes(servers):
    server = servers()
    with httpx.Client(base_url=server.url) as client:
        unified = stream(client, "POST", "/api/chat/messages", json=_body())
        assert unified[-1].type == "final" and {e.protocol for e in unified} == {"unified"}
        generic = stream(client, "POST", "/api/runs/triggered_phase/stream", json=_body(showToolOutputs=True))
        assert generic[-1].type == "final"
        assert any(e.type == "tool_result" and e.output for e in generic)
        listed = client.get("/api/protocols").json()
        assert {p["id"] for p in listed} == {
            "triggered_phase",
            "unified",
            "goal_pursuit",
            "agent_network",
            "xml_contract",
            "planner",
        }
        assert client.get("/healthz").json() == {"status": "ok"}


def test_flag_off_answers_404_naming_the_fallback(servers):
    server = servers(PHASEGRAPH_TWO_STAGE_ENABLED="false")
    with httpx.Client(base_url=server.url) as client:
        response = client.post(TWO_STAGE, json=_body())
        assert response.status_code == 404
        assert "/api/chat/messages" in response.json()["message"]
        assert response.json()["fallback"] == "/api/chat/messages"
        assert client.post(f"{TWO_STAGE}/resume", json={"requestId": "x"}).status_code == 404


def test_bad_input_is_refused_before_streaming(servers):
    server = servers()
    with httpx.Client(base_url=server.url) as client:
        # A blank message does not match the schema's pattern: refused like any other invalid body.
        assert client.post(TWO_STAGE, json={"message": " \u3000\n"}).status_code == 422
        assert client.post(TWO_STAGE, json={"message": "x", "bogus": 1}).status_code == 422
        assert client.post(TWO_STAGE, json={"message": "x", "requestId": "a/b"}).status_code == 422
        assert client.post("/api/runs/nope/stream", json={"message": "x"}).status_code == 404
        refused = client.post(TWO_STAGE, json=_body(model="openai:gpt-4o"))
        assert refused.status_code == 400 and "not allowed" in refused.json()["message"]
        stream(client, "POST", TWO_STAGE, json=_body(requestId="dup"))
        assert client.post(TWO_STAGE, json=_body(requestId="dup")).status_code == 409
        assert client.get("/api/requests/missing").status_code == 404


def test_pause_then_resume_continues_seq_without_rerunning_tools(servers, tmp_path: Path):
    server = servers(PHASEGRAPH_MODEL=slow_script(tmp_path))
    with httpx.Client(base_url=server.url) as client:

        def pause_at_first_call(event):
            if event.type == "tool_call" and event.name == "list_files":
                assert client.post("/api/requests/req-pause/pause").status_code == 202

        first = stream(
            client, "POST", TWO_STAGE, json=_body(requestId="req-pause"), on_event=pause_at_first_call
        )
        assert first[-1].type == "paused" and first[-1].reason == "requested"
        assert (
            first[-2].type == "phase_end" and first[-2].phase == "tool_phase"
        )  # right after the tool result
        assert client.get("/api/requests/req-pause").json()["status"] == "paused"
        second = stream(client, "POST", f"{TWO_STAGE}/resume", json={"requestId": "req-pause"})
        assert second[0].type == "resumed" and second[0].fork is False
        assert second[0].seq == first[-1].seq + 1
        assert second[-1].type == "final"
        events = first + second
        assert [e.seq for e in events] == list(range(1, len(events) + 1))
        assert [e.name for e in events if e.type == "tool_call"] == ["list_files", "read_file"]
        trace = client.get("/api/requests/req-pause/trace").json()
        assert [t["details"]["name"] for t in trace if t["type"] == "tool_call"] == [
            "list_files",
            "read_file",
        ]
        kinds = [t["type"] for t in trace]
        assert kinds.count("orchestration_phase_start") == kinds.count("orchestration_phase_end") == 5


def test_cancel_ends_the_stream_and_blocks_resume(servers, tmp_path: Path):
    server = servers(PHASEGRAPH_MODEL=slow_script(tmp_path))
    with httpx.Client(base_url=server.url) as client:

        def cancel_on_first_text(event):
            if event.type == "text" and event.seq == 2:
                assert client.post("/api/requests/req-cancel/cancel").json()["status"] == "cancelled"

        events = stream(
            client, "POST", TWO_STAGE, json=_body(requestId="req-cancel"), on_event=cancel_on_first_text
        )
        assert events[-1].type == "cancelled" and events[-1].phase == "action_phase"
        assert client.get("/api/requests/req-cancel").json()["status"] == "cancelled"
        assert client.post("/api/requests/req-cancel/cancel").status_code == 200  # idempotent
        refused = client.post(f"{TWO_STAGE}/resume", json={"requestId": "req-cancel"})
        assert refused.status_code == 409 and "cancelled" in refused.json()["message"]


def test_resume_from_an_earlier_phase_forks(servers):
    server = servers()
    with httpx.Client(base_url=server.url) as client:
        done = stream(client, "POST", TWO_STAGE, json=_body(requestId="req-fork"))
        resumed = stream(
            client, "POST", f"{TWO_STAGE}/resume", json={"requestId": "req-fork", "resumeFromPhaseIndex": 2}
        )
        assert resumed[0].type == "resumed" and resumed[0].fork is True and resumed[0].from_phase_index == 2
        assert resumed[0].seq == done[-1].seq + 1
        assert next(e.phase_index for e in resumed if e.type == "phase_start") == 3
        assert resumed[-1].type == "final"
        generic = stream(client, "POST", "/api/requests/req-fork/resume", json={"resumeFromPhaseIndex": 4})
        assert generic[0].type == "resumed" and generic[0].fork is True and generic[-1].type == "final"
        too_far = client.post(
            f"{TWO_STAGE}/resume", json={"requestId": "req-fork", "resumeFromPhaseIndex": 99}
        )
        assert too_far.status_code == 404


def test_dropping_the_connection_pauses_the_run(servers, tmp_path: Path):
    server = servers(PHASEGRAPH_MODEL=slow_script(tmp_path))
    with httpx.Client(base_url=server.url) as client:
        stream(client, "POST", TWO_STAGE, json=_body(requestId="req-drop"), stop_after="text")
        replay = stream(client, "GET", "/api/requests/req-drop/stream")
        assert replay[-1].type == "paused" and replay[-1].reason == "disconnected"
        assert client.get("/api/requests/req-drop").json()["status"] == "paused"
        resumed = stream(client, "POST", f"{TWO_STAGE}/resume", json={"requestId": "req-drop"})
        assert resumed[-1].type == "final"


def test_checkpoint_timeline_values_and_fork(servers):
    server = servers()
    with httpx.Client(base_url=server.url) as client:
        stream(client, "POST", TWO_STAGE, json=_body(requestId="req-cp"))
        timeline = client.get("/api/threads/req-cp/checkpoints").json()
        nodes = [c["node"] for c in timeline]
        assert nodes[:3] == [None, "__start__", "start_turn"] and "tool_phase" in nodes
        after_tool = next(c for c in timeline if c["node"] == "tool_phase")
        assert after_tool["phaseIndex"] == 2 and after_tool["next"] == ["action_phase"]
        values = client.get(f"/api/threads/req-cp/checkpoints/{after_tool['checkpointId']}").json()
        assert values["values"]["cycles_used"] == 1
        forked = stream(client, "POST", f"/api/threads/req-cp/checkpoints/{after_tool['checkpointId']}/fork")
        assert forked[0].type == "resumed" and forked[0].fork is True and forked[0].seq == 1
        assert forked[-1].type == "final" and forked[0].request_id != "req-cp"
        assert client.get("/api/threads/missing/checkpoints").status_code == 404


def test_tokens_scope_projects(servers):
    server = servers(PHASEGRAPH_API_TOKENS="alpha-secret:projA;root-secret:*")
    alpha = {"Authorization": "Bearer alpha-secret"}
    root = {"Authorization": "Bearer root-secret"}
    with httpx.Client(base_url=server.url) as client:
        assert client.get("/api/protocols").status_code == 401
        assert client.get("/api/protocols", headers={"Authorization": "Bearer wrong"}).status_code == 401
        assert client.post(TWO_STAGE, json=_body(projectId="projB"), headers=alpha).status_code == 403
        stream(client, "POST", TWO_STAGE, json=_body(projectId="projB", requestId="req-b"), headers=root)
        stream(client, "POST", TWO_STAGE, json=_body(projectId="projA", requestId="req-a"), headers=alpha)
        for path in ("/api/requests/req-b", "/api/requests/req-b/trace", "/api/threads/req-b/checkpoints"):
            assert client.get(path, headers=alpha).status_code == 404
        assert client.get("/api/requests/req-a", headers=alpha).status_code == 200
        assert client.get("/api/requests/req-b", headers=root).status_code == 200
        assert client.get("/healthz").status_code == 200  # only /api needs a token
    log = server.log.read_text()
    assert "alpha-secret" not in log and "root-secret" not in log


def test_a_request_may_name_an_allowed_model(servers, tmp_path: Path):
    other = tmp_path / "other.json"
    other.write_text('{"turns": [{"content": "From the other model."}]}', encoding="utf-8")
    server = servers(PHASEGRAPH_ALLOWED_MODELS=f"scripted:{other}")
    with httpx.Client(base_url=server.url) as client:
        chosen = stream(client, "POST", TWO_STAGE, json=_body(model=f"scripted:{other}", requestId="req-m"))
        assert chosen[-1].answer == "From the other model."
        assert client.get("/api/requests/req-m").json()["model"] == "scripted:other.json"
        default = stream(client, "POST", TWO_STAGE, json=_body())
        assert "two milestones" in default[-1].answer


def test_fallback_runs_pause_and_resume_with_the_flag_off(servers, tmp_path: Path):
    server = servers(PHASEGRAPH_TWO_STAGE_ENABLED="false", PHASEGRAPH_MODEL=slow_script(tmp_path))
    with httpx.Client(base_url=server.url) as client:

        def pause_at_first_call(event):
            if event.type == "tool_call":
                assert client.post("/api/requests/req-u/pause").status_code == 202

        first = stream(
            client, "POST", "/api/chat/messages", json=_body(requestId="req-u"), on_event=pause_at_first_call
        )
        assert first[-1].type == "paused" and first[-2].type == "tool_result"
        second = stream(client, "POST", "/api/requests/req-u/resume")
        assert second[0].type == "resumed" and second[-1].type == "final"
        events = first + second
        assert [e.seq for e in events] == list(range(1, len(events) + 1))
        assert [e.name for e in events if e.type == "tool_call"] == ["list_files", "read_file"]


def test_threads_carry_a_conversation_and_stay_in_their_project(servers):
    server = servers()
    with httpx.Client(base_url=server.url) as client:
        stream(client, "POST", TWO_STAGE, json=_body(requestId="turn-1", threadId="chat-1"))
        second = stream(client, "POST", TWO_STAGE, json=_body(requestId="turn-2", threadId="chat-1"))
        assert second[-1].type == "final"
        values = client.get("/api/threads/chat-1/checkpoints").json()[-1]
        state = client.get(f"/api/threads/chat-1/checkpoints/{values['checkpointId']}").json()["values"]
        # the demo's first turn (three calls, the last refused as a duplicate), then its first follow-up
        first_turn = ["human", *["ai", "tool"] * 3, "ai"]
        assert [m["kwargs"]["type"] for m in state["messages"]] == [*first_turn, "human", "ai", "tool", "ai"]
        # Ids are per project: another project's chat-1 (and turn-1) is a conversation of its own.
        theirs = _body(projectId="other", requestId="turn-1", threadId="chat-1")
        assert stream(client, "POST", TWO_STAGE, json=theirs)[-1].type == "final"
        ambiguous = client.get("/api/threads/chat-1/checkpoints")  # open access sees both projects
        assert ambiguous.status_code == 409 and "projectId" in ambiguous.json()["message"]
        latest = client.get("/api/threads/chat-1/checkpoints", params={"projectId": "other"}).json()[-1]
        state = client.get(
            f"/api/threads/chat-1/checkpoints/{latest['checkpointId']}", params={"projectId": "other"}
        ).json()["values"]
        assert [m["kwargs"]["type"] for m in state["messages"]] == first_turn
        other_protocol = client.post("/api/chat/messages", json=_body(threadId="chat-1"))
        assert other_protocol.status_code == 409
