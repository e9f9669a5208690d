"""goal_pursuit end to end through 'openai:test-model': tool calling, the JSON fallback, corrections.

The provider is a real OpenAI-compatible HTTP server on loopback (tests/fake_openai.py); the real
``openai`` client and LangChain's ``with_structured_output`` talk to it as to any provider.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from phasegraph.graphs.run import RunResult, run
from phasegraph.nodes.goal_pursuit.context import GoalPursuitContext
from phasegraph.nodes.goal_pursuit.schemas import ActionDecision, DiscoveryPlan, RefinementDecision
from phasegraph.nodes.structured import CORRECTION, JSON_INSTRUCTION
from phasegraph.nodes.trace import MemoryTraceStore
from phasegraph.tools.resources import load_bundled
from tests.fake_openai import Reply, error, fake_openai, forced_tool, last_message, tool_reply
from tests.helpers import kinds, of_type

GOAL = "Give the brass compass back to Mira Voss."
COMPASS, MIRA = "res://item/brass-compass", "res://character/mira-voss"
SCHEMAS = {s.__name__: s for s in (DiscoveryPlan, ActionDecision, RefinementDecision)}
PHASES = ["context_discovery", "context_discovery", "action_decision", "refinement_analysis"]

# One determination: search, then enough context, then plan move_item, then approve.
ANSWERS: list[tuple[str, dict[str, Any]]] = [
    ("DiscoveryPlan", {"discovery_analysis": "Nothing loaded yet.", "search_queries": ["compass"]}),
    ("DiscoveryPlan", {"discovery_analysis": "The search found the compass and Mira."}),
    (
        "ActionDecision",
        {
            "situation_analysis": "The compass must move to Mira.",
            "decision_type": "execute",
            "execution": {
                "tool": "move_item",
                "params": {"item_uri": COMPASS, "to_uri": MIRA},
                "reason": "She owns it.",
            },
        },
    ),
    (
        "RefinementDecision",
        {"analysis": "Correct call.", "verdict": "approve", "approval": {"confidence": 0.8}},
    ),
]
EXPECTED_PLAN = {
    "kind": "operation_plan",
    "tool": "move_item",
    "params": {"item_uri": COMPASS, "to_uri": MIRA},
    "reason": "She owns it.",
}


@pytest.fixture
def provider_env(provider_env: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    """The shared provider fixture with no retries, a short timeout and the bundled story world."""

    def configure(base_url: str) -> None:
        monkeypatch.delenv("PHASEGRAPH_RESOURCES", raising=False)
        provider_env(base_url, PHASEGRAPH_MODEL_MAX_RETRIES="0", PHASEGRAPH_MODEL_TIMEOUT_SECONDS="10")

    return configure


async def pursue(**fields: Any) -> RunResult:
    """One determine-mode turn on a fresh in-memory story world through 'openai:test-model'."""
    fields.setdefault("mode", "determine")
    context = GoalPursuitContext(model="openai:test-model", resource_repository=load_bundled(), **fields)
    return await run("goal_pursuit", GOAL, context=context, traces=MemoryTraceStore())


def phases(result: RunResult) -> list[str]:
    return [e.phase for e in of_type(result, "phase_start")]


def assert_determined(result: RunResult) -> None:
    assert result.error is None, result.error
    assert kinds(result).count("final") == 1 and kinds(result)[-1] == "final"
    assert phases(result) == PHASES
    assert result.final.operation_plan == EXPECTED_PLAN and result.final.exit == "approved"
    assert [e.action for e in of_type(result, "context_update")] == ["searched"]


# --- (a) tool calling ---------------------------------------------------------------------------------


async def test_each_phase_forces_its_schema_as_a_tool_and_reports_the_usage_tokens(provider_env):
    replies = [tool_reply(name, args, prompt_tokens=100 + i) for i, (name, args) in enumerate(ANSWERS)]
    with fake_openai(*replies) as fake:
        provider_env(fake.url)
        result = await pursue()
    assert_determined(result)
    assert len(fake.requests) == len(ANSWERS)
    assert [forced_tool(r) for r in fake.requests] == [name for name, _ in ANSWERS]
    for request, (name, _) in zip(fake.requests, ANSWERS, strict=True):
        assert request["model"] == "test-model" and request["stream"] is True
        assert request["stream_options"] == {"include_usage": True}
        assert request["parallel_tool_calls"] is False and "response_format" not in request
        parameters = request["tools"][0]["function"]["parameters"]
        assert parameters["properties"].keys() == SCHEMAS[name].model_fields.keys()
        assert request["messages"][0]["role"] == "system" and request["messages"][-1]["content"] == GOAL
    # the ActionDecision tool carries the nested schema the model fills in
    decision_schema = json.dumps(fake.requests[2]["tools"][0]["function"]["parameters"])
    assert "execution" in decision_schema and "finalization" in decision_schema
    ends = of_type(result, "phase_end")
    assert [e.prompt_tokens for e in ends] == [100, 101, 102, 103]  # the provider's usage, per phase
    assert all(e.retries is None and e.prompt_chars > 0 for e in ends)


async def test_argument_text_in_one_character_pieces_is_reassembled(provider_env):
    replies = [tool_reply(name, args, piece_chars=1) for name, args in ANSWERS]
    with fake_openai(*replies) as fake:
        provider_env(fake.url)
        result = await pursue()
    assert_determined(result)
    assert [e.prompt_tokens for e in of_type(result, "phase_end")] == [5] * 4


# --- (b) auto: a server without tool calling ---------------------------------------------------------


async def test_auto_switches_to_json_mode_when_the_server_refuses_tools(provider_env):
    replies = [Reply(text=json.dumps(args), refuse_tools=True, prompt_tokens=200 + i)
               for i, (_, args) in enumerate(ANSWERS)]  # fmt: skip
    with fake_openai(*replies) as fake:
        provider_env(fake.url)
        result = await pursue()
    assert_determined(result)
    # every phase asks with its tool first (400), then for JSON text with the schema in the prompt
    assert len(fake.requests) == 2 * len(ANSWERS)
    refused, answered = fake.requests[0::2], fake.requests[1::2]
    assert [forced_tool(r) for r in refused] == [name for name, _ in ANSWERS]
    for request, (name, _) in zip(answered, ANSWERS, strict=True):
        assert "tools" not in request and "tool_choice" not in request
        assert request["response_format"] == {"type": "json_object"}
        instruction = last_message(request)
        assert instruction.startswith(JSON_INSTRUCTION.split("{", 1)[0].strip())
        schema = json.loads(instruction.split("schema:\n", 1)[1])
        assert schema["title"] == name and schema["properties"]
    ends = of_type(result, "phase_end")
    assert [e.prompt_tokens for e in ends] == [200, 201, 202, 203]
    assert all(e.retries is None for e in ends)  # a refused tool is a switch, not a rejected answer


async def test_auto_reads_json_text_from_a_server_that_ignores_the_tool(provider_env):
    fenced = [Reply(text=f"```json\n{json.dumps(args)}\n```") for _, args in ANSWERS]
    with fake_openai(*fenced) as fake:
        provider_env(fake.url)
        result = await pursue()
    assert_determined(result)
    assert len(fake.requests) == len(ANSWERS) and all("tools" in r for r in fake.requests)


async def test_tool_calling_alone_does_not_fall_back_and_reports_the_provider_error(provider_env):
    with fake_openai(Reply(text="{}", refuse_tools=True)) as fake:
        provider_env(fake.url)
        result = await pursue(structured_output="tool_calling")
    assert kinds(result) == ["phase_start", "error"]
    assert result.error.kind == "provider" and "answered HTTP 400" in result.error.message
    assert len(fake.requests) == 1


# --- (c) broken argument JSON: one corrective retry ---------------------------------------------------


# A missing comma: no repair makes this JSON (LangChain closes a merely cut-off text, see below).
BROKEN = '{"discovery_analysis": "Nothing loaded yet." "search_queries": ["compass"]}'


async def test_broken_arguments_get_one_corrective_retry_then_work(provider_env):
    replies = [tool_reply("DiscoveryPlan", BROKEN, prompt_tokens=50)]
    replies += [tool_reply(name, args, prompt_tokens=300 + i) for i, (name, args) in enumerate(ANSWERS)]
    with fake_openai(*replies) as fake:
        provider_env(fake.url)
        result = await pursue()
    assert_determined(result)
    assert len(fake.requests) == len(ANSWERS) + 1
    first, retry = fake.requests[0], fake.requests[1]
    assert forced_tool(first) == forced_tool(retry) == "DiscoveryPlan"  # the retry still calls the tool
    assert retry["messages"][:-1] == first["messages"]  # the same prompt plus one correction
    correction = retry["messages"][-1]
    assert correction["role"] == "user"
    assert correction["content"].startswith(CORRECTION.split("{", 1)[0])
    assert "not valid JSON" in correction["content"] and "search_queries" in correction["content"]
    assert "Answer again with a DiscoveryPlan" in correction["content"]
    assert "could not be used" not in last_message(fake.requests[2])  # the next phase starts clean
    ends = of_type(result, "phase_end")
    assert ends[0].retries == 1 and all(e.retries is None for e in ends[1:])
    assert ends[0].prompt_tokens == 300  # the accepted answer's usage, not the rejected one's
    assert ends[0].prompt_chars > len(first["messages"][0]["content"])  # counts the correction too


async def test_twice_broken_arguments_end_with_one_invalid_model_output_error(provider_env):
    with fake_openai(tool_reply("DiscoveryPlan", BROKEN)) as fake:
        provider_env(fake.url)
        result = await pursue()
    assert kinds(result) == ["phase_start", "error"]
    assert len(of_type(result, "error")) == 1 and result.final is None
    error_event = result.error
    assert error_event.kind == "invalid_model_output"
    assert "DiscoveryPlan" in error_event.message and "corrective retry" in error_event.message
    assert "not valid JSON" in error_event.message
    assert len(fake.requests) == 2


# --- (d) json_mode never sends tools ------------------------------------------------------------------


async def test_json_mode_never_sends_tools(provider_env):
    replies = [Reply(text=json.dumps(args), prompt_tokens=400 + i) for i, (_, args) in enumerate(ANSWERS)]
    with fake_openai(*replies) as fake:
        provider_env(fake.url)
        result = await pursue(structured_output="json_mode")
    assert_determined(result)
    assert len(fake.requests) == len(ANSWERS)
    for request, (name, _) in zip(fake.requests, ANSWERS, strict=True):
        assert "tools" not in request and "tool_choice" not in request
        assert request["response_format"] == {"type": "json_object"}
        assert json.loads(last_message(request).split("schema:\n", 1)[1])["title"] == name
    assert [e.prompt_tokens for e in of_type(result, "phase_end")] == [400, 401, 402, 403]


async def test_json_mode_corrects_broken_json_text_once(provider_env):
    _, first = ANSWERS[0]
    replies = [Reply(text=json.dumps(first)[:-5])] + [Reply(text=json.dumps(args)) for _, args in ANSWERS]
    with fake_openai(*replies) as fake:
        provider_env(fake.url)
        result = await pursue(structured_output="json_mode")
    assert_determined(result)
    assert all("tools" not in r for r in fake.requests)
    retry = fake.requests[1]["messages"]
    assert "could not be used" in retry[-2]["content"] and "not valid JSON" in retry[-2]["content"]
    assert retry[-1]["content"].startswith(JSON_INSTRUCTION.split("{", 1)[0].strip())
    assert of_type(result, "phase_end")[0].retries == 1


async def test_a_provider_error_mid_pursuit_is_one_error_with_the_phase_open(provider_env):
    replies = [tool_reply(*ANSWERS[0]), error(500, "overloaded")]
    with fake_openai(*replies) as fake:
        provider_env(fake.url)
        result = await pursue()
    assert kinds(result) == ["phase_start", "phase_end", "context_update", "phase_start", "error"]
    assert result.error.kind == "provider" and "answered HTTP 500 after 1 attempt" in result.error.message
    assert len(fake.requests) == 2


async def test_arguments_cut_off_by_the_token_limit_are_corrected_not_accepted(provider_env):
    name, decision = ANSWERS[2]
    text = json.dumps(decision)
    cut = text[: text.index(MIRA) + len("res://character/mi")]  # ... "to_uri": "res://character/mi
    replies = [
        tool_reply(*ANSWERS[0]),
        tool_reply(*ANSWERS[1]),
        tool_reply(name, cut, finish_reason="length"),
    ]
    replies += [tool_reply(*answer) for answer in ANSWERS[2:]]
    with fake_openai(*replies) as fake:
        provider_env(fake.url)
        result = await pursue()
    assert result.final is not None and result.final.operation_plan == EXPECTED_PLAN
    assert of_type(result, "phase_end")[2].retries == 1
    assert len(fake.requests) == len(ANSWERS) + 1
