"""``@ag-ui/client``'s ``HttpAgent`` (tests/js/ag-ui.mjs, the version pinned in tests/js) against
``/ag-ui/{protocol}``: one agent per protocol holds a two-run conversation (the second run carries the
state and messages the first left, as the client always sends them), its messages are AG-UI messages a
chat UI renders (MESSAGES_SNAPSHOT, no LangChain-serialised state), and a run paused through the pause
route ends with the interrupt outcome, is resumed with ``resume``, and the chat goes on after it."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.server.conftest import demo_server
from tests.server.js import PROTOCOLS, SECOND, Report, run_script
from tests.server.test_js_sdk import FIRST


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Report]:
    with demo_server(tmp_path_factory, "js-ag-ui") as server:
        yield run_script("ag-ui.mjs", server.url)


def _finished(run: dict[str, Any]) -> None:
    assert run["errors"] == [] and run["outcome"] == "success", (run["errors"], run["outcome"])
    assert run["types"][0] == "RUN_STARTED" and run["types"][-1] == "RUN_FINISHED", run["types"]


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_two_runs_on_one_agent(report: Report, protocol: str) -> None:
    first = report.ok(f"{protocol}.run1")
    second = report.ok(f"{protocol}.run2")
    for run in (first, second):
        _finished(run)
        assert run["texts"] and run["texts"][-1], "no answer streamed as text"
        assert "MESSAGES_SNAPSHOT" in run["types"] and "STATE_DELTA" in run["types"], run["types"]
        assert not run["state_has_lc_messages"], "the state carries LangChain-serialised messages"
        assert run["pending_interrupts"] == []
    users = [m["text"] for m in second["messages"] if m["type"] == "user"]
    assert users == [FIRST[protocol], SECOND]  # each user message once, in order
    assert second["messages"][-1]["type"] == "assistant" and second["messages"][-1]["text"]
    assert second["messages"][: len(first["messages"])] == first["messages"]


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_tool_calls_are_assistant_tool_calls_with_tool_results(report: Report, protocol: str) -> None:
    messages = report.ok(f"{protocol}.run1")["messages"]
    calls = [name for m in messages if m["type"] == "assistant" for name in m["tool_calls"]]
    results = [m for m in messages if m["type"] == "tool"]
    assert calls and len(results) == len(calls), messages
    assert not any(m["type"] == "user" and "<result" in m["text"] for m in messages)


def test_a_paused_run_is_resumed_by_the_next_run_and_the_chat_goes_on(report: Report) -> None:
    paused = report.ok("pause.run")
    assert paused["outcome"] == "interrupt", paused
    [interrupt] = paused["interrupts"]
    assert interrupt == {"id": f"pause:{paused['run_id']}", "reason": "paused"}
    assert paused["pending_interrupts"] == [interrupt["id"]]

    resumed = report.ok("pause.resume")
    _finished(resumed)
    assert resumed["run_id"] == paused["run_id"]  # the same request goes on
    assert resumed["texts"][-1].startswith("The roadmap has two milestones.")
    assert resumed["pending_interrupts"] == []

    followup = report.ok("pause.followup")
    _finished(followup)
    users = [m["text"] for m in followup["messages"] if m["type"] == "user"]
    assert users == [FIRST["triggered_phase"], SECOND]
