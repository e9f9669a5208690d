"""agent_network over real HTTP: the server streams it with no code of its own for the protocol.

SSE frames are parsed back into the event union; the bundled example network (triage hands the
question to the researcher, who searches and reads the docs, then hands it to the writer, who
responds) streams in order, and killed mid-tool it is taken over and repeats only that tool. The
tests every protocol shares (replayed, paused and resumed, moved between replicas, cancelled,
restarted, forked) are in test_protocol_runs.py, on this module's demo and helpers.
"""

import asyncio
import os
import shutil
from collections import Counter
from pathlib import Path
from typing import Any
from uuid import uuid4

import httpx
import pytest

from phasegraph.graphs.run import RunResult, run
from phasegraph.nodes.events import Event, Final, Paused, Resumed, Route, ToolCall, ToolResultEvent
from phasegraph.nodes.models import DEMO_WORKSPACE
from phasegraph.nodes.trace import MemoryTraceStore
from tests.graphs.test_agent_network import QUESTION
from tests.server.conftest import Server, needs_postgres, read_sse, stream, unique
from tests.server.pausing import (
    PausingDemo,
    check_resumes,
    latest_values,
    take_over,
    tool_events,
    tools_traced,
    wait_for_checkpoint,
)
from tests.server.test_crash_recovery import _kept

RUN = "/api/runs/agent_network/stream"
TOOLS = ["search_files", "read_file"]
#: The demo's events, in order: five decisions, two handoffs, two tool executions, one answer.
DEMO_KINDS = [
    "agent_step", "route",  # triage hands the question to the researcher
    "agent_step", "tool_call", "tool_result",  # search_files
    "agent_step", "tool_call", "tool_result",  # read_file
    "agent_step", "route",  # the researcher hands what it found to the writer
    "agent_step", "final",  # the writer responds
]  # fmt: skip
#: The demo's pause points in order, as (node, phase index).
EVERY_PAUSE_POINT = [("route_to_agent", 2), ("use_tool", 4), ("use_tool", 6), ("route_to_agent", 8)]
#: The node behind each checkpoint of the demo's timeline (None: the input).
TIMELINE = [
    None, "__start__", "open_network",
    "run_agent_step", "route_to_agent",
    "run_agent_step", "use_tool",
    "run_agent_step", "use_tool",
    "run_agent_step", "route_to_agent",
    "run_agent_step", "respond",
]  # fmt: skip
#: The demo's execution log as (type, step, epoch, agent).
DEMO_LOG = [
    ("agent", 1, 1, "triage"),
    ("agent", 2, 2, "researcher"),
    ("tool", 2, 2, "researcher"),
    ("agent", 3, 2, "researcher"),
    ("tool", 3, 2, "researcher"),
    ("agent", 4, 2, "researcher"),
    ("agent", 5, 3, "writer"),
]
#: Where the demo is once the researcher decided to search (the checkpoint before search_files).
DECIDED_TO_SEARCH = ("agent_step", 3, 2, "researcher", 2)
#: Where it is once search_files ran (its pause point).
SEARCHED = ("tool_execution", 4, 2, "researcher", 2)
#: The archive that makes search_files slow: notes this many folders deep, and how many.
ARCHIVE_DEPTH, ARCHIVE_NOTES = 40, 6000


def make_slow_workspace(folder: Path) -> Path:
    """The demo workspace plus a deep archive of notes under docs/ that mention nothing of the question.

    The demo's search_files walks docs/, so here it takes a second or so and finds exactly what it
    finds in the bundled workspace: a test can pause, cancel or kill the run while the tool runs.
    (The demo's decisions come from a script and take milliseconds: the tool is its one slow step.)
    """
    root = folder / "workspace"
    shutil.copytree(DEMO_WORKSPACE, root)
    archive = root / "docs" / "archive"
    for level in range(ARCHIVE_DEPTH):
        archive = archive / f"{level:02d}"
    archive.mkdir(parents=True)
    for number in range(ARCHIVE_NOTES):
        (archive / f"minutes-{number:05d}.md").write_text(
            "Minutes of a planning meeting.\n", encoding="utf-8"
        )
    return root


@pytest.fixture(scope="module")
def slow_workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_slow_workspace(tmp_path_factory.mktemp("slow"))


def reference_run() -> RunResult:
    """The demo run in this process, with no server: what every stream of it must reproduce."""
    return asyncio.run(run("agent_network", QUESTION, traces=MemoryTraceStore()))


@pytest.fixture(scope="module")
def in_process() -> RunResult:
    return reference_run()


def _body(request_id: str, **extra: Any) -> dict[str, Any]:
    return {"message": QUESTION, "projectId": "proj", "requestId": request_id, **extra}


def _where(event: Event) -> tuple[Any, ...]:
    """An event's place in the run: phase, phase index, step, agent in control, control epoch."""
    return (event.phase, event.phase_index, event.step, event.agent, event.epoch)


def _progress(events: list[Event]) -> list[tuple[Any, ...]]:
    """What the protocol emitted, and where: the events the server adds (paused, resumed) left out."""
    return [(e.type, *_where(e)) for e in events if not isinstance(e, Paused | Resumed)]


def _stopped_after(segment: list[Event]) -> tuple[str, int]:
    """The pause point a paused segment stopped at, told by the protocol's last event before ``paused``."""
    last = segment[-2]
    assert last.phase_index is not None, last
    if isinstance(last, Route):
        return "route_to_agent", last.phase_index
    assert isinstance(last, ToolResultEvent) and last.phase == "tool_execution", last
    return "use_tool", last.phase_index


def _check_tools_ran_once(events: list[Event]) -> list[str]:
    """Each tool was called once, under an execution id of its own; returns the ids in order.

    Counted over all ``events`` given (a whole request): per tool and per execution id.
    """
    calls, results = tool_events(events)
    assert Counter(e.name for e in calls) == Counter(TOOLS) and [e.name for e in calls] == TOOLS
    assert [(e.name, e.status) for e in results] == [(name, "ok") for name in TOOLS]
    ids = [e.execution_id for e in calls]
    assert [e.execution_id for e in results] == ids and [e.call_id for e in calls] == ids
    executed = [i for i in ids if i is not None]
    assert len(executed) == len(TOOLS) and set(Counter(executed).values()) == {1}
    assert not [e for e in events if e.type == "duplicate_tool_call"]
    return executed


def _check_resumed_without_repeats(segments: list[list[Event]], in_process: RunResult) -> None:
    """Each resume continues seq and the protocol's events, and no tool runs twice."""
    events = check_resumes(segments, _where)
    assert _progress(events) == _progress(in_process.events)
    _check_tools_ran_once(events)
    final = events[-1]
    assert isinstance(final, Final) and in_process.final is not None
    assert final.answer == in_process.final.answer and final.agent == "writer"


DEMO = PausingDemo(RUN, _body, EVERY_PAUSE_POINT, _stopped_after)


def _check_logs(values: dict[str, Any], execution_ids: list[str], answer: str) -> None:
    """The final state's execution log and tool execution log hold exactly the executions streamed."""
    log, payloads = values["execution_log"], values["tool_execution_log"]
    assert [(e["type"], e["step"], e["epoch"], e["agent_key"]) for e in log] == DEMO_LOG
    tool_steps = [e for e in log if e["type"] == "tool"]
    assert [e["execution_id"] for e in tool_steps] == execution_ids
    assert [e["tool_key"] for e in tool_steps] == TOOLS and {e["status"] for e in tool_steps} == {"ok"}
    assert list(payloads) == execution_ids  # one payload per execution: nothing ran twice
    for entry in tool_steps:
        payload = payloads[entry["execution_id"]]
        assert (payload["tool_key"], payload["step"], payload["epoch"], payload["status"]) == (
            entry["tool_key"], entry["step"], entry["epoch"], "ok"
        )  # fmt: skip
        assert payload["agent_key"] == "researcher"
    search, read = (payloads[i] for i in execution_ids)
    assert search["merged_params"] == {"query": "stream", "path": "docs"}  # the network's system param
    assert "docs/roadmap.md" in search["result"] and "archive" not in search["result"]
    assert read["merged_params"] == {"path": "docs/team.md"} and "Linus: streaming server" in read["result"]
    instructions = values["instructions"]
    assert [i["action"] for i in instructions] == [
        "ROUTE_TO_AGENT", "USE_TOOL", "USE_TOOL", "ROUTE_TO_AGENT", "RESPOND"
    ]  # fmt: skip
    assert [i["execution_id"] for i in instructions if i["action"] == "USE_TOOL"] == execution_ids
    assert (values["responder"], values["answer"], values["control_epoch"]) == ("writer", answer, 3)


def _kill_while_searching(server: Server, request_id: str) -> list[Event]:
    """Start the demo (on the slow workspace) and SIGKILL its server while search_files runs.

    The kill waits for the researcher's decision to be saved, so the run is taken over from the
    checkpoint right before the tool: the search it interrupted must run again, nothing else.
    """
    seen: list[Event] = []
    with (
        httpx.Client(base_url=server.url) as client,
        client.stream("POST", RUN, json=_body(request_id), timeout=60) as response,
    ):

        def on_event(event: Event) -> None:
            seen.append(event)
            if isinstance(event, ToolCall):
                wait_for_checkpoint(client, request_id, "run_agent_step", 3)
                server.kill()

        with pytest.raises(httpx.HTTPError):  # the connection dies with the server
            read_sse(response, on_event=on_event)
    assert server.process is not None and server.process.returncode is not None
    assert [e.type for e in seen] == DEMO_KINDS[:4]  # search_files was called and never returned
    return seen


def test_the_demo_streams_in_order_to_the_writers_answer(shared_servers, in_process: RunResult):
    request_id = unique("an-demo")  # the server is the session's, shared
    with httpx.Client(base_url=shared_servers().url) as client:
        listed = {p["id"]: (p["seed"], p["route"]) for p in client.get("/api/protocols").json()}
        assert listed["agent_network"] == ("003", RUN)
        events = stream(client, "POST", RUN, json=_body(request_id))
        status = client.get(f"/api/requests/{request_id}").json()
        traced = tools_traced(client, request_id)
        values = latest_values(client, request_id)
    assert (status["status"], status["protocol"], status["lastSeq"]) == ("completed", "agent_network", 12)
    assert status["model"] == "scripted:demo"
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    assert {(e.request_id, e.project_id, e.protocol) for e in events} == {
        (request_id, "proj", "agent_network")
    }
    # exactly the protocol's own events, in its order: the server adds and changes nothing
    assert [e.type for e in events] == DEMO_KINDS
    assert _progress(events) == _progress(in_process.events)
    assert all(e.step and e.agent and e.epoch for e in events)
    steps = [e for e in events if e.type == "agent_step"]
    assert [(e.step, e.agent, e.epoch) for e in steps] == [
        (1, "triage", 1), (2, "researcher", 2), (3, "researcher", 2), (4, "researcher", 2), (5, "writer", 3)
    ]  # fmt: skip
    routes = [e for e in events if isinstance(e, Route)]
    assert [(e.from_agent, e.to_agent, e.epoch) for e in routes] == [
        ("triage", "researcher", 2),
        ("researcher", "writer", 3),
    ]
    assert routes[1].message is not None and "Linus" in routes[1].message
    calls, _ = tool_events(events)
    assert [(e.name, e.args, *_where(e)) for e in calls] == [
        ("search_files", {"query": "stream", "path": "docs"}, *SEARCHED),
        ("read_file", {"path": "docs/team.md"}, "tool_execution", 6, 3, "researcher", 2),
    ]
    executed = _check_tools_ran_once(events)
    assert all("output" not in e.to_dict() for e in events if e.type == "tool_result")
    final = events[-1]
    assert isinstance(final, Final) and in_process.final is not None
    assert _where(final) == ("agent_step", 9, 5, "writer", 3) and not final.all_tools_failed
    assert final.answer == in_process.final.answer and "Linus" in final.answer
    assert traced == TOOLS
    _check_logs(values, executed, final.answer)


@pytest.mark.parametrize("taken_over_by", ["restarted server", pytest.param("replica", marks=needs_postgres)])
def test_a_run_killed_mid_tool_is_taken_over_and_repeats_only_that_tool(
    servers, slow_workspace: Path, in_process: RunResult, taken_over_by: str
):
    env = {"PHASEGRAPH_WORKSPACE": str(slow_workspace)}
    replicas = taken_over_by == "replica"
    if replicas:  # two replicas on the test Postgres: the other one is up before the kill
        env["PHASEGRAPH_CHECKPOINTER"] = os.environ["PHASEGRAPH_TEST_POSTGRES_URL"]
    driver = servers(**env)
    other: Server | None = servers(**env) if replicas else None
    request_id = f"an-{uuid4().hex}"  # a Postgres database outlives the test
    before = _kill_while_searching(driver, request_id)
    # a restarted server on the same sqlite database takes the run over at start-up; a replica,
    # as soon as its watcher sees the driver's process is gone
    taken = take_over(other or servers(**env), request_id, before)
    events, rest, traced, values = taken.events, taken.rest, taken.traced, taken.values
    # the checkpoint right before the tool
    assert _where(taken.crashed) == _where(taken.resumed) == DECIDED_TO_SEARCH
    interrupted = before[-1]
    assert isinstance(interrupted, ToolCall) and interrupted.name == "search_files"
    assert (
        taken.resumed.replaces_from_seq == interrupted.seq
    )  # the interrupted call is dropped, nothing before
    kept = _kept(events)
    assert _progress(kept) == _progress(in_process.events)
    executed = _check_tools_ran_once(kept)
    # Over the whole request: the search that never returned is the same call made again, under its
    # execution id (a call that had finished would be replayed by it, not run); each tool returned once.
    calls, results = tool_events(events)
    assert [e.name for e in calls] == ["search_files", *TOOLS] and [e.name for e in results] == TOOLS
    assert Counter(e.execution_id for e in calls) == Counter([interrupted.execution_id, *executed])
    assert interrupted.execution_id == executed[0]
    assert [e.name for e in rest if isinstance(e, ToolCall)] == TOOLS
    # the trace records a call along with its event: the interrupted one too
    assert traced == ["search_files", *TOOLS] and traced.count("read_file") == 1
    final = events[-1]
    assert isinstance(final, Final) and in_process.final is not None
    assert final.answer == in_process.final.answer
    _check_logs(values, executed, final.answer)  # the interrupted execution left nothing in the logs
