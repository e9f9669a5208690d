"""Tool calls and structured answers whose JSON arguments were cut off, whatever the finish reason.

LangChain closes streamed argument text that never ended (``parse_partial_json``), so a call cut off
at ``["Grey Fox", "comp`` would read as ``["Grey Fox", "comp"]``. A provider does not always say so
(finish reason "tool_calls" or "stop", not "length"), so every protocol reads the raw argument text
strictly: a call that is not complete JSON never runs and is never accepted; it gets the correction
each protocol promises (a corrective retry for a structured answer, an error result the model reads
for a tool call), and a structured answer cut off twice is an ``invalid_model_output`` error.

The provider is the real OpenAI-compatible HTTP server on loopback (tests/fake_openai.py).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from phasegraph.graphs.run import RunResult, run
from phasegraph.nodes.agent_network.context import AgentNetworkContext
from phasegraph.nodes.goal_pursuit.context import GoalPursuitContext
from phasegraph.nodes.planner.context import PlannerContext
from phasegraph.nodes.trace import MemoryTraceStore
from phasegraph.tools.planning import open_planning
from phasegraph.tools.resources import load_bundled
from tests.fake_openai import Reply, fake_openai, tool_reply
from tests.helpers import of_type

#: Finish reasons that do not say the answer was cut (a cut at the token limit says "length").
FINISHES = ["tool_calls", "stop"]
#: What the corrective retry (or the error result) tells the model.
CUT_OFF = "cut off"


@pytest.fixture
def provider_env(provider_env: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    """The shared provider fixture with no client retries and a short timeout."""

    def configure(base_url: str) -> None:
        monkeypatch.delenv("PHASEGRAPH_RESOURCES", raising=False)
        provider_env(base_url, PHASEGRAPH_MODEL_MAX_RETRIES="0", PHASEGRAPH_MODEL_TIMEOUT_SECONDS="10")

    return configure


def cut(arguments: dict[str, Any], before: str) -> str:
    """The JSON text of ``arguments`` up to (not including) ``before``: a call cut off mid-argument."""
    text = json.dumps(arguments)
    return text[: text.index(before)]


def last_user_text(request: dict[str, Any]) -> str:
    return str(request["messages"][-1]["content"])


# --- goal_pursuit: a structured answer (DiscoveryPlan) ----------------------------------------------

PLAN = {"discovery_analysis": "Who owns the compass?", "search_queries": ["Grey Fox", "compass"]}
PLAN_CUT = cut(PLAN, 'pass"]')  # ... "search_queries": ["Grey Fox", "com
ENOUGH = {"discovery_analysis": "The searches found what matters."}
FINALIZE = {
    "situation_analysis": "Nothing to change.",
    "decision_type": "finalize",
    "finalization": {"response": "The compass is where it belongs."},
}
APPROVE = {"analysis": "Fine.", "verdict": "approve", "approval": {"confidence": 0.9}}


async def pursue() -> RunResult:
    context = GoalPursuitContext(
        model="openai:test-model", mode="determine", resource_repository=load_bundled()
    )
    return await run(
        "goal_pursuit", "Give the compass back to the Grey Fox.", context=context, traces=MemoryTraceStore()
    )


def searched(result: RunResult) -> list[str | None]:
    return [e.query for e in of_type(result, "context_update") if e.action == "searched"]


@pytest.mark.parametrize("finish", FINISHES)
async def test_goal_pursuit_never_searches_for_a_query_cut_off_mid_argument(provider_env, finish):
    replies = [
        tool_reply("DiscoveryPlan", PLAN_CUT, finish_reason=finish),
        tool_reply("DiscoveryPlan", PLAN),
        tool_reply("DiscoveryPlan", ENOUGH),
        tool_reply("ActionDecision", FINALIZE),
        tool_reply("RefinementDecision", APPROVE),
    ]
    with fake_openai(*replies) as fake:
        provider_env(fake.url)
        result = await pursue()
    assert result.error is None, result.error
    assert searched(result) == ["Grey Fox", "compass"]  # never "com"
    assert of_type(result, "phase_end")[0].retries == 1
    assert CUT_OFF in last_user_text(fake.requests[1])  # the corrective retry says why
    rejected = [e.details for e in result.trace if e.type == "model_output_rejected"]
    assert len(rejected) == 1 and CUT_OFF in rejected[0]["problem"]
    assert len(fake.requests) == len(replies)


async def test_goal_pursuit_cut_off_twice_is_an_invalid_model_output_error(provider_env):
    with fake_openai(tool_reply("DiscoveryPlan", PLAN_CUT, finish_reason="tool_calls")) as fake:
        provider_env(fake.url)
        result = await pursue()
    assert result.final is None and result.error is not None
    assert result.error.kind == "invalid_model_output" and CUT_OFF in result.error.message
    assert searched(result) == [] and len(fake.requests) == 2


# --- agent_network: a structured answer (AgentDecision) ---------------------------------------------

ANSWER = "PARTIAL-ANSWER, complete."
RESPOND = {
    "action": "RESPOND",
    "action_reasoning": "I can answer.",
    "action_details": {"message": ANSWER},
}
RESPOND_CUT = cut(RESPOND, 'ER, complete."')  # ... "message": "PARTIAL-ANSW


async def run_network(workspace: Path) -> RunResult:
    # the writer responds at once: the only agent of the bundled network that may
    context = AgentNetworkContext(model="openai:test-model", workspace=str(workspace), agent_key="writer")
    return await run("agent_network", "Say hello.", context=context, traces=MemoryTraceStore())


@pytest.mark.parametrize("finish", FINISHES)
async def test_agent_network_never_answers_the_user_with_a_cut_off_message(provider_env, workspace, finish):
    replies = [
        tool_reply("AgentDecision", RESPOND_CUT, finish_reason=finish),
        tool_reply("AgentDecision", RESPOND),
    ]
    with fake_openai(*replies) as fake:
        provider_env(fake.url)
        result = await run_network(workspace)
    assert result.error is None, result.error
    assert result.final is not None and result.final.answer == ANSWER
    assert [e.retries for e in of_type(result, "agent_step")] == [1]
    assert CUT_OFF in last_user_text(fake.requests[1])
    assert len(fake.requests) == 2


async def test_agent_network_cut_off_twice_is_an_invalid_model_output_error(provider_env, workspace):
    with fake_openai(tool_reply("AgentDecision", RESPOND_CUT, finish_reason="stop")) as fake:
        provider_env(fake.url)
        result = await run_network(workspace)
    assert result.final is None and result.error is not None
    assert result.error.kind == "invalid_model_output" and CUT_OFF in result.error.message
    assert "PARTIAL-ANSW" not in [e.answer for e in of_type(result, "final")]
    assert len(fake.requests) == 2


# --- tool-calling protocols: the call is answered with an error the model reads ----------------------

LISTING = {"path": "docs"}
LISTING_CUT = '{"path": "do'  # closed silently it would be {"path": "do"}; as {} it would list "."


def assert_refused_unrun(result: RunResult, fake_requests: list[dict[str, Any]], name: str) -> None:
    """The cut call was answered with an error (never run), the model read why, and then answered."""
    assert result.error is None, result.error
    results = of_type(result, "tool_result")
    assert results and results[0].name == name and results[0].status == "error"
    assert CUT_OFF in (results[0].error or "")
    assert not any(t.details.get("status") == "ok" for t in result.trace if t.type == "tool_result")
    assert CUT_OFF in json.dumps(fake_requests[1]["messages"])  # the model reads why it did not run
    assert result.final is not None and result.final.answer == "Sent it again."


@pytest.mark.parametrize("protocol", ["triggered_phase", "unified"])
@pytest.mark.parametrize("finish", FINISHES)
async def test_a_tool_call_cut_off_mid_argument_is_not_run(collect, provider_env, protocol, finish):
    replies = [tool_reply("list_files", LISTING_CUT, finish_reason=finish), Reply(text="Sent it again.")]
    with fake_openai(*replies) as fake:
        provider_env(fake.url)
        result = await collect(protocol, model="openai:test-model")
    assert_refused_unrun(result, fake.requests, "list_files")
    assert len(fake.requests) == 2


@pytest.mark.parametrize("finish", FINISHES)
async def test_the_planner_never_runs_a_call_cut_off_mid_argument(provider_env, tmp_path, finish):
    database = f"sqlite:{tmp_path / 'planner.db'}"
    project = {"name": "Orbit", "template_id": "event-plan", "description": "A launch event for the team"}
    replies = [
        tool_reply("create_project", cut(project, " for the team"), finish_reason=finish),
        Reply(text="Sent it again."),
    ]
    with fake_openai(*replies) as fake:
        provider_env(fake.url)
        context = PlannerContext(model="openai:gpt-4o-mini", database=database, request_id="req-cut-1")
        result = await run("planner", "Make the Orbit project", context=context, traces=MemoryTraceStore())
    assert_refused_unrun(result, fake.requests, "create_project")
    store = open_planning(database)
    await store.ensure_schema()
    try:
        assert await store.domain.list_projects("default", "") == []  # nothing ran on half an argument
    finally:
        await store.close()
