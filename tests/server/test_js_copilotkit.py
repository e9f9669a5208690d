"""``@copilotkit/runtime`` (the version pinned in tests/js): the runtime of docs/clients.md
(tests/js/examples/copilotkit-runtime.mjs) runs as its own Node server pointed at ``phasegraph serve``, with
each protocol as a ``LangGraphAgent`` (phasegraph's LangGraph API) and as an AG-UI ``HttpAgent``; it is
driven as CopilotKit's frontend drives it (tests/js/copilotkit.mjs: an AG-UI ``HttpAgent`` posting to the
runtime's ``/agent/{name}/run``), two turns on one thread through each adapter; and, pointed at a server
whose model calls a tool that waits for approval, both adapters answer that approval
(tests/js/copilotkit-approval.mjs)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from tests.processes import Process, answers, free_port, running
from tests.server.conftest import demo_server
from tests.server.js import JS, NODE, QUIET, SECOND, Report, installed, run_script
from tests.server.test_ag_ui_approval import approval_server
from tests.server.test_js_sdk import FIRST

#: triggered_phase, and the planner (whose follow-up turns once failed everywhere).
PROTOCOLS = ("triggered_phase", "planner")
AGENTS = [(name, protocol) for protocol in PROTOCOLS for name in (protocol, f"{protocol}-ag-ui")]


@pytest.fixture(scope="module")
def runtime(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The CopilotKit runtime's endpoint, its agents on a demo ``phasegraph serve``."""
    installed()
    with demo_server(tmp_path_factory, "js-copilotkit") as server:
        port = free_port()
        log = tmp_path_factory.mktemp("copilotkit-runtime") / "runtime.log"
        env = {**QUIET, "PHASEGRAPH_URL": server.url, "PORT": str(port)}
        endpoint = f"http://127.0.0.1:{port}/api/copilotkit"
        runtime = Process([NODE, "examples/copilotkit-runtime.mjs"], log, env=env, cwd=JS)
        with running(runtime, answers(f"{endpoint}/info")):
            yield endpoint


@contextmanager
def _runtime(phasegraph: str, folder: Path) -> Iterator[str]:
    """The CopilotKit runtime of docs/clients.md on its own port, its agents on ``phasegraph``."""
    port = free_port()
    env = {**QUIET, "PHASEGRAPH_URL": phasegraph, "PORT": str(port)}
    endpoint = f"http://127.0.0.1:{port}/api/copilotkit"
    runtime = Process([NODE, "examples/copilotkit-runtime.mjs"], folder / "runtime.log", env=env, cwd=JS)
    with running(runtime, answers(f"{endpoint}/info")):
        yield endpoint


@pytest.fixture(scope="module")
def approvals(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Report, str]]:
    """Both adapters answering an approval (approve, edit, reject) through the runtime; the server's URL."""
    installed()
    folder = tmp_path_factory.mktemp("copilotkit-approval")
    server = approval_server(folder).start()
    try:
        with _runtime(server.url, folder) as endpoint:
            yield run_script("copilotkit-approval.mjs", endpoint), server.url
    finally:
        server.stop()


@pytest.fixture(scope="module")
def report(runtime: str) -> Report:
    return run_script("copilotkit.mjs", runtime, *PROTOCOLS)


def test_the_runtime_lists_every_protocol_through_both_adapters(runtime: str) -> None:
    agents = httpx.get(f"{runtime}/info", timeout=10).json()["agents"]
    protocols = ("triggered_phase", "unified", "goal_pursuit", "agent_network", "xml_contract", "planner")
    assert set(agents) == {name for p in protocols for name in (p, f"{p}-ag-ui")}


@pytest.mark.parametrize(("agent", "protocol"), AGENTS)
def test_two_turns_through_the_runtime(report: Report, agent: str, protocol: str) -> None:
    previous: list[dict[str, str]] = []
    for number in (1, 2):
        turn = report.ok(f"{agent}.turn{number}")
        assert turn["errors"] == [] and turn["outcome"] == "success", (turn["errors"], turn["outcome"])
        assert turn["texts"] and turn["texts"][-1], turn["types"]
        assert turn["tool_calls"], "no tool call reached the frontend"
        messages = turn["messages"]
        assert [m["text"] for m in messages if m["type"] == "user"] == [FIRST[protocol], SECOND][:number]
        assert messages[: len(previous)] == previous  # turn 1 stays as the frontend showed it
        assert messages[-1]["type"] == "assistant" and messages[-1]["text"] == turn["texts"][-1]
        assert any(m["type"] == "tool" for m in messages[len(previous) :])
        previous = messages


@pytest.mark.parametrize("agent", ["triggered_phase", "triggered_phase-ag-ui"])
@pytest.mark.parametrize(
    ("answer", "output"),
    [("approve", "archived (tidy up)"), ("edit", "archived (only the old drafts)"), ("reject", None)],
)
def test_both_adapters_answer_an_approval(
    approvals: tuple[Report, str], agent: str, answer: str, output: str | None
) -> None:
    report, server = approvals
    asked = report.ok(f"{agent}.{answer}.asked")
    assert asked["errors"] == [] and asked["tool_results"] == []
    [question] = asked["interrupts"] or asked["on_interrupt"]  # the LangGraph adapter's legacy event
    call = question["call"] if "call" in question else question["metadata"]["call"]
    assert call["name"] == "archive_everything" and call["args"] == {"reason": "tidy up"}
    answered = report.ok(f"{agent}.{answer}.answered")
    assert answered["errors"] == [] and answered["interrupts"] == [] and answered["on_interrupt"] == []
    assert answered["messages"][-1]["text"] == "Done."
    runs = httpx.get(f"{server}/threads/{answered['thread_id']}/runs", timeout=10).json()
    trace = httpx.get(f"{server}/api/requests/{runs[0]['run_id']}/trace", timeout=10).json()
    [ran] = [entry["details"] for entry in trace if entry["type"] == "tool_result"]
    assert ran["output"] == output  # what the tool did (a rejected call never ran)
