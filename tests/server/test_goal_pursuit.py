"""goal_pursuit over real HTTP: the server streams it with no code of its own for the protocol.

SSE frames are parsed back into the event union; the offline demo (two tool executions on the
bundled story world) streams to one final. The tests every protocol shares (replayed, paused and
resumed, moved between replicas, cancelled, restarted, forked) are in test_protocol_runs.py, on this
module's demo and helpers.
"""

import asyncio
from typing import Any

import httpx
import pytest

from phasegraph.graphs.run import RunResult, run
from phasegraph.nodes.events import Event, Final, Paused, Resumed
from phasegraph.nodes.trace import MemoryTraceStore
from tests.graphs.test_goal_pursuit import COMPASS, GOAL, MIRA
from tests.server.conftest import stream, unique
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


def reference_run() -> RunResult:
    """The demo run in this process, with no server: what every stream of it must reproduce."""
    return asyncio.run(run("goal_pursuit", GOAL, traces=MemoryTraceStore()))


@pytest.fixture(scope="module")
def in_process() -> RunResult:
    return reference_run()


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


def test_the_demo_streams_to_one_final_with_its_resolution(shared_servers, in_process: RunResult):
    request_id = unique("gp-demo")  # the server is the session's, shared
    with httpx.Client(base_url=shared_servers().url) as client:
        listed = {p["id"]: p["route"] for p in client.get("/api/protocols").json()}
        assert listed["goal_pursuit"] == RUN
        events = stream(client, "POST", RUN, json=_body(request_id))
        assert client.get(f"/api/requests/{request_id}").json()["status"] == "completed"
        traced = tools_traced(client, request_id)
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    assert {(e.request_id, e.project_id, e.protocol) for e in events} == {
        (request_id, "proj", "goal_pursuit")
    }
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
