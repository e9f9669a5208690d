"""xml_contract over real HTTP: the server streams it with no code of its own for the protocol.

SSE frames are parsed back into the event union; the offline demo (a ``<parallel>`` block of two
read_file calls, then a ``<sequential>`` calculate -> slow_echo whose second step reads the first
one's output, then a final answer) runs on the bundled demo MCP server, started over stdio for each
run. Killed mid-block, it is taken over by a restarted server or a replica, and no block that
completed ever runs again. The same demo runs on the demo server reached over streamable HTTP, and
beside a service that is down. The tests every protocol shares (replayed, paused after each block and
resumed, moved between replicas, cancelled, forked) are in test_protocol_runs.py, on this module's
demo and helpers.
"""

import asyncio
import json
import os
import sys
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from uuid import uuid4

import httpx
import pytest

from phasegraph.graphs.run import RunResult, run
from phasegraph.nodes.dataset import read_lines
from phasegraph.nodes.events import (
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


def reference_run(dataset: Path) -> RunResult:
    """The demo run in this process, with no server: what every stream of it must reproduce."""
    return asyncio.run(
        run(
            "xml_contract",
            TASK,
            workspace=str(DEMO_WORKSPACE),
            dataset_dir=str(dataset),
            traces=MemoryTraceStore(),
        )
    )


@pytest.fixture(scope="module")
def in_process(tmp_path_factory: pytest.TempPathFactory) -> RunResult:
    return reference_run(tmp_path_factory.mktemp("in-process-dataset"))


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


def _iterations(dataset: Path, request_id: str) -> list[int]:
    """The iterations a request logged as training data (one line each, written once its blocks ran)."""
    return [
        line["iteration"]
        for line in read_lines(dataset, protocol="xml_contract")
        if line["request_id"] == request_id
    ]


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
