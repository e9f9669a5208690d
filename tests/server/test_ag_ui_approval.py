"""Approval before a tool runs, answered over AG-UI (``/ag-ui/{protocol}``).

A project file gives triggered_phase the Python tool ``archive_everything`` (``tests.user_tools``) with
``confirm = true``; the scripted model calls it. The run ends with ``RUN_FINISHED`` and the interrupt
outcome (the call, its arguments, why it waits); the next run's ``resume`` approves, edits or rejects
it. ``@ag-ui/client``'s ``HttpAgent`` (tests/js/ag-ui-approval.mjs) drives the three answers; the
Python client of tests/server/agui_client.py (what ``HttpAgent`` keeps and sends) drives the refusals.
Whether the tool ran, and with which arguments, is read from the server's trace (the tool's output).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from ag_ui.core import RunFinishedEvent, ToolCallResultEvent, ToolCallStartEvent

from phasegraph.nodes.models import DEMO_WORKSPACE
from tests.server.agui_client import Agent
from tests.server.conftest import Server
from tests.server.js import Report, run_script
from tests.tool_projects import write_project, write_script

ROOT = Path(__file__).resolve().parents[2]
ASK = "Archive everything, please."
PROPOSED = {"reason": "tidy up"}
WAITS = "archive_everything runs only after a person approves it (its policy says confirm)"


def approval_server(folder: Path, **more: str) -> Server:
    """A server whose model calls ``archive_everything`` (confirm = true), then answers (``more``: env)."""
    script = write_script(
        folder,
        [
            {"content": "Archiving.", "tool_calls": [{"name": "archive_everything", "args": PROPOSED}]},
            {"content": "Done."},
        ],
    )
    project = write_project(
        folder,
        {
            "python_tools": {"archive_everything": "tests.user_tools:archive_everything"},
            "tools": {"archive_everything": {"confirm": True}},
        },
    )
    env = {
        "PHASEGRAPH_CHECKPOINTER": f"sqlite:{folder / 'state.db'}",
        "PHASEGRAPH_WORKSPACE": str(DEMO_WORKSPACE),
        "PHASEGRAPH_MODEL": f"scripted:{script}",
        "PHASEGRAPH_CONFIG": str(project),
        "PYTHONPATH": str(ROOT),  # the server imports tests.user_tools
        **more,
    }
    return Server(env=env, log=folder / "server.log", cwd=ROOT)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    started = approval_server(tmp_path_factory.mktemp("agui-approval"))
    try:
        yield started.start()
    finally:
        started.stop()


@pytest.fixture(scope="module")
def report(server: Server) -> Report:
    return run_script("ag-ui-approval.mjs", server.url)


@pytest.fixture
def client(server: Server) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server.url, timeout=60) as made:
        yield made


def ran(client: httpx.Client, request_id: str) -> list[dict[str, Any]]:
    """The tool results of a request, from its trace (status, output, error: what the tool did)."""
    trace = client.get(f"/api/requests/{request_id}/trace").json()
    return [entry["details"] for entry in trace if entry["type"] == "tool_result"]


def check_asked(asked: dict[str, Any]) -> dict[str, Any]:
    """The first run stopped before the call with the interrupt outcome; its interrupt."""
    assert asked["errors"] == [] and asked["outcome"] == "interrupt", asked
    assert asked["tool_calls"] == [] and asked["tool_results"] == []  # nothing ran
    [interrupt] = asked["interrupts"]
    assert interrupt["reason"] == "tool_approval" and interrupt["message"] == WAITS
    assert interrupt["toolCallId"] == interrupt["metadata"]["call"]["id"]
    assert interrupt["metadata"]["call"]["name"] == "archive_everything"
    assert interrupt["metadata"]["call"]["args"] == PROPOSED
    assert interrupt["metadata"]["requestId"] == asked["run_id"]
    assert asked["pending"] == [interrupt["id"]]
    assert [c["name"] for c in asked["custom"]] == ["approval_requested"]
    return interrupt


def check_answered(
    client: httpx.Client, asked: dict[str, Any], answered: dict[str, Any], decision: str
) -> None:
    """The answer continued the paused request to its end."""
    assert answered["errors"] == [] and answered["outcome"] == "success", answered
    assert answered["pending"] == []
    assert answered["run_id"] == asked["run_id"]  # the request that asked went on
    assert client.get(f"/api/requests/{asked['run_id']}").json()["status"] == "completed"
    [said] = [c["value"] for c in answered["custom"] if c["name"] == "approval_answered"]
    assert said["decision"] == decision
    assert answered["messages"][-1]["text"] == "Done."


def test_the_js_client_approves_a_call_which_then_runs(report: Report, client: httpx.Client):
    check_asked(first := report.ok("approve.asked"))
    answered = report.ok("approve.answered")
    check_answered(client, first, answered, "approve")
    assert answered["tool_calls"] == [{"name": "archive_everything", "args": PROPOSED}]
    assert answered["tool_results"] == [{"status": "ok"}]
    assert [r["output"] for r in ran(client, answered["run_id"])] == ["archived (tidy up)"]


def test_the_js_client_edits_a_call_which_runs_with_the_new_arguments(report: Report, client: httpx.Client):
    check_asked(first := report.ok("edit.asked"))
    answered = report.ok("edit.answered")
    check_answered(client, first, answered, "edit")
    edited = {"reason": "only the old drafts"}
    assert answered["tool_calls"] == [{"name": "archive_everything", "args": edited}]
    assert [r["output"] for r in ran(client, answered["run_id"])] == ["archived (only the old drafts)"]


def test_the_js_client_rejects_a_call_which_never_runs(report: Report, client: httpx.Client):
    check_asked(first := report.ok("reject.asked"))
    answered = report.ok("reject.answered")
    check_answered(client, first, answered, "reject")
    [result] = answered["tool_results"]
    assert result["status"] == "error" and "keep everything" in result["error"]
    [traced] = ran(client, answered["run_id"])
    assert traced["output"] is None and "did not run" in traced["error"]
    # the model read the reason: the thread's tool message says it
    [tool] = [m for m in answered["messages"] if m["type"] == "tool"]
    assert "keep everything" in tool["text"]


# ---------------------------------------------------------------- the Python client: what is refused


def asked(
    client: httpx.Client, thread: str, protocol: str = "triggered_phase"
) -> tuple[Agent, dict[str, Any]]:
    """A new thread's first run, stopped at the approval; the agent and its pending interrupt."""
    agent = Agent(url=str(client.base_url), thread_id=thread)
    agent.say(f"{thread}-user", ASK)
    events = agent.run(client, f"/ag-ui/{protocol}", agent.input(f"{thread}-1"))
    assert not [e for e in events if isinstance(e, ToolCallStartEvent)]  # nothing ran
    assert isinstance(events[-1], RunFinishedEvent) and events[-1].outcome.type == "interrupt"
    [interrupt] = agent.pending_interrupts
    return agent, interrupt


def answer(agent: Agent, run_id: str, interrupt: dict[str, Any], **entry: Any) -> dict[str, Any]:
    return agent.input(run_id, resume=[{"interruptId": interrupt["id"], **entry}])


def test_a_cancelled_approval_rejects_the_call(client: httpx.Client):
    agent, interrupt = asked(client, "agui-approval-cancel")
    events = agent.run(
        client, "/ag-ui/triggered_phase", answer(agent, "cancel-2", interrupt, status="cancelled")
    )

    assert events[-1].outcome.type == "success"
    [result] = [e for e in events if isinstance(e, ToolCallResultEvent)]
    assert json.loads(result.content)["status"] == "error" and "cancelled" in result.content
    assert events[0].run_id == "agui-approval-cancel-1"  # the paused request went on
    [traced] = ran(client, "agui-approval-cancel-1")
    assert traced["output"] is None


def test_a_bad_answer_or_a_new_message_is_refused_and_the_approval_still_waits(client: httpx.Client):
    agent, interrupt = asked(client, "agui-approval-bad")
    path = "/ag-ui/triggered_phase"
    unknown = client.post(path, json=answer(agent, "bad-2", interrupt, status="resolved", payload="maybe"))
    wordless = client.post(path, json=answer(agent, "bad-3", interrupt, status="resolved"))
    elsewhere = client.post(
        path, json={**answer(agent, "bad-4", interrupt, status="resolved"), "resume": [
            {"interruptId": "no-such-interrupt", "status": "resolved", "payload": "approve"}
        ]}
    )  # fmt: skip
    agent.say("bad-user-2", "Never mind, just answer.")
    talking = client.post(path, json=agent.input("bad-5"))
    agent.messages.pop()

    assert (
        unknown.status_code == 422
        and "'decision' must be approve, edit or reject" in unknown.json()["message"]
    )
    assert wordless.status_code == 422 and "give the payload" in wordless.json()["message"]
    assert elsewhere.status_code == 404 and "no-such-interrupt" in elsewhere.json()["message"]
    assert talking.status_code == 409 and interrupt["id"] in talking.json()["message"]
    for refused in ("bad-2", "bad-3", "bad-4", "bad-5"):  # nothing was started
        assert client.get(f"/api/requests/{refused}").status_code == 404
    assert client.get("/api/requests/agui-approval-bad-1").json()["status"] == "paused"  # nor resumed
    # the approval still waits, and an answer is taken
    events = agent.run(client, path, answer(agent, "bad-6", interrupt, status="resolved", payload="approve"))
    assert events[-1].outcome.type == "success"
    assert [r["output"] for r in ran(client, "agui-approval-bad-1")] == ["archived (tidy up)"]


def test_an_edit_that_breaks_the_tools_schema_is_asked_again(client: httpx.Client):
    agent, interrupt = asked(client, "agui-approval-schema")
    wrong = {"decision": "edit", "args": {"why": "no such argument"}}
    events = agent.run(
        client,
        "/ag-ui/triggered_phase",
        answer(agent, "schema-2", interrupt, status="resolved", payload=wrong),
    )

    assert (
        not [e for e in events if isinstance(e, ToolCallStartEvent)]
        and ran(client, "agui-approval-schema-1") == []
    )
    [again] = agent.pending_interrupts
    assert (
        again["reason"] == "tool_approval" and "do not fit archive_everything" in again["metadata"]["problem"]
    )
    assert "the last answer was not taken" in again["message"]
    fixed = {"decision": "edit", "args": {"reason": "fixed"}}
    events = agent.run(
        client, "/ag-ui/triggered_phase", answer(agent, "schema-3", again, status="resolved", payload=fixed)
    )
    assert events[-1].outcome.type == "success"
    assert [r["output"] for r in ran(client, "agui-approval-schema-1")] == ["archived (fixed)"]


def test_unified_waits_for_the_approval_too_and_runs_the_edited_call(client: httpx.Client):
    agent, interrupt = asked(client, "agui-approval-unified", "unified")
    assert interrupt["reason"] == "tool_approval" and interrupt["metadata"]["call"]["args"] == PROPOSED
    edit = {"decision": "edit", "args": {"reason": "unified edit"}}
    events = agent.run(
        client, "/ag-ui/unified", answer(agent, "unified-2", interrupt, status="resolved", payload=edit)
    )

    assert events[-1].outcome.type == "success" and agent.pending_interrupts == []
    [call] = [e for e in events if isinstance(e, ToolCallStartEvent)]
    assert call.tool_call_name == "archive_everything"
    assert [r["output"] for r in ran(client, "agui-approval-unified-1")] == ["archived (unified edit)"]


def test_an_approval_whose_request_was_cancelled_is_answered_on_a_new_request(client: httpx.Client):
    agent, interrupt = asked(client, "agui-approval-gone")
    assert client.post("/api/requests/agui-approval-gone-1/cancel").status_code == 200
    events = agent.run(
        client,
        "/ag-ui/triggered_phase",
        answer(agent, "gone-2", interrupt, status="resolved", payload="approve"),
    )

    assert events[0].run_id == "gone-2" and events[-1].outcome.type == "success"
    assert [r["output"] for r in ran(client, "gone-2")] == ["archived (tidy up)"]
    assert client.get("/api/requests/agui-approval-gone-1").json()["status"] == "cancelled"
