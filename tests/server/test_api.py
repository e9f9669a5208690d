"""The HTTP API against a real server process; SSE frames are parsed back into the event union.

The servers are the session's (``shared_servers``), so every test names its requests and threads with
``unique``. A test that needs a script picks it per request (``scripts``), so one server allows them
all; ``GUARDED`` is the one server with tokens.
"""

import httpx

from phasegraph.nodes.events import Final
from tests.server.conftest import GUARDED, allowing_scripts, scripts, stream, unique

TWO_STAGE = "/api/chat/messages_two_stage"


def _body(**extra):
    return {"message": "Summarise the roadmap", "projectId": "proj", **extra}


def test_two_stage_stream_carries_phase_metadata_on_every_event(shared_servers):
    server, request_id = shared_servers(), unique("req-meta")
    with httpx.Client(base_url=server.url) as client:
        events = stream(client, "POST", TWO_STAGE, json=_body(requestId=request_id))
        assert isinstance(events[-1], Final) and "two milestones" in events[-1].answer
        assert [e.seq for e in events] == list(range(1, len(events) + 1))
        for event in events:
            assert (event.request_id, event.project_id, event.protocol) == (
                request_id,
                "proj",
                "triggered_phase",
            )
            assert event.phase is not None and event.phase_index is not None and event.cycle_index is not None
        assert client.get(f"/api/requests/{request_id}").json()["status"] == "completed"
        trace = client.get(f"/api/requests/{request_id}/trace").json()
        raw = [t["details"]["output"] for t in trace if t["type"] == "tool_result"]
        assert raw[0] == "docs/roadmap.md\ndocs/team.md"  # raw outputs live in the trace only
        assert all("output" not in e.to_dict() for e in events if e.type == "tool_result")
        assert {t["requestId"] for t in trace} == {request_id}
        finished = client.post(f"/api/requests/{request_id}/cancel")
        assert finished.status_code == 409 and "already completed" in finished.json()["message"]


def test_fallback_and_generic_routes(shared_servers):
    server = shared_servers()
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


def test_flag_off_answers_404_naming_the_fallback(shared_servers, tmp_path_factory):
    server = shared_servers(**allowing_scripts(tmp_path_factory, PHASEGRAPH_TWO_STAGE_ENABLED="false"))
    with httpx.Client(base_url=server.url) as client:
        response = client.post(TWO_STAGE, json=_body())
        assert response.status_code == 404
        assert "/api/chat/messages" in response.json()["message"]
        assert response.json()["fallback"] == "/api/chat/messages"
        assert client.post(f"{TWO_STAGE}/resume", json={"requestId": "x"}).status_code == 404


def test_bad_input_is_refused_before_streaming(shared_servers):
    server, duplicate = shared_servers(), unique("dup")
    with httpx.Client(base_url=server.url) as client:
        # A blank message does not match the schema's pattern: refused like any other invalid body.
        assert client.post(TWO_STAGE, json={"message": " \u3000\n"}).status_code == 422
        assert client.post(TWO_STAGE, json={"message": "x", "bogus": 1}).status_code == 422
        assert client.post(TWO_STAGE, json={"message": "x", "requestId": "a/b"}).status_code == 422
        assert client.post("/api/runs/nope/stream", json={"message": "x"}).status_code == 404
        refused = client.post(TWO_STAGE, json=_body(model="openai:gpt-4o"))
        assert refused.status_code == 400 and "not allowed" in refused.json()["message"]
        stream(client, "POST", TWO_STAGE, json=_body(requestId=duplicate))
        assert client.post(TWO_STAGE, json=_body(requestId=duplicate)).status_code == 409
        assert client.get(f"/api/requests/{unique('missing')}").status_code == 404


def test_pause_then_resume_continues_seq_without_rerunning_tools(shared_servers, tmp_path_factory):
    server, slow = shared_servers(**allowing_scripts(tmp_path_factory)), scripts(tmp_path_factory)["slow"]
    request_id = unique("req-pause")
    with httpx.Client(base_url=server.url) as client:

        def pause_at_first_call(event):
            if event.type == "tool_call" and event.name == "list_files":
                assert client.post(f"/api/requests/{request_id}/pause").status_code == 202

        first = stream(
            client,
            "POST",
            TWO_STAGE,
            json=_body(requestId=request_id, model=slow),
            on_event=pause_at_first_call,
        )
        assert first[-1].type == "paused" and first[-1].reason == "requested"
        assert (
            first[-2].type == "phase_end" and first[-2].phase == "tool_phase"
        )  # right after the tool result
        assert client.get(f"/api/requests/{request_id}").json()["status"] == "paused"
        second = stream(client, "POST", f"{TWO_STAGE}/resume", json={"requestId": request_id})
        assert second[0].type == "resumed" and second[0].fork is False
        assert second[0].seq == first[-1].seq + 1
        assert second[-1].type == "final"
        events = first + second
        assert [e.seq for e in events] == list(range(1, len(events) + 1))
        assert [e.name for e in events if e.type == "tool_call"] == ["list_files", "read_file"]
        trace = client.get(f"/api/requests/{request_id}/trace").json()
        assert [t["details"]["name"] for t in trace if t["type"] == "tool_call"] == [
            "list_files",
            "read_file",
        ]
        kinds = [t["type"] for t in trace]
        assert kinds.count("orchestration_phase_start") == kinds.count("orchestration_phase_end") == 5


def test_cancel_ends_the_stream_and_blocks_resume(shared_servers, tmp_path_factory):
    server, slow = shared_servers(**allowing_scripts(tmp_path_factory)), scripts(tmp_path_factory)["slow"]
    request_id = unique("req-cancel")
    with httpx.Client(base_url=server.url) as client:

        def cancel_on_first_text(event):
            if event.type == "text" and event.seq == 2:
                assert client.post(f"/api/requests/{request_id}/cancel").json()["status"] == "cancelled"

        events = stream(
            client,
            "POST",
            TWO_STAGE,
            json=_body(requestId=request_id, model=slow),
            on_event=cancel_on_first_text,
        )
        assert events[-1].type == "cancelled" and events[-1].phase == "action_phase"
        assert client.get(f"/api/requests/{request_id}").json()["status"] == "cancelled"
        assert client.post(f"/api/requests/{request_id}/cancel").status_code == 200  # idempotent
        refused = client.post(f"{TWO_STAGE}/resume", json={"requestId": request_id})
        assert refused.status_code == 409 and "cancelled" in refused.json()["message"]


def test_resume_from_an_earlier_phase_forks(shared_servers):
    server, request_id = shared_servers(), unique("req-fork")
    with httpx.Client(base_url=server.url) as client:
        done = stream(client, "POST", TWO_STAGE, json=_body(requestId=request_id))
        resumed = stream(
            client, "POST", f"{TWO_STAGE}/resume", json={"requestId": request_id, "resumeFromPhaseIndex": 2}
        )
        assert resumed[0].type == "resumed" and resumed[0].fork is True and resumed[0].from_phase_index == 2
        assert resumed[0].seq == done[-1].seq + 1
        assert next(e.phase_index for e in resumed if e.type == "phase_start") == 3
        assert resumed[-1].type == "final"
        generic = stream(
            client, "POST", f"/api/requests/{request_id}/resume", json={"resumeFromPhaseIndex": 4}
        )
        assert generic[0].type == "resumed" and generic[0].fork is True and generic[-1].type == "final"
        too_far = client.post(
            f"{TWO_STAGE}/resume", json={"requestId": request_id, "resumeFromPhaseIndex": 99}
        )
        assert too_far.status_code == 404


def test_dropping_the_connection_pauses_the_run(shared_servers, tmp_path_factory):
    server, slow = shared_servers(**allowing_scripts(tmp_path_factory)), scripts(tmp_path_factory)["slow"]
    request_id = unique("req-drop")
    with httpx.Client(base_url=server.url) as client:
        stream(client, "POST", TWO_STAGE, json=_body(requestId=request_id, model=slow), stop_after="text")
        replay = stream(client, "GET", f"/api/requests/{request_id}/stream")
        assert replay[-1].type == "paused" and replay[-1].reason == "disconnected"
        assert client.get(f"/api/requests/{request_id}").json()["status"] == "paused"
        resumed = stream(client, "POST", f"{TWO_STAGE}/resume", json={"requestId": request_id})
        assert resumed[-1].type == "final"


def test_checkpoint_timeline_values_and_fork(shared_servers):
    server, request_id = shared_servers(), unique("req-cp")
    checkpoints = f"/api/threads/{request_id}/checkpoints"
    with httpx.Client(base_url=server.url) as client:
        stream(client, "POST", TWO_STAGE, json=_body(requestId=request_id))
        timeline = client.get(checkpoints).json()
        nodes = [c["node"] for c in timeline]
        assert nodes[:3] == [None, "__start__", "start_turn"] and "tool_phase" in nodes
        after_tool = next(c for c in timeline if c["node"] == "tool_phase")
        assert after_tool["phaseIndex"] == 2 and after_tool["next"] == ["action_phase"]
        values = client.get(f"{checkpoints}/{after_tool['checkpointId']}").json()
        assert values["values"]["cycles_used"] == 1
        forked = stream(client, "POST", f"{checkpoints}/{after_tool['checkpointId']}/fork")
        assert forked[0].type == "resumed" and forked[0].fork is True and forked[0].seq == 1
        assert forked[-1].type == "final" and forked[0].request_id != request_id
        assert client.get(f"/api/threads/{unique('missing')}/checkpoints").status_code == 404


def test_tokens_scope_projects(shared_servers):
    server = shared_servers(**GUARDED)
    alpha = {"Authorization": "Bearer alpha-secret"}
    root = {"Authorization": "Bearer root-secret"}
    req_a, req_b = unique("req-a"), unique("req-b")
    with httpx.Client(base_url=server.url) as client:
        assert client.get("/api/protocols").status_code == 401
        assert client.get("/api/protocols", headers={"Authorization": "Bearer wrong"}).status_code == 401
        assert client.post(TWO_STAGE, json=_body(projectId="projB"), headers=alpha).status_code == 403
        stream(client, "POST", TWO_STAGE, json=_body(projectId="projB", requestId=req_b), headers=root)
        stream(client, "POST", TWO_STAGE, json=_body(projectId="projA", requestId=req_a), headers=alpha)
        for path in (
            f"/api/requests/{req_b}",
            f"/api/requests/{req_b}/trace",
            f"/api/threads/{req_b}/checkpoints",
        ):
            assert client.get(path, headers=alpha).status_code == 404
        assert client.get(f"/api/requests/{req_a}", headers=alpha).status_code == 200
        assert client.get(f"/api/requests/{req_b}", headers=root).status_code == 200
        assert client.get("/healthz").status_code == 200  # only /api needs a token
    log = server.log.read_text()
    assert "alpha-secret" not in log and "root-secret" not in log


def test_a_request_may_name_an_allowed_model(shared_servers, tmp_path_factory):
    server, other = shared_servers(**allowing_scripts(tmp_path_factory)), scripts(tmp_path_factory)["other"]
    request_id = unique("req-m")
    with httpx.Client(base_url=server.url) as client:
        chosen = stream(client, "POST", TWO_STAGE, json=_body(model=other, requestId=request_id))
        assert chosen[-1].answer == "From the other model."
        assert client.get(f"/api/requests/{request_id}").json()["model"] == "scripted:other.json"
        default = stream(client, "POST", TWO_STAGE, json=_body())
        assert "two milestones" in default[-1].answer


def test_fallback_runs_pause_and_resume_with_the_flag_off(shared_servers, tmp_path_factory):
    server = shared_servers(**allowing_scripts(tmp_path_factory, PHASEGRAPH_TWO_STAGE_ENABLED="false"))
    slow, request_id = scripts(tmp_path_factory)["slow"], unique("req-u")
    with httpx.Client(base_url=server.url) as client:

        def pause_at_first_call(event):
            if event.type == "tool_call":
                assert client.post(f"/api/requests/{request_id}/pause").status_code == 202

        first = stream(
            client,
            "POST",
            "/api/chat/messages",
            json=_body(requestId=request_id, model=slow),
            on_event=pause_at_first_call,
        )
        assert first[-1].type == "paused" and first[-2].type == "tool_result"
        second = stream(client, "POST", f"/api/requests/{request_id}/resume")
        assert second[0].type == "resumed" and second[-1].type == "final"
        events = first + second
        assert [e.seq for e in events] == list(range(1, len(events) + 1))
        assert [e.name for e in events if e.type == "tool_call"] == ["list_files", "read_file"]


def test_threads_carry_a_conversation_and_stay_in_their_project(shared_servers):
    server, chat, turn_1 = shared_servers(), unique("chat-1"), unique("turn-1")
    checkpoints = f"/api/threads/{chat}/checkpoints"
    with httpx.Client(base_url=server.url) as client:
        stream(client, "POST", TWO_STAGE, json=_body(requestId=turn_1, threadId=chat))
        second = stream(client, "POST", TWO_STAGE, json=_body(requestId=unique("turn-2"), threadId=chat))
        assert second[-1].type == "final"
        values = client.get(checkpoints).json()[-1]
        state = client.get(f"{checkpoints}/{values['checkpointId']}").json()["values"]
        # the demo's first turn (three calls, the last refused as a duplicate), then its first follow-up
        first_turn = ["human", *["ai", "tool"] * 3, "ai"]
        assert [m["kwargs"]["type"] for m in state["messages"]] == [*first_turn, "human", "ai", "tool", "ai"]
        # Ids are per project: another project's thread (and its first request) is a conversation of its own.
        theirs = _body(projectId="other", requestId=turn_1, threadId=chat)
        assert stream(client, "POST", TWO_STAGE, json=theirs)[-1].type == "final"
        ambiguous = client.get(checkpoints)  # open access sees both projects
        assert ambiguous.status_code == 409 and "projectId" in ambiguous.json()["message"]
        latest = client.get(checkpoints, params={"projectId": "other"}).json()[-1]
        state = client.get(f"{checkpoints}/{latest['checkpointId']}", params={"projectId": "other"}).json()[
            "values"
        ]
        assert [m["kwargs"]["type"] for m in state["messages"]] == first_turn
        other_protocol = client.post("/api/chat/messages", json=_body(threadId=chat))
        assert other_protocol.status_code == 409
