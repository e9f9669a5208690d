"""A tool call's trace entry is written before its event, in every protocol.

The server stores each event together with the trace entries written before it, so this order is
what keeps a call in ``/trace`` when the server is killed while the tool runs and the event log
already shows the call (``tests/server/test_finished_calls.py`` kills one).
"""

import pytest

from phasegraph.graphs.run import stream_run
from phasegraph.nodes.events import ToolCall, ToolResultEvent
from phasegraph.nodes.trace import MemoryTraceStore
from tests.graphs.test_xml_contract import TASK

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
