"""agent_network end to end through 'openai:test-model': tool calling, the JSON fallback, corrections.

The provider is a real OpenAI-compatible HTTP server on loopback (tests/fake_openai.py); the real
``openai`` client and LangChain's ``with_structured_output`` talk to it as to any provider. The run
follows the bundled example network (triage -> researcher -> writer) on a copy of the demo workspace.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from phasegraph.graphs.run import RunResult, run
from phasegraph.nodes.agent_network.agent_step import DECIDE
from phasegraph.nodes.agent_network.context import AgentNetworkContext
from phasegraph.nodes.agent_network.prompts import CONTEXT_HEADING
from phasegraph.nodes.agent_network.schemas import AgentDecision
from phasegraph.nodes.structured import CORRECTION, JSON_INSTRUCTION
from phasegraph.nodes.trace import MemoryTraceStore
from phasegraph.tools import default_registry
from phasegraph.tools.networks import EXAMPLE_NETWORK, compile_network, load_definition
from tests.fake_openai import Reply, fake_openai, forced_tool, last_message, tool_reply
from tests.helpers import kinds, of_type

QUESTION = "Which roadmap milestone covers pause and resume?"
ANSWER = "Milestone 2 (June) covers pausing and resuming a run."
ROADMAP = "docs/roadmap.md"
#: Text of the roadmap that only the real read_file output carries into the researcher's next prompt.
ROADMAP_LINE = "Pause, resume and cancel a run from the client."
#: The bundled network, compiled as the run compiles it: each agent's prompt as the model must see it.
NETWORK = compile_network(load_definition(EXAMPLE_NETWORK), default_registry())


def decision(action: str, reasoning: str = "because", **details: Any) -> dict[str, Any]:
    return {"action": action, "action_reasoning": reasoning, "action_details": details}


# One turn of the seed loop: triage routes, the researcher reads and routes, the writer responds.
DECISIONS: list[dict[str, Any]] = [
    decision(
        "ROUTE_TO_AGENT", "A research question.", target_agent="researcher", message="Check the roadmap."
    ),
    decision("USE_TOOL", "The roadmap has the milestones.", tool="read_file", params={"path": ROADMAP}),
    decision("ROUTE_TO_AGENT", "Found it.", target_agent="writer", message="Milestone 2 has pause/resume."),
    decision("RESPOND", "The facts are in.", message=ANSWER),
]
AGENTS = ["triage", "researcher", "researcher", "writer"]  # the agent each decision comes from
KINDS = [
    "agent_step", "route",
    "agent_step", "tool_call", "tool_result",
    "agent_step", "route",
    "agent_step", "final",
]  # fmt: skip

# A missing comma: no repair makes this JSON.
BROKEN = '{"action": "ROUTE_TO_AGENT" "action_reasoning": "x", "action_details": {"target_agent": "writer"}}'


@pytest.fixture
def provider_env(provider_env: Any) -> Any:
    """The shared provider fixture with no client retries and a short timeout."""

    def configure(base_url: str) -> None:
        provider_env(base_url, PHASEGRAPH_MODEL_MAX_RETRIES="0", PHASEGRAPH_MODEL_TIMEOUT_SECONDS="10")

    return configure


async def run_network(workspace: Path, **fields: Any) -> RunResult:
    """One turn of the bundled network on a private demo workspace through 'openai:test-model'."""
    context = AgentNetworkContext(model="openai:test-model", workspace=str(workspace), **fields)
    return await run("agent_network", QUESTION, context=context, traces=MemoryTraceStore())


def system_prompt(request: dict[str, Any]) -> str:
    first = request["messages"][0]
    assert first["role"] == "system"
    return str(first["content"])


def assert_prompted(request: dict[str, Any], agent: str) -> None:
    """The request carries ``agent``'s compiled prompt, the run's context and the question."""
    prompt = system_prompt(request)
    assert prompt.startswith(NETWORK.agents[agent].prompt.rstrip())
    assert CONTEXT_HEADING in prompt and QUESTION in prompt and "## Constraints" in prompt
    assert request["messages"][1] == {"role": "user", "content": DECIDE}


def assert_completed(result: RunResult) -> None:
    """The seed loop ran to the writer's answer, and read_file really read the roadmap."""
    assert result.error is None, result.error
    assert kinds(result) == KINDS
    steps = of_type(result, "agent_step")
    assert [(e.step, e.agent) for e in steps] == list(enumerate(AGENTS, start=1))
    expected = [AgentDecision.model_validate(d).model_dump(mode="json") for d in DECISIONS]
    assert [e.decision for e in steps] == expected and all(e.refused is None for e in steps)
    call, done = of_type(result, "tool_call")[0], of_type(result, "tool_result")[0]
    assert call.name == done.name == "read_file" and call.args == {"path": ROADMAP}
    assert done.status == "ok" and done.error is None and done.execution_id == call.execution_id
    final = result.final
    assert final is not None and final.agent == "writer" and final.answer == ANSWER
    assert kinds(result).count("final") == 1 and result.events[-1] is final


def assert_tool_output_reached_the_researcher(requests: list[dict[str, Any]]) -> None:
    """``requests``: the researcher's two decisions, before and after its read_file ran."""
    assert ROADMAP_LINE not in system_prompt(requests[0])
    assert ROADMAP_LINE in system_prompt(requests[1])  # the output of the researcher's own read_file


# --- (a) tool calling ------------------------------------------------------------------------------


async def test_tool_calling_runs_triage_researcher_writer_with_a_real_tool_call(provider_env, workspace):
    with fake_openai(*[tool_reply("AgentDecision", d) for d in DECISIONS]) as fake:
        provider_env(fake.url)
        result = await run_network(workspace)
    assert_completed(result)
    assert len(fake.requests) == len(DECISIONS)
    for request, agent in zip(fake.requests, AGENTS, strict=True):
        assert forced_tool(request) == "AgentDecision"
        parameters = request["tools"][0]["function"]["parameters"]
        assert parameters["properties"].keys() == AgentDecision.model_fields.keys()
        assert request["model"] == "test-model" and request["stream"] is True
        assert request["parallel_tool_calls"] is False and "response_format" not in request
        assert_prompted(request, agent)
    # the researcher's second decision sees what its tool returned, its first did not
    assert_tool_output_reached_the_researcher(fake.requests[1:3])
    handoff = "Note from the agent that handed you control:\nMilestone 2 has pause/resume."
    assert handoff in system_prompt(fake.requests[3])  # the writer reads the researcher's note
    assert all(e.retries is None and e.prompt_chars > 0 for e in of_type(result, "agent_step"))


# --- (e) usage ------------------------------------------------------------------------------------


async def test_usage_reported_by_the_server_is_prompt_tokens_on_each_agent_step(provider_env, workspace):
    replies = [tool_reply("AgentDecision", d, prompt_tokens=100 + i) for i, d in enumerate(DECISIONS)]
    with fake_openai(*replies) as fake:
        provider_env(fake.url)
        result = await run_network(workspace)
    assert_completed(result)
    assert all(r["stream_options"] == {"include_usage": True} for r in fake.requests)
    steps = of_type(result, "agent_step")
    assert [e.prompt_tokens for e in steps] == [100, 101, 102, 103]
    assert [e.to_dict()["promptTokens"] for e in steps] == [100, 101, 102, 103]  # the wire name


# --- (b) auto: a server without tool calling -------------------------------------------------------


async def test_auto_falls_back_to_json_mode_when_the_server_refuses_tools(provider_env, workspace):
    replies = [
        Reply(text=json.dumps(d), refuse_tools=True, prompt_tokens=200 + i) for i, d in enumerate(DECISIONS)
    ]
    with fake_openai(*replies) as fake:
        provider_env(fake.url)
        result = await run_network(workspace, structured_output="auto")
    assert_completed(result)
    # every step asks with the AgentDecision tool first (400), then for JSON text
    assert len(fake.requests) == 2 * len(DECISIONS)
    refused, answered = fake.requests[0::2], fake.requests[1::2]
    assert [forced_tool(r) for r in refused] == ["AgentDecision"] * len(DECISIONS)
    for request, agent in zip(answered, AGENTS, strict=True):
        assert "tools" not in request and "tool_choice" not in request
        assert request["response_format"] == {"type": "json_object"}
        assert_prompted(request, agent)
        assert json.loads(last_message(request).split("schema:\n", 1)[1])["title"] == "AgentDecision"
    assert_tool_output_reached_the_researcher(answered[1:3])
    steps = of_type(result, "agent_step")
    assert [e.prompt_tokens for e in steps] == [200, 201, 202, 203]
    assert all(e.retries is None for e in steps)  # a refused tool is a switch, not a rejected answer


# --- (c) json_mode ---------------------------------------------------------------------------------


async def test_json_mode_sends_response_format_json_object_and_never_tools(provider_env, workspace):
    with fake_openai(*[Reply(text=json.dumps(d)) for d in DECISIONS]) as fake:
        provider_env(fake.url)
        result = await run_network(workspace, structured_output="json_mode")
    assert_completed(result)
    assert len(fake.requests) == len(DECISIONS)
    steps = [e for e in result.events if e.type == "agent_step"]
    for request, step in zip(fake.requests, steps, strict=True):  # the size of what was sent, schema and all
        assert step.prompt_chars == sum(len(m["content"]) for m in request["messages"])
    for request, agent in zip(fake.requests, AGENTS, strict=True):
        assert "tools" not in request and "tool_choice" not in request
        assert request["response_format"] == {"type": "json_object"}
        assert_prompted(request, agent)
        instruction = last_message(request)
        assert instruction.startswith(JSON_INSTRUCTION.split("{", 1)[0].strip())
        schema = json.loads(instruction.split("schema:\n", 1)[1])
        assert (
            schema["title"] == "AgentDecision"
            and schema["properties"].keys() == AgentDecision.model_fields.keys()
        )


# --- (d) unusable answers: one corrective retry, then one error -------------------------------------


async def test_broken_json_gets_one_corrective_retry_shown_as_retries_on_the_agent_step(
    provider_env, workspace
):
    replies = [tool_reply("AgentDecision", BROKEN, prompt_tokens=50)]
    replies += [tool_reply("AgentDecision", d, prompt_tokens=300 + i) for i, d in enumerate(DECISIONS)]
    with fake_openai(*replies) as fake:
        provider_env(fake.url)
        result = await run_network(workspace)
    assert_completed(result)
    assert len(fake.requests) == len(DECISIONS) + 1
    first, retry = fake.requests[0], fake.requests[1]
    assert forced_tool(first) == forced_tool(retry) == "AgentDecision"
    assert retry["messages"][:-1] == first["messages"]  # the same prompt plus one correction
    correction = retry["messages"][-1]
    assert correction["role"] == "user"
    assert correction["content"].startswith(CORRECTION.split("{", 1)[0])
    assert (
        "not valid JSON" in correction["content"]
        and "Answer again with a AgentDecision" in correction["content"]
    )
    assert "could not be used" not in last_message(fake.requests[2])  # the next step starts clean
    steps = of_type(result, "agent_step")
    assert steps[0].retries == 1 and all(e.retries is None for e in steps[1:])
    assert steps[0].prompt_tokens == 300  # the accepted answer's usage, not the rejected one's
    rejected = [e for e in result.trace if e.type == "model_output_rejected"]
    assert len(rejected) == 1 and "not valid JSON" in rejected[0].details["problem"]


async def test_an_incomplete_decision_is_corrected_like_a_broken_one(provider_env, workspace):
    empty_answer = decision("RESPOND", "Done.", message="  ")
    replies = [tool_reply("AgentDecision", d) for d in DECISIONS[:3]]
    replies += [tool_reply("AgentDecision", empty_answer), tool_reply("AgentDecision", DECISIONS[3])]
    with fake_openai(*replies) as fake:
        provider_env(fake.url)
        result = await run_network(workspace)
    assert_completed(result)
    assert "RESPOND needs the answer in action_details.message" in last_message(fake.requests[4])
    assert [e.retries for e in of_type(result, "agent_step")] == [None, None, None, 1]


async def test_two_broken_answers_end_with_one_invalid_model_output_error(provider_env, workspace):
    with fake_openai(tool_reply("AgentDecision", BROKEN)) as fake:
        provider_env(fake.url)
        result = await run_network(workspace)
    assert kinds(result) == ["error"]
    assert len(of_type(result, "error")) == 1 and result.final is None
    error_event = result.error
    assert error_event is not None and error_event.kind == "invalid_model_output"
    assert "AgentDecision" in error_event.message and "corrective retry" in error_event.message
    assert "not valid JSON" in error_event.message
    assert len(fake.requests) == 2
    assert not of_type(result, "tool_call")


async def test_json_mode_two_broken_texts_end_with_one_error_after_a_good_start(provider_env, workspace):
    replies = [Reply(text=json.dumps(DECISIONS[0])), Reply(text='{"action": "USE_TOOL", ')]
    with fake_openai(*replies) as fake:
        provider_env(fake.url)
        result = await run_network(workspace, structured_output="json_mode")
    assert kinds(result) == ["agent_step", "route", "error"]
    assert result.final is None and result.error is not None
    assert result.error.kind == "invalid_model_output"
    assert len(fake.requests) == 3 and all("tools" not in r for r in fake.requests)
    # both rejections were the researcher's (the error event itself carries no progress fields)
    rejected = [e.details for e in result.trace if e.type == "model_output_rejected"]
    assert [(d["agent"], d["step"]) for d in rejected] == [("researcher", 2)] * 2
