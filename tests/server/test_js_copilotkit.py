"""``@copilotkit/runtime`` (tests/js/copilotkit.mjs, the version pinned in tests/js) in-process: a v2
``CopilotRuntime`` whose agents are its ``LangGraphAgent`` pointed at phasegraph's LangGraph API and an
AG-UI ``HttpAgent`` pointed at ``/ag-ui/...``, each driven through the runtime's own handler as
CopilotKit's frontend drives it, two turns on one thread."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.server.conftest import demo_server
from tests.server.js import SECOND, Report, run_script
from tests.server.test_js_sdk import FIRST

#: triggered_phase, and the planner (whose follow-up turns once failed everywhere).
PROTOCOLS = ("triggered_phase", "planner")
AGENTS = [(f"{adapter}-{protocol}", protocol) for protocol in PROTOCOLS for adapter in ("langgraph", "ag-ui")]


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Report]:
    with demo_server(tmp_path_factory, "js-copilotkit") as server:
        yield run_script("copilotkit.mjs", server.url, *PROTOCOLS)


@pytest.mark.parametrize(("agent", "protocol"), AGENTS)
def test_two_turns_through_the_runtime(report: Report, agent: str, protocol: str) -> None:
    for number in (1, 2):
        turn = report.ok(f"{agent}.turn{number}")
        assert turn["errors"] == [] and turn["outcome"] == "success", (turn["errors"], turn["outcome"])
        assert turn["texts"] and turn["texts"][-1], turn["types"]
        assert "TOOL_CALL_START" in turn["types"], "no tool call reached the frontend"
        users = [m["text"] for m in turn["messages"] if m["type"] == "user"]
        assert users == [FIRST[protocol], SECOND][:number]
        assert turn["messages"][-1]["type"] == "assistant" and turn["messages"][-1]["text"]
