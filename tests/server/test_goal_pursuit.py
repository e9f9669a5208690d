"""goal_pursuit over real HTTP: the server streams it with no code of its own for the protocol.

SSE frames are parsed back into the event union; the offline demo (two tool executions on the
bundled story world) is paused at its pause points, resumed, restarted, moved between replicas,
cancelled and replayed.
"""

import asyncio
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from uuid import uuid4

import httpx
import pytest

from phasegraph.graphs.run import RunResult, run
from phasegraph.nodes.events import Event, Final, Paused, Resumed
from phasegraph.nodes.trace import MemoryTraceStore
from phasegraph.tools.resources import ResourceRepository, bundled_world
from tests.graphs.test_goal_pursuit import CHAPTER, COMPASS, GOAL, MIRA
from tests.server.conftest import Server, demo_server, stream
from tests.server.pausing import PausingDemo, check_resumes, tools_traced

RUN = "/api/runs/goal_pursuit/stream"
TOOLS = ["move_item", "add_chapter_note"]
#: The demo's pause points in order, as (node, phase index): where it stops when asked to pause
#: as soon as each segment starts.
EVERY_PAUSE_POINT = [
    ("analyze_refinement", 6),  # iteration 1: refined
    ("analyze_refinement", 9),  # iteration 2: move_item approved
    ("execute_action", 10),  # move_item ran
    ("analyze_refinement", 13),  # add_chapter_note approved
    ("execute_action", 14),  # add_chapter_note ran
    ("analyze_refinement", 17),  # the resolution approved
]
#: The graph node behind each phase, as the checkpoint timeline names them.
NODE_OF = {
    "context_discovery": "discover_context",
    "context_refinement": "refine_context",
    "action_decision": "decide_action",
    "refinement_analysis": "analyze_refinement",
    "execution": "execute_action",
}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """One server for the tests that need nothing but the default settings (each start costs seconds)."""
    with demo_server(tmp_path_factory, "goal-pursuit") as started:
        yield started


@pytest.fixture(scope="module")
def in_process() -> RunResult:
    """The demo run in this process, with no server: what every stream below must reproduce."""
    return asyncio.run(run("goal_pursuit", GOAL, traces=MemoryTraceStore()))


def _body(request_id: str, **extra: Any) -> dict[str, Any]:
    return {"message": GOAL, "projectId": "proj", "requestId": request_id, **extra}


def _progress(events: list[Event]) -> list[tuple[Any, ...]]:
    """What the protocol emitted, and where: the events the server adds (paused, resumed) left out."""
    return [
        (e.type, e.phase, e.phase_index, e.iteration, e.context_round, e.step)
        for e in events
        if not isinstance(e, Paused | Resumed)
    ]


def _stopped_after(segment: list[Event]) -> tuple[str, int | None]:
    """The pause point a paused segment stopped at, told by the protocol's last event before ``paused``."""
    last = segment[-2]
    if last.type == "verdict":
        return "analyze_refinement", last.phase_index
    assert last.type == "phase_end" and last.phase == "execution", last
    return "execute_action", last.phase_index


def _check_resumed_without_repeats(segments: list[list[Event]], in_process: RunResult) -> None:
    """Each resume continues seq and the protocol's events, and no tool runs twice."""
    events = check_resumes(segments, lambda e: (e.phase, e.phase_index, e.step))
    assert _progress(events) == _progress(in_process.events)
    results = [e for e in events if e.type == "tool_result"]
    assert [(e.name, e.status) for e in results] == [(name, "ok") for name in TOOLS]
    assert len({e.call_id for e in results}) == len(results)
    assert not [e for e in events if e.type == "duplicate_tool_call"]
    final = events[-1]
    assert isinstance(final, Final) and final.resolution == in_process.final.resolution


DEMO = PausingDemo(RUN, _body, EVERY_PAUSE_POINT, _stopped_after)


def test_the_demo_streams_to_one_final_with_its_resolution(server: Server, in_process: RunResult):
    with httpx.Client(base_url=server.url) as client:
        listed = {p["id"]: p["route"] for p in client.get("/api/protocols").json()}
        assert listed["goal_pursuit"] == RUN
        events = stream(client, "POST", RUN, json=_body("gp-demo"))
        assert client.get("/api/requests/gp-demo").json()["status"] == "completed"
        traced = tools_traced(client, "gp-demo")
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    assert {(e.request_id, e.project_id, e.protocol) for e in events} == {("gp-demo", "proj", "goal_pursuit")}
    assert all(e.phase is not None and e.phase_index is not None for e in events)
    # exactly the protocol's own events, in its order: the server adds and changes nothing
    assert _progress(events) == _progress(in_process.events)
    kinds = [e.type for e in events]
    assert "text" not in kinds and {"context_update", "decision", "verdict"} <= set(kinds)
    assert kinds.count("final") == 1 and kinds[-1] == "final"
    final = events[-1]
    assert isinstance(final, Final) and final.exit == "approved" and final.operation_plan is None
    assert final.resolution == {"kind": "resolution", "response": final.answer, "status": "success"}
    assert "Mira Voss" in final.answer and not final.all_tools_failed and not final.fallback
    calls = [e for e in events if e.type == "tool_call"]
    assert [(e.name, e.step) for e in calls] == [("move_item", 1), ("add_chapter_note", 2)]
    assert calls[0].args == {"item_uri": COMPASS, "to_uri": MIRA}
    assert all("output" not in e.to_dict() for e in events if e.type == "tool_result")
    assert traced == TOOLS


def test_last_event_id_replays_what_was_missed_without_repeats(server: Server):
    with httpx.Client(base_url=server.url) as client:
        body = _body("gp-replay", onDisconnect="continue", showToolOutputs=True)
        head = stream(client, "POST", RUN, json=body, stop_after="decision")  # then drop the connection
        rest = stream(
            client, "GET", "/api/requests/gp-replay/stream", headers={"Last-Event-ID": str(head[-1].seq)}
        )
        everything = stream(client, "GET", "/api/requests/gp-replay/stream")
        nothing_after = {"Last-Event-ID": str(everything[-1].seq)}
        assert stream(client, "GET", "/api/requests/gp-replay/stream", headers=nothing_after) == []
    events = head + rest
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    assert [e.to_json() for e in everything] == [e.to_json() for e in events]
    assert events[-1].type == "final" and events[-1].resolution["status"] == "success"
    outputs = [e.output for e in events if e.type == "tool_result"]
    assert "owner 'res://character/tamsin-reed' -> 'res://character/mira-voss'" in outputs[0]


def test_pausing_at_every_pause_point_then_resuming_runs_each_tool_once(
    server: Server, in_process: RunResult
):
    with httpx.Client(base_url=server.url) as client:
        segments = DEMO.pause_and_replay(client, "gp-pause", TOOLS)
    _check_resumed_without_repeats(segments, in_process)


def test_a_paused_run_resumes_on_a_restarted_server(servers, tmp_path: Path, in_process: RunResult):
    world = tmp_path / "world"  # a repository on disk: its changes outlive the process
    shutil.copytree(bundled_world(), world)
    first = servers(PHASEGRAPH_RESOURCES=str(world))
    with httpx.Client(base_url=first.url) as client:
        segments = [DEMO.segment(client, "gp-restart", start=True)]
        while not any(e.type == "tool_result" for e in segments[-1]):
            segments.append(DEMO.segment(client, "gp-restart"))
    first.kill()  # SIGKILL while paused after move_item ran (at its pause point)
    assert ResourceRepository.load(world).get(COMPASS).properties["owner"] == MIRA

    second = servers(PHASEGRAPH_RESOURCES=str(world))
    with httpx.Client(base_url=second.url) as client:
        assert client.get("/api/requests/gp-restart").json()["status"] == "paused"
        replayed = stream(client, "GET", "/api/requests/gp-restart/stream")
        rest = stream(client, "POST", "/api/requests/gp-restart/resume", json={})
        traced = tools_traced(client, "gp-restart")
    before = [e for segment in segments for e in segment]
    assert [e.to_json() for e in replayed] == [e.to_json() for e in before]
    _check_resumed_without_repeats([*segments, rest], in_process)
    assert [e.name for e in rest if e.type == "tool_call"] == ["add_chapter_note"]
    assert traced == TOOLS  # move_item ran before the kill and never again
    notes = ResourceRepository.load(world).get(CHAPTER).properties["notes"]
    assert len(notes) == 1 and "compass" in notes[0]


@pytest.mark.skipif(
    not os.environ.get("PHASEGRAPH_TEST_POSTGRES_URL"), reason="PHASEGRAPH_TEST_POSTGRES_URL unset"
)
def test_two_replicas_take_turns_at_every_pause_point(servers, in_process: RunResult):
    database = {"PHASEGRAPH_CHECKPOINTER": os.environ["PHASEGRAPH_TEST_POSTGRES_URL"]}
    replica_a, replica_b = servers(**database), servers(**database)
    request_id = f"gp-{uuid4().hex}"  # the database outlives the test
    with httpx.Client(base_url=replica_a.url) as a, httpx.Client(base_url=replica_b.url) as b:
        segments = DEMO.pause_everywhere([a, b], request_id)
        traced = [tools_traced(client, request_id) for client in (a, b)]
        replayed = [stream(client, "GET", f"/api/requests/{request_id}/stream") for client in (a, b)]
    DEMO.check_stops(segments)
    _check_resumed_without_repeats(segments, in_process)
    assert traced == [TOOLS, TOOLS]
    events = [e.to_json() for segment in segments for e in segment]
    assert [e.to_json() for e in replayed[0]] == [e.to_json() for e in replayed[1]] == events


def test_cancel_ends_a_running_or_paused_run_for_good(server: Server):
    with httpx.Client(base_url=server.url) as client:

        def cancel_at_once(event: Event) -> None:
            if event.seq == 1:
                assert client.post("/api/requests/gp-cancel/cancel").json()["status"] == "cancelled"

        running = stream(client, "POST", RUN, json=_body("gp-cancel"), on_event=cancel_at_once)
        refused = client.post("/api/requests/gp-cancel/resume", json={})
        paused = DEMO.segment(client, "gp-cancel-paused", start=True)
        assert client.post("/api/requests/gp-cancel-paused/cancel").json()["status"] == "cancelled"
        assert client.post("/api/requests/gp-cancel-paused/cancel").status_code == 200  # idempotent
        replayed = stream(client, "GET", "/api/requests/gp-cancel-paused/stream")
        statuses = {
            client.get(f"/api/requests/{r}").json()["status"] for r in ("gp-cancel", "gp-cancel-paused")
        }
        refused_too = client.post("/api/requests/gp-cancel-paused/resume", json={})
    assert running[-1].type == "cancelled" and not [e for e in running if e.type == "final"]
    assert running[-1].protocol == "goal_pursuit"
    assert statuses == {"cancelled"}
    for answer in (refused, refused_too):
        assert answer.status_code == 409 and "cancelled" in answer.json()["message"]
    cancelled = replayed[-1]
    assert [e.to_json() for e in replayed[:-1]] == [e.to_json() for e in paused]
    assert cancelled.type == "cancelled" and cancelled.seq == paused[-1].seq + 1
    assert (cancelled.phase, cancelled.phase_index, cancelled.iteration) == ("refinement_analysis", 6, 1)


def test_checkpoints_show_the_pursuit_and_fork_after_its_first_tool(server: Server, in_process: RunResult):
    with httpx.Client(base_url=server.url) as client:
        done = stream(client, "POST", RUN, json=_body("gp-cp"))
        timeline = client.get("/api/threads/gp-cp/checkpoints").json()
        executed = [c for c in timeline if c["node"] == "execute_action"]
        analyzed = next(c for c in timeline if c["node"] == "analyze_refinement")
        values = {
            name: client.get(f"/api/threads/gp-cp/checkpoints/{c['checkpointId']}").json()["values"]
            for name, c in (("executed", executed[0]), ("analyzed", analyzed))
        }
        forked = stream(client, "POST", f"/api/threads/gp-cp/checkpoints/{executed[0]['checkpointId']}/fork")
        from_phase = stream(client, "POST", "/api/requests/gp-cp/resume", json={"resumeFromPhaseIndex": 10})
    phases = [NODE_OF[e.phase] for e in in_process.events if e.type == "phase_start"]
    assert [c["node"] for c in timeline] == [None, "__start__", "start_pursuit", *phases, "finish_pursuit"]
    assert [c["phaseIndex"] for c in timeline[3:]] == [*range(1, len(phases) + 1), len(phases)]
    assert timeline[-1]["next"] == [] and executed[0]["next"] == ["discover_context"]
    assert [c["phaseIndex"] for c in executed] == [10, 14]
    assert analyzed["phaseIndex"] == 6 and analyzed["next"] == ["discover_context"]
    after_refine, after_tool = values["analyzed"], values["executed"]
    assert (after_refine["iteration"], after_refine["step"]) == (1, 0)
    assert after_refine["verdict"]["verdict"] == "refine"
    assert "Mira Voss" in after_refine["assessment"]["expected_actions"]
    assert (after_tool["iteration"], after_tool["context_round"], after_tool["step"]) == (0, 0, 1)
    assert [r["name"] for r in after_tool["results"]] == ["move_item"] and len(after_tool["executed"]) == 1
    assert after_tool["assessment"]["finished_tasks"][0].startswith("move_item(")
    for resumed, continued in ((forked, 1), (from_phase, done[-1].seq + 1)):
        assert isinstance(resumed[0], Resumed) and resumed[0].fork and resumed[0].seq == continued
        assert [e.seq for e in resumed] == list(range(continued, continued + len(resumed)))
        assert [e.name for e in resumed if e.type == "tool_call"] == ["add_chapter_note"]  # move_item ran
        assert resumed[-1].type == "final" and resumed[-1].resolution == done[-1].resolution
    assert forked[0].request_id != "gp-cp" and from_phase[0].from_phase_index == 10
