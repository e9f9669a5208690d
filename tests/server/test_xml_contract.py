"""xml_contract over real HTTP: the server streams it with no code of its own for the protocol.

SSE frames are parsed back into the event union; the offline demo (a ``<parallel>`` block of two
read_file calls, then a ``<sequential>`` calculate -> slow_echo whose second step reads the first
one's output, then a final answer) runs on the bundled demo MCP server, started over stdio for each
run. It is paused after each block, resumed, killed mid-block and taken over by a restarted server
or a replica, cancelled, replayed and forked, and no block that completed ever runs again. The same
demo runs on the demo server reached over streamable HTTP, and beside a service that is down.
"""

import asyncio
import json
import os
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from uuid import uuid4

import httpx
import pytest

from phasegraph.graphs.run import RunResult, run
from phasegraph.nodes.dataset import read_lines
from phasegraph.nodes.events import (
    Cancelled,
    Event,
    Final,
    Paused,
    Resumed,
    ToolCall,
    ToolResultEvent,
    ValidationErrorEvent,
    XmlBlock,
)
from phasegraph.nodes.models import DEMO_WORKSPACE
from phasegraph.nodes.trace import MemoryTraceStore
from tests.graphs.test_xml_contract import TASK, echo
from tests.helpers import turn, write_script
from tests.processes import Process, free_port, listens, running
from tests.server.conftest import Server, demo_server, needs_postgres, read_sse, stream
from tests.server.pausing import (
    WAIT_SECONDS,
    PausingDemo,
    check_resumes,
    latest_values,
    take_over,
    tool_events,
    tools_traced,
    wait_for_checkpoint,
)
from tests.server.test_crash_recovery import _kept

RUN = "/api/runs/xml_contract/stream"
#: The folder holding the ``tools`` package: where ``python -m phasegraph.tools.mcp.demo_server`` runs.
PROJECT_ROOT = Path(__file__).resolve().parents[2]
#: The demo's calls as (tool event name, group, step index), in the order they are called.
CALLS = [
    ("demo.read_file", "1.1", 1),
    ("demo.read_file", "1.1", 2),
    ("demo.calculate", "2.1", 1),
    ("demo.slow_echo", "2.1", 2),
]
TOOLS = [name for name, _, _ in CALLS]
#: The demo's events, in order: propose, run the parallel block, propose, run the sequential
#: block, propose the answer. (The two parallel results come in the order the reads finish.)
DEMO_KINDS = [
    "phase_start", "phase_end",  # action phase 1: the model writes the parallel block
    "phase_start", "xml_block", "tool_call", "tool_call", "tool_result", "tool_result", "phase_end",
    "phase_start", "phase_end",  # action phase 3: the sequential block
    "phase_start", "xml_block", "tool_call", "tool_result", "tool_call", "tool_result", "phase_end",
    "phase_start", "phase_end", "final",  # action phase 5: "Final Answer:"
]  # fmt: skip
#: How many of the demo's events the first block's tool phase ends.
FIRST_BLOCK_DONE = 9
#: The demo's pause points in order, as (node, phase index): after each block ran.
EVERY_PAUSE_POINT = [("execute_blocks", 2), ("execute_blocks", 4)]
#: The node behind each checkpoint of the demo's timeline (None: the input).
TIMELINE = [
    None, "__start__", "start_turn",
    "propose_action", "execute_blocks",
    "propose_action", "execute_blocks",
    "propose_action", "finish_turn",
]  # fmt: skip
#: The sequential step whose argument names the first step's output, before and after substitution.
PLACEHOLDER_ARGS = {"text": "$result_of_step_1 people work on the project", "ms": 50}
SUBSTITUTED_ARGS = {"text": "3 people work on the project", "ms": 50}
#: The slow script: a single read, then a sequential block whose second step sleeps this long.
SLOW_ECHO_MS = 3000
SLOW_KINDS = [
    "phase_start", "phase_end",
    "phase_start", "xml_block", "tool_call", "tool_result", "phase_end",  # the single read_file
    "phase_start", "phase_end",
    "phase_start", "xml_block", "tool_call", "tool_result", "tool_call", "tool_result", "phase_end",
    "phase_start", "phase_end", "final",
]  # fmt: skip
SLOW_CALLS = [("demo.read_file", "1.1", 1), ("demo.calculate", "2.1", 1), ("demo.slow_echo", "2.1", 2)]
SLOW_ANSWER = "3 people work on the project."
#: Where the slow script is once the model proposed its slow block (the checkpoint before it).
PROPOSED_SLOW_BLOCK = ("action_phase", 3, 1)

#: What the command line of a stdio demo MCP server holds.
DEMO_SERVICE = b"phasegraph.tools.mcp.demo_server"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """One server for the tests that need nothing but the default settings (each start costs seconds)."""
    dataset = tmp_path_factory.mktemp("xml-contract-dataset")
    with demo_server(tmp_path_factory, "xml-contract", PHASEGRAPH_DATASET_DIR=str(dataset)) as started:
        yield started


@pytest.fixture(scope="module")
def in_process(tmp_path_factory: pytest.TempPathFactory) -> RunResult:
    """The demo run in this process, with no server: what every stream below must reproduce."""
    dataset = tmp_path_factory.mktemp("in-process-dataset")
    return asyncio.run(
        run(
            "xml_contract",
            TASK,
            workspace=str(DEMO_WORKSPACE),
            dataset_dir=str(dataset),
            traces=MemoryTraceStore(),
        )
    )


def _body(request_id: str, **extra: Any) -> dict[str, Any]:
    return {"message": TASK, "projectId": "proj", "requestId": request_id, **extra}


def _where(event: Event) -> tuple[Any, ...]:
    """An event's place in the run: phase, phase index, blocks iterations run so far."""
    return (event.phase, event.phase_index, event.step)


def _progress(events: list[Event]) -> list[tuple[Any, ...]]:
    """What the protocol emitted, and where: the events the server adds (paused, resumed) left out.

    A call's block is part of it; its step index is not, since a parallel block's results come in
    the order its calls finish.
    """
    return [
        (e.type, *_where(e), getattr(e, "group", None)) for e in events if not isinstance(e, Paused | Resumed)
    ]


def _stopped_after(segment: list[Event]) -> tuple[str, int]:
    """The pause point a paused segment stopped at, told by the protocol's last event before ``paused``."""
    last = segment[-2]
    assert last.type == "phase_end" and last.phase == "tool_phase" and last.phase_index is not None, last
    return "execute_blocks", last.phase_index


def _check_tools_ran_once(events: list[Event], expected: list[tuple[str, str, int]] = CALLS) -> None:
    """Each call ran once, under its block and step: calls in block order, results as they finished."""
    calls, results = tool_events(events)
    assert [(e.name, e.group, e.step_index) for e in calls] == expected
    assert [e.call_id for e in calls] == [f"{group}.{index}" for _, group, index in expected]
    assert Counter((e.name, e.group, e.step_index) for e in results) == Counter(expected)
    assert Counter(e.call_id for e in results) == Counter(e.call_id for e in calls)
    assert {e.status for e in results} == {"ok"}
    assert not [e for e in events if e.type == "duplicate_tool_call"]


def _check_resumed_without_repeats(segments: list[list[Event]], in_process: RunResult) -> None:
    """Each resume continues seq and the protocol's events, and no tool runs twice."""
    events = check_resumes(segments, _where)
    assert _progress(events) == _progress(in_process.events)
    _check_tools_ran_once(events)
    final = events[-1]
    assert isinstance(final, Final) and in_process.final is not None
    assert final.answer == in_process.final.answer


DEMO = PausingDemo(RUN, _body, EVERY_PAUSE_POINT, _stopped_after)


def _transcript(values: dict[str, Any], field: str = "transcript") -> list[tuple[str, str]]:
    """What the model read (or, with ``messages``, the chat) as (type, text), serialised by LangChain."""
    return [(m["kwargs"]["type"], m["kwargs"]["content"]) for m in values[field]]


def _checkpoint_values(client: httpx.Client, thread_id: str, checkpoint_id: str) -> dict[str, Any]:
    answer = client.get(f"/api/threads/{thread_id}/checkpoints/{checkpoint_id}").json()
    assert answer["checkpointId"] == checkpoint_id
    values: dict[str, Any] = answer["values"]
    return values


def _iterations(dataset: Path, request_id: str) -> list[int]:
    """The iterations a request logged as training data (one line each, written once its blocks ran)."""
    return [
        line["iteration"]
        for line in read_lines(dataset, protocol="xml_contract")
        if line["request_id"] == request_id
    ]


def _wait_for(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + WAIT_SECONDS
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.05)


def _slow_script(directory: Path) -> str:
    """A single read, then calculate -> a slow_echo of a few seconds, then the answer."""
    directory.mkdir(exist_ok=True)
    sequential = "<sequential>" + "<demo><calculate>2 + 1</calculate></demo>"
    sequential += echo("$result_of_step_1 people work on the project", SLOW_ECHO_MS) + "</sequential>"
    return write_script(
        directory,
        turn("<demo><read_file>docs/team.md</read_file></demo>\n<execute_tools />"),
        turn(f"<think>Count them, slowly.</think>\n{sequential}\n<execute_tools />"),
        turn(f"Final Answer: {SLOW_ANSWER}"),
    )


def _kill_in_slow_block(server: Server, request_id: str) -> list[Event]:
    """Start the slow script and SIGKILL its server while the slow_echo of its second block sleeps.

    The kill waits for the proposal of that block to be saved, so the run is taken over from the
    checkpoint right before the block: the block runs again, its finished first step from its record.
    """
    seen: list[Event] = []
    with (
        httpx.Client(base_url=server.url) as client,
        client.stream("POST", RUN, json=_body(request_id), timeout=60) as response,
    ):

        def on_event(event: Event) -> None:
            seen.append(event)
            if isinstance(event, ToolCall) and event.name == "demo.slow_echo":
                wait_for_checkpoint(client, request_id, "propose_action", 3)
                assert len(server.children(DEMO_SERVICE)) == 1  # the run's own stdio demo server
                server.kill()

        with pytest.raises(httpx.HTTPError):  # the connection dies with the server
            read_sse(response, on_event=on_event)
    assert server.process is not None and server.process.returncode is not None
    assert [e.type for e in seen] == SLOW_KINDS[:14]  # slow_echo was called and never returned
    return seen


@contextmanager
def _http_demo_server(log: Path) -> Iterator[str]:
    """The bundled demo MCP server over streamable HTTP on a free port; yields its MCP URL."""
    port = free_port()
    command = [sys.executable, "-m", "phasegraph.tools.mcp.demo_server", "--transport", "streamable-http"]
    command += ["--port", str(port), "--root", str(DEMO_WORKSPACE)]
    with running(Process(command, log, cwd=PROJECT_ROOT), listens(port)):
        yield f"http://127.0.0.1:{port}/mcp"


def _check_demo(events: list[Event], in_process: RunResult) -> None:
    """A whole demo stream: the protocol's events in its order, each call once, the same answer."""
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    assert [e.type for e in events] == DEMO_KINDS
    assert _progress(events) == _progress(in_process.events)
    _check_tools_ran_once(events)
    blocks = [e for e in events if isinstance(e, XmlBlock)]
    assert [(b.kind, b.group, b.step) for b in blocks] == [("parallel", "1.1", 1), ("sequential", "2.1", 2)]
    calls, _ = tool_events(events)
    assert calls[3].args == SUBSTITUTED_ARGS  # $result_of_step_1 replaced by calculate's output
    final = events[-1]
    assert isinstance(final, Final) and in_process.final is not None
    assert final.answer == in_process.final.answer


def test_the_demo_streams_its_two_blocks_in_order_to_one_final(server: Server, in_process: RunResult):
    with httpx.Client(base_url=server.url) as client:
        listed = {p["id"]: (p["seed"], p["route"]) for p in client.get("/api/protocols").json()}
        events = stream(client, "POST", RUN, json=_body("xc-demo"))
        status = client.get("/api/requests/xc-demo").json()
        traced = tools_traced(client, "xc-demo")
        values = latest_values(client, "xc-demo")
    assert listed["xml_contract"] == ("004", RUN)
    assert (status["status"], status["protocol"], status["lastSeq"]) == ("completed", "xml_contract", 21)
    assert status["model"] == "scripted:demo"
    assert {(e.request_id, e.project_id, e.protocol) for e in events} == {("xc-demo", "proj", "xml_contract")}
    # exactly the protocol's own events, in its order: the server adds and changes nothing
    _check_demo(events, in_process)
    phases = [(e.phase, e.phase_index, e.step) for e in events if e.type == "phase_start"]
    assert phases == [
        ("action_phase", 1, 0), ("tool_phase", 2, 1), ("action_phase", 3, 1), ("tool_phase", 4, 2),
        ("action_phase", 5, 2),
    ]  # fmt: skip
    assert [e.reason for e in events if e.type == "phase_end"] == ["proposed", "executed"] * 2 + ["proposed"]
    blocks = [e for e in events if isinstance(e, XmlBlock)]
    assert blocks[0].steps == [
        {"service": "demo", "tool": "read_file", "args": {"path": "docs/roadmap.md"}},
        {"service": "demo", "tool": "read_file", "args": {"path": "docs/team.md"}},
    ]
    assert blocks[1].steps == [
        {"service": "demo", "tool": "calculate", "args": {"expression": "1 + 1 + 1"}},
        {"service": "demo", "tool": "slow_echo", "args": PLACEHOLDER_ARGS},  # the block as proposed
    ]
    calls, results = tool_events(events)
    assert [c.args for c in calls[:3]] == [
        {"path": "docs/roadmap.md"},
        {"path": "docs/team.md"},
        {"expression": "1 + 1 + 1"},
    ]
    assert all(_where(e) == ("tool_phase", 2, 1) for e in events[2:FIRST_BLOCK_DONE])
    # the sequential block runs step by step: each result before the next call
    assert [(e.type, e.step_index) for e in events[13:17]] == [
        ("tool_call", 1), ("tool_result", 1), ("tool_call", 2), ("tool_result", 2)
    ]  # fmt: skip
    assert all("output" not in e.to_dict() for e in results)  # the client did not ask for outputs
    assert not [e for e in events if isinstance(e, ValidationErrorEvent)]
    final = events[-1]
    assert isinstance(final, Final) and _where(final) == ("action_phase", 5, 2)
    assert not final.all_tools_failed and "3 people work on the project" in final.answer
    assert traced == TOOLS
    # the conversation the model read: the task, then per block its XML and the results
    chat = _transcript(values, "messages")  # the chat: the task, per iteration its calls and how they ended
    assert [kind for kind, _ in chat] == ["human", "ai", "tool", "tool", "ai", "tool", "tool", "ai"]
    assert chat[-1] == ("ai", final.answer) and not any("<result" in text for _, text in chat)
    conversation = _transcript(values)
    assert [kind for kind, _ in conversation] == ["human", "ai", "human", "ai", "human", "ai"]
    first_results, second_results = conversation[2][1], conversation[4][1]
    assert first_results.count("<result ") == 2 and "Milestone 1" in first_results
    assert "Linus: streaming server" in first_results
    assert second_results.endswith(
        '<result step="2" service="demo" tool="slow_echo" status="ok">3 people work on the project</result>'
    )
    assert (values["steps"], values["answer"]) == (2, final.answer)


def test_last_event_id_replays_what_was_missed_without_repeats(server: Server):
    with httpx.Client(base_url=server.url) as client:
        body = _body("xc-replay", onDisconnect="continue", showToolOutputs=True)
        head = stream(client, "POST", RUN, json=body, stop_after="xml_block")  # then drop the connection
        follow = "/api/requests/xc-replay/stream"
        rest = stream(client, "GET", follow, headers={"Last-Event-ID": str(head[-1].seq)})
        everything = stream(client, "GET", follow)
        nothing_after = {"Last-Event-ID": str(everything[-1].seq)}
        assert stream(client, "GET", follow, headers=nothing_after) == []
        middle = stream(client, "GET", follow, headers={"Last-Event-ID": "12"})
        past_the_end = client.get(follow, headers={"Last-Event-ID": str(everything[-1].seq + 1)})
    assert [e.type for e in head] == DEMO_KINDS[:4]
    events = head + rest
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    assert [e.to_json() for e in everything] == [e.to_json() for e in events]
    assert [e.to_json() for e in middle] == [e.to_json() for e in events[12:]]
    assert [e.type for e in events] == DEMO_KINDS
    _check_tools_ran_once(events)
    outputs = {e.call_id: e.output for e in events if isinstance(e, ToolResultEvent)}
    assert outputs["1.1.1"] is not None and "Milestone 1" in outputs["1.1.1"]
    assert outputs["1.1.2"] is not None and "Linus: streaming server" in outputs["1.1.2"]
    assert (outputs["2.1.1"], outputs["2.1.2"]) == ("3", SUBSTITUTED_ARGS["text"])
    assert past_the_end.status_code == 409 and "Last-Event-ID" in past_the_end.json()["message"]


def test_pausing_after_every_block_then_resuming_runs_each_call_once(server: Server, in_process: RunResult):
    with httpx.Client(base_url=server.url) as client:
        segments = DEMO.pause_and_replay(client, "xc-pause", TOOLS)
        values = latest_values(client, "xc-pause")
    _check_resumed_without_repeats(segments, in_process)
    paused = [segment[-1] for segment in segments[:-1]]
    assert all(isinstance(p, Paused) and p.reason == "requested" for p in paused)
    events = [e for segment in segments for e in segment]
    calls, _ = tool_events(events)
    assert calls[3].args == SUBSTITUTED_ARGS  # substituted from a result read back from the checkpoint
    assert [segment[0].type for segment in segments[1:]] == ["resumed"] * (len(segments) - 1)
    assert values["steps"] == 2 and len(_transcript(values)) == 6  # no block answered twice
    assert len(_transcript(values, "messages")) == 8  # nor any call in the chat
    # each segment closed the demo server it started
    _wait_for(lambda: not server.children(DEMO_SERVICE), "a demo MCP server outlived its run")


@pytest.mark.parametrize("taken_over_by", ["restarted server", pytest.param("replica", marks=needs_postgres)])
def test_a_run_killed_mid_block_is_taken_over_and_repeats_only_that_block(
    servers, tmp_path: Path, taken_over_by: str
):
    dataset = tmp_path / "dataset"
    env = {"PHASEGRAPH_MODEL": _slow_script(tmp_path / "slow"), "PHASEGRAPH_DATASET_DIR": str(dataset)}
    replicas = taken_over_by == "replica"
    if replicas:  # two replicas on the test Postgres: the other one is up before the kill
        env["PHASEGRAPH_CHECKPOINTER"] = os.environ["PHASEGRAPH_TEST_POSTGRES_URL"]
    driver = servers(**env)
    other: Server | None = servers(**env) if replicas else None
    request_id = f"xc-{uuid4().hex}"  # a Postgres database outlives the test
    before = _kill_in_slow_block(driver, request_id)
    assert _iterations(dataset, request_id) == [1]  # the interrupted block logged nothing
    # a restarted server on the same sqlite database takes the run over at start-up; a replica,
    # as soon as its watcher sees the driver's process is gone
    taken = take_over(other or servers(**env), request_id, before)
    events, rest, traced, values = taken.events, taken.rest, taken.traced, taken.values
    # the checkpoint right before the block
    assert _where(taken.crashed) == _where(taken.resumed) == PROPOSED_SLOW_BLOCK
    interrupted = before[-1]
    assert isinstance(interrupted, ToolCall) and interrupted.name == "demo.slow_echo"
    block_start = before[SLOW_KINDS.index("xml_block", 4) - 1]
    assert (block_start.type, *_where(block_start)) == ("phase_start", "tool_phase", 4, 2)
    # the interrupted tool phase is dropped from its start (its calculate too), nothing before it
    assert taken.resumed.replaces_from_seq == block_start.seq
    kept = _kept(events)
    assert [e.type for e in kept if not isinstance(e, Paused | Resumed)] == SLOW_KINDS
    _check_tools_ran_once(kept, SLOW_CALLS)
    # Over the whole request: the block's re-run shows both of its calls again, but only the one the
    # kill interrupted runs again (calculate's recorded result is handed back); read_file never again.
    calls, results = tool_events(events)
    assert [e.name for e in calls] == ["demo.read_file", *(["demo.calculate", "demo.slow_echo"] * 2)]
    assert [e.name for e in results] == [
        "demo.read_file",
        "demo.calculate",
        "demo.calculate",
        "demo.slow_echo",
    ]
    assert [(e.name, e.args) for e in rest if isinstance(e, ToolCall)] == [
        ("demo.calculate", {"expression": "2 + 1"}),
        ("demo.slow_echo", {"text": "3 people work on the project", "ms": SLOW_ECHO_MS}),
    ]
    # the trace records a call along with its event: the interrupted one too, calculate only once
    assert traced == ["demo.read_file", "demo.calculate", "demo.slow_echo", "demo.slow_echo"]
    final = events[-1]
    assert isinstance(final, Final) and final.answer == SLOW_ANSWER
    assert _iterations(dataset, request_id) == [1, 2]  # each iteration logged once
    conversation = _transcript(values)
    assert [kind for kind, _ in conversation] == ["human", "ai", "human", "ai", "human", "ai"]
    assert conversation[4][1].count("<result ") == 2  # the re-run block answered once
    chat = [kind for kind, _ in _transcript(values, "messages")]
    assert chat == ["human", "ai", "tool", "ai", "tool", "tool", "ai"]  # and each of its calls once


@needs_postgres
def test_two_replicas_take_turns_at_every_pause_point(servers, in_process: RunResult, tmp_path: Path):
    env = {
        "PHASEGRAPH_CHECKPOINTER": os.environ["PHASEGRAPH_TEST_POSTGRES_URL"],
        "PHASEGRAPH_DATASET_DIR": str(tmp_path / "dataset"),
    }
    replica_a, replica_b = servers(**env), servers(**env)
    request_id = f"xc-{uuid4().hex}"
    with httpx.Client(base_url=replica_a.url) as a, httpx.Client(base_url=replica_b.url) as b:
        segments = DEMO.pause_everywhere([a, b], request_id)
        traced = [tools_traced(client, request_id) for client in (a, b)]
        replayed = [stream(client, "GET", f"/api/requests/{request_id}/stream") for client in (a, b)]
    DEMO.check_stops(segments)
    _check_resumed_without_repeats(segments, in_process)
    assert traced == [TOOLS, TOOLS]
    events = [e.to_json() for segment in segments for e in segment]
    assert [e.to_json() for e in replayed[0]] == [e.to_json() for e in replayed[1]] == events
    assert _iterations(tmp_path / "dataset", request_id) == [1, 2]


def test_cancel_ends_a_running_or_paused_run_for_good(servers, tmp_path: Path):
    server = servers(
        PHASEGRAPH_MODEL=_slow_script(tmp_path / "slow"), PHASEGRAPH_DATASET_DIR=str(tmp_path / "ds")
    )
    with httpx.Client(base_url=server.url) as client:
        asked: list[float] = []

        def cancel_mid_echo(event: Event) -> None:
            if isinstance(event, ToolCall) and event.name == "demo.slow_echo":
                assert len(server.children(DEMO_SERVICE)) == 1
                asked.append(time.monotonic())
                assert client.post("/api/requests/xc-cancel/cancel").json()["status"] == "cancelled"

        running = stream(client, "POST", RUN, json=_body("xc-cancel"), on_event=cancel_mid_echo)
        took = time.monotonic() - asked[0]
        _wait_for(lambda: not server.children(DEMO_SERVICE), "the cancelled run left its demo service")
        refused = client.post("/api/requests/xc-cancel/resume", json={})
        paused = DEMO.segment(client, "xc-cancel-paused", start=True)
        assert client.post("/api/requests/xc-cancel-paused/cancel").json()["status"] == "cancelled"
        assert client.post("/api/requests/xc-cancel-paused/cancel").status_code == 200  # idempotent
        replayed = stream(client, "GET", "/api/requests/xc-cancel-paused/stream")
        statuses = {
            client.get(f"/api/requests/{r}").json()["status"] for r in ("xc-cancel", "xc-cancel-paused")
        }
        refused_too = client.post("/api/requests/xc-cancel-paused/resume", json={})
        traced = tools_traced(client, "xc-cancel")
    assert [e.type for e in running] == [*SLOW_KINDS[:14], "cancelled"]  # slow_echo never returned
    assert took < SLOW_ECHO_MS / 1000  # the cancel did not wait for the sleeping tool
    cancelled = running[-1]
    assert isinstance(cancelled, Cancelled) and cancelled.protocol == "xml_contract"
    assert _where(cancelled) == PROPOSED_SLOW_BLOCK
    assert traced[:2] == ["demo.read_file", "demo.calculate"]
    assert statuses == {"cancelled"}
    for answer in (refused, refused_too):
        assert answer.status_code == 409 and "cancelled" in answer.json()["message"]
    assert _stopped_after(paused) == EVERY_PAUSE_POINT[0]
    cancelled = replayed[-1]
    assert [e.to_json() for e in replayed[:-1]] == [e.to_json() for e in paused]
    assert isinstance(cancelled, Cancelled) and cancelled.seq == paused[-1].seq + 1
    assert _where(cancelled) == _where(paused[-1]) == _where(paused[-2]) == ("tool_phase", 2, 1)
    assert _iterations(tmp_path / "ds", "xc-cancel") == [1]


def test_checkpoints_show_the_blocks_and_fork_after_the_first_one(server: Server, in_process: RunResult):
    with httpx.Client(base_url=server.url) as client:
        done = stream(client, "POST", RUN, json=_body("xc-cp"))
        timeline = client.get("/api/threads/xc-cp/checkpoints").json()
        executed = [c for c in timeline if c["node"] == "execute_blocks"]
        proposed = next(c for c in timeline if c["node"] == "propose_action")
        values = {
            name: _checkpoint_values(client, "xc-cp", c["checkpointId"])
            for name, c in (("executed", executed[0]), ("proposed", proposed))
        }
        forked = stream(client, "POST", f"/api/threads/xc-cp/checkpoints/{executed[0]['checkpointId']}/fork")
        forked_values = latest_values(client, "xc-cp")  # the fork's branch is the thread's newest
        from_phase = stream(client, "POST", "/api/requests/xc-cp/resume", json={"resumeFromPhaseIndex": 2})
        traced = [tools_traced(client, r) for r in ("xc-cp", forked[0].request_id)]
    assert [c["node"] for c in timeline] == TIMELINE
    assert [c["phaseIndex"] for c in timeline] == [None, None, 0, 1, 2, 3, 4, 5, 5]
    assert timeline[-1]["next"] == [] and [c["next"] for c in executed] == [["propose_action"]] * 2
    assert [c["phaseIndex"] for c in executed] == [2, 4] and proposed["next"] == ["execute_blocks"]
    after_proposal, after_block = values["proposed"], values["executed"]
    blocks = after_proposal["proposal"]["blocks"]
    assert [(b["kind"], len(b["steps"]), b["problems"]) for b in blocks] == [("parallel", 2, [])]
    assert (after_proposal["steps"], after_proposal["model_calls"]) == (0, 1)
    assert (after_block["phase"], after_block["phase_index"], after_block["steps"]) == ("tool_phase", 2, 1)
    conversation = _transcript(after_block)
    assert [kind for kind, _ in conversation] == ["human", "ai", "human"]
    assert conversation[0][1] == TASK and "Linus: streaming server" in conversation[2][1]
    final = done[-1]
    assert isinstance(final, Final)
    _check_tools_ran_once(done)
    for resumed, continued in ((forked, 1), (from_phase, done[-1].seq + 1)):
        assert isinstance(resumed[0], Resumed) and resumed[0].fork and resumed[0].seq == continued
        assert [e.seq for e in resumed] == list(range(continued, continued + len(resumed)))
        # the parallel block ran before the point they continue from and never again
        _check_tools_ran_once(resumed, CALLS[2:])
        assert _progress(resumed) == _progress(in_process.events)[FIRST_BLOCK_DONE:]
        calls, _ = tool_events(resumed)
        assert calls[1].args == SUBSTITUTED_ARGS
        assert isinstance(resumed[-1], Final) and resumed[-1].answer == final.answer
    assert forked[0].request_id != "xc-cp" and isinstance(from_phase[0], Resumed)
    assert from_phase[0].from_phase_index == 2
    assert forked_values["steps"] == 2 and len(_transcript(forked_values)) == 6  # the fork's own branch
    assert traced == [[*TOOLS, *TOOLS[2:]], TOOLS[2:]]


def test_the_demo_runs_the_same_on_the_demo_server_over_streamable_http(
    servers, tmp_path: Path, in_process: RunResult
):
    config = tmp_path / "mcp_servers.json"
    with _http_demo_server(tmp_path / "mcp.log") as url:
        config.write_text(json.dumps({"demo": {"transport": "streamable_http", "url": url, "timeout": 10}}))
        server = servers(PHASEGRAPH_MCP_CONFIG=str(config), PHASEGRAPH_DATASET_DIR=str(tmp_path / "ds"))
        with httpx.Client(base_url=server.url) as client:
            events = stream(client, "POST", RUN, json=_body("xc-http", showToolOutputs=True))
            assert not server.children(DEMO_SERVICE)  # no stdio server was started
            traced = tools_traced(client, "xc-http")
    _check_demo(events, in_process)
    assert traced == TOOLS
    outputs = {e.call_id: e.output for e in events if isinstance(e, ToolResultEvent)}
    assert outputs["1.1.2"] is not None and "Linus: streaming server" in outputs["1.1.2"]
    assert outputs["2.1.2"] == SUBSTITUTED_ARGS["text"]

    # the HTTP server is gone: the same server reaches nothing, and says so, yet still answers
    with httpx.Client(base_url=server.url) as client:
        down = stream(client, "POST", RUN, json=_body("xc-http-down"))
    assert not tool_events(down)[0] and not [e for e in down if isinstance(e, XmlBlock)]
    errors = [e for e in down if isinstance(e, ValidationErrorEvent)]
    assert [e.group for e in errors] == ["1.1", "2.1"]
    for error in errors:
        assert error.problems and all("service <demo> is unavailable" in p for p in error.problems)
    assert isinstance(down[-1], Final) and down[-1].answer == events[-1].answer  # the script's answer


def test_a_service_that_is_down_leaves_the_others_working(servers, tmp_path: Path, in_process: RunResult):
    closed = free_port()  # nothing listens here
    config = tmp_path / "mcp_servers.json"
    demo = {
        "transport": "stdio",
        "command": "${python}",
        "args": ["-m", "phasegraph.tools.mcp.demo_server", "--root", "${workspace}"],
        "cwd": str(PROJECT_ROOT),
    }
    offline = {"transport": "streamable_http", "url": f"http://127.0.0.1:{closed}/mcp", "timeout": 5}
    config.write_text(json.dumps({"demo": demo, "offline": offline}), encoding="utf-8")
    calls_offline = write_script(
        tmp_path,
        turn(
            "<demo><calculate>6 * 7</calculate></demo>\n<offline><search>roadmap</search></offline>\n"
            "<execute_tools />"
        ),
        turn("Final Answer: 42"),
    )
    server = servers(
        PHASEGRAPH_MCP_CONFIG=str(config),
        PHASEGRAPH_ALLOWED_MODELS=calls_offline,
        PHASEGRAPH_DATASET_DIR=str(tmp_path / "ds"),
    )
    with httpx.Client(base_url=server.url) as client:
        started = time.monotonic()
        demo_events = stream(client, "POST", RUN, json=_body("xc-down-demo"))
        took = time.monotonic() - started
        events = stream(client, "POST", RUN, json=_body("xc-down", model="scripted:script.json"))
        status = client.get("/api/requests/xc-down").json()
        values = latest_values(client, "xc-down")
        traced = tools_traced(client, "xc-down")
    # the demo never calls the service that is down: it runs as ever, without waiting for it
    _check_demo(demo_events, in_process)
    assert took < 15
    assert (status["status"], status["model"]) == ("completed", "scripted:script.json")
    assert [e.type for e in events] == [
        "phase_start", "phase_end", "validation_error",
        "phase_start", "xml_block", "tool_call", "tool_result", "phase_end",
        "phase_start", "phase_end", "final",
    ]  # fmt: skip
    error = next(e for e in events if isinstance(e, ValidationErrorEvent))
    assert error.group == "1.2" and _where(error) == ("action_phase", 1, 0) and len(error.problems) == 1
    assert error.problems[0].startswith("the call: service <offline> is unavailable: ")
    block = next(e for e in events if isinstance(e, XmlBlock))
    assert (block.kind, block.group, block.steps) == (
        "single", "1.1", [{"service": "demo", "tool": "calculate", "args": {"expression": "6 * 7"}}]
    )  # fmt: skip
    _check_tools_ran_once(events, [("demo.calculate", "1.1", 1)])
    assert traced == ["demo.calculate"]
    final = events[-1]
    assert isinstance(final, Final) and final.answer == "42" and not final.all_tools_failed
    # the model was told the service is down, and read both the result and why the block did not run
    assert "<offline> is unavailable" in values["proposal"]["system"]
    observation = _transcript(values)[2][1]
    assert '<result step="1" service="demo" tool="calculate" status="ok">42</result>' in observation
    assert '<result status="error">This block was not run' in observation
    assert "service &lt;offline&gt; is unavailable" in observation
