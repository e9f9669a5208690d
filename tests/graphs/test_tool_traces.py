"""A tool call's trace entry is written before its event, in every protocol.

The server stores each event together with the trace entries written before it, so this order is
what keeps a call in ``/trace`` when the server is killed while the tool runs and the event log
already shows the call (``tests/server/test_finished_calls.py`` kills one).
"""

import contextlib
from typing import Any, TypedDict

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph

from phasegraph.graphs.run import stream_run
from phasegraph.nodes.context import RunContext
from phasegraph.nodes.emit import TRACE_KEY, Emitter
from phasegraph.nodes.events import ToolCall, ToolResultEvent
from phasegraph.nodes.tool_calls import execute_tool_call
from phasegraph.nodes.trace import MemoryTraceStore
from phasegraph.tools import ToolRegistry, ToolResult
from tests.graphs.test_xml_contract import TASK


class Counter(TypedDict):
    n: int


PROTOCOLS = ["triggered_phase", "planner", "unified", "agent_network", "goal_pursuit", "xml_contract"]


@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_every_tool_call_and_result_is_traced_before_its_event(protocol: str):
    traces = MemoryTraceStore()
    seen = 0
    async for event in stream_run(protocol, TASK, traces=traces):  # the protocol's offline demo
        if isinstance(event, ToolCall | ToolResultEvent):
            kind = "tool_call" if isinstance(event, ToolCall) else "tool_result"
            traced = [t.details["call_id"] for t in traces.get(event.request_id) if t.type == kind]
            assert event.call_id in traced, f"{event.type} {event.call_id} was shown before it was traced"
            seen += 1
    assert seen >= 4  # the demo calls tools


async def test_a_call_finished_before_a_crash_is_replayed_and_traced_again(tmp_path):
    # A step that finished a call and then died (as a killed server does) runs again from the same
    # checkpoint: the call is not run again, and the trace gets it again, marked, for the trace
    # entries of the first attempt may have died with the server before they were stored.
    ran: list[str] = []
    attempts: list[int] = []

    async def tool() -> ToolResult:
        ran.append("t")
        return ToolResult(status="ok", output="done")

    async def step(state: dict[str, Any]) -> dict[str, Any]:
        context = RunContext(workspace=str(tmp_path))
        call = {"id": "call-1", "name": "t", "args": {}}
        await execute_tool_call(context, Emitter(context), ToolRegistry(), call, "t()", invoke=tool)
        attempts.append(1)
        if len(attempts) == 1:
            raise RuntimeError("died after the call finished")
        return {"n": 1}

    builder: StateGraph[Any] = StateGraph(Counter)
    builder.add_node("step", step)
    builder.add_edge(START, "step")
    builder.add_edge("step", END)
    graph = builder.compile(checkpointer=InMemorySaver())
    config: Any = {"configurable": {"thread_id": "t"}}

    async def traced(graph_input: Any) -> list[dict[str, Any]]:
        entries = []
        with contextlib.suppress(RuntimeError):
            async for chunk in graph.astream(graph_input, config, stream_mode="custom"):
                if TRACE_KEY in chunk:
                    entries.append(chunk[TRACE_KEY])
        return entries

    first = await traced({"n": 0})
    again = await traced(None)
    assert ran == ["t"] and len(attempts) == 2
    assert [(e["type"], e["details"].get("replayed")) for e in first] == [
        ("tool_call", None),
        ("tool_result", None),
    ]
    assert [(e["type"], e["details"].get("replayed")) for e in again] == [
        ("tool_call", True),
        ("tool_result", True),
    ]
    assert again[1]["details"]["output"] == "done"
