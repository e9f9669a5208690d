"""planner end to end through 'openai:gpt-4o-mini': the streamed step, profiles, plans, bad output.

The provider is a real OpenAI-compatible HTTP server on loopback (tests/fake_openai.py); the real
``openai`` client, LangChain's streaming and ``with_structured_output`` talk to it as to any
provider. The project domain, plans and ledgers live in a sqlite file under the test's tmp_path.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from phasegraph.graphs.run import RunResult, run
from phasegraph.nodes.answers import FALLBACK_ANSWER_HEADER, NO_RESULTS_ANSWER
from phasegraph.nodes.planner.context import PlannerContext
from phasegraph.nodes.planner.prompts import PLAN_PROMPT, VIRTUAL_TOOLS
from phasegraph.nodes.planner.schemas import PlanDraft
from phasegraph.nodes.prices import load_prices
from phasegraph.nodes.prompts import ARGS_TOO_LARGE
from phasegraph.nodes.structured import CORRECTION
from phasegraph.nodes.trace import MemoryTraceStore
from phasegraph.tools.planning import (
    ErrorRow,
    LedgerFilter,
    PlanningStore,
    UsageRow,
    open_planning,
    planning_registry,
)
from tests.fake_openai import Reply, error, fake_openai, forced_tool, last_message, tool_reply
from tests.helpers import kinds, of_type

MODEL = "gpt-4o-mini"
SPEC = f"openai:{MODEL}"  # priced by the bundled table (nodes/prices.json)
REQUEST = "req-openai-1"
PLAN_ID = f"plan-{REQUEST[:12]}-1"
OBJECTIVE = "Set up Orbit"
PLAN_CALL = {"objective": OBJECTIVE, "execution_mode": "auto_execute"}
STEPS = [
    {"id": "s1", "tool": "list_templates", "args": {"query": "launch"}, "rationale": "find one",
     "depends_on": []},
    {"id": "s2", "tool": "create_project", "args": {"name": "Orbit", "template_id": "product-launch"},
     "rationale": "the project", "depends_on": ["s1"]},
    {"id": "s3", "tool": "publish_context_document",
     "args": {"project_id": "${s2.project.id}", "title": "Brief", "body": "Why Orbit."},
     "rationale": "its brief", "depends_on": ["s2"]},
]  # fmt: skip
DRAFT = {"reasoning": "Templates first, then the project and its brief.", "steps": STEPS}
# Valid JSON, wrong schema: the steps under another key.
WRONG_SCHEMA = {"reasoning": "in order", "plan": STEPS}
# A missing comma: no repair makes this JSON (LangChain closes a merely unfinished object silently).
BROKEN_ARGS = '{"query": "launch" "status": "all"}'
DONE = "Orbit is set up with its brief."
#: Every tool the planner binds: the project domain's and the two meta-tools.
PLANNER_TOOLS = {*planning_registry().names(), *VIRTUAL_TOOLS}


@pytest.fixture
def provider_env(provider_env: Any) -> Any:
    """The shared provider fixture with no client retries and a short timeout."""

    def configure(base_url: str) -> None:
        provider_env(base_url, PHASEGRAPH_MODEL_MAX_RETRIES="0", PHASEGRAPH_MODEL_TIMEOUT_SECONDS="10")

    return configure


@pytest.fixture
def database(tmp_path: Path) -> str:
    return f"sqlite:{tmp_path / 'planner.db'}"


async def session(database: str, message: str, **fields: Any) -> RunResult:
    """One planner turn through 'openai:gpt-4o-mini' on the database; the request id is REQUEST."""
    context = PlannerContext(model=SPEC, database=database, request_id=REQUEST, **fields)
    return await run("planner", message, context=context, traces=MemoryTraceStore())


@asynccontextmanager
async def opened(database: str) -> AsyncIterator[PlanningStore]:
    store = open_planning(database)
    await store.ensure_schema()
    try:
        yield store
    finally:
        await store.close()


async def usage_rows(database: str) -> list[UsageRow]:
    """The request's usage rows in call order."""
    async with opened(database) as store:
        rows = (await store.ledger.usage(LedgerFilter(request_id=REQUEST))).rows
    return sorted(rows, key=lambda r: r.call_index)


async def error_rows(database: str) -> list[ErrorRow]:
    async with opened(database) as store:
        rows = (await store.ledger.errors(LedgerFilter(request_id=REQUEST))).rows
    return sorted(rows, key=lambda r: r.error_index)


def cost(spec: str, input_tokens: int, output_tokens: int) -> float:
    """What the bundled price table says the call costs."""
    return round(load_prices()[spec].cost(input_tokens, output_tokens), 8)


def texts(result: RunResult) -> list[str]:
    """The streamed text of each planner step, one string per run of consecutive ``text`` events."""
    steps: list[list[str]] = []
    previous = ""
    for event in result.events:
        if event.type == "text":
            if previous != "text":
                steps.append([])
            steps[-1].append(event.text)
        previous = event.type
    return ["".join(chunks) for chunks in steps]


def offered(request: dict[str, Any]) -> set[str]:
    return {t["function"]["name"] for t in request.get("tools", [])}


def tool_message(request: dict[str, Any]) -> dict[str, Any]:
    """The request's last message, checked to be a tool result."""
    message: dict[str, Any] = request["messages"][-1]
    assert message["role"] == "tool", message
    return message


def assert_one_final_last(result: RunResult) -> None:
    assert result.error is None, result.error
    ends = [e for e in result.events if e.type in ("final", "error")]
    assert len(ends) == 1 and ends[0] is result.events[-1] and ends[0].type == "final", kinds(result)


async def assert_plan_ran(result: RunResult, database: str) -> None:
    """The drafted plan ran its three steps, the project and its brief exist, the planner answered."""
    assert_one_final_last(result)
    created = of_type(result, "plan_created")
    assert len(created) == 1 and created[0].plan["plan_id"] == PLAN_ID
    assert [s["tool"] for s in created[0].plan["steps"]] == [s["tool"] for s in STEPS]
    assert [(e.step_id, e.status) for e in of_type(result, "step_complete")] == [
        ("s1", "ok"), ("s2", "ok"), ("s3", "ok"),
    ]  # fmt: skip
    assert of_type(result, "step_start")[2].args["project_id"] == "orbit"  # ${s2.project.id} resolved
    assert result.final is not None and result.final.answer == DONE
    async with opened(database) as store:
        assert (await store.plans.get("default", PLAN_ID)).status == "completed"
        assert [d.title for d in await store.domain.list_documents("default", "orbit")] == ["Brief"]


# --- the streamed step --------------------------------------------------------------------------------


async def test_a_streamed_step_sends_its_text_runs_a_tool_and_answers(provider_env, database):
    replies = [
        tool_reply("list_templates", {"query": "launch"}, text="Let me look at the templates. "),
        Reply(text="One template fits: Product launch."),
    ]
    with fake_openai(*replies) as fake:
        provider_env(fake.url)
        result = await session(database, "Which template fits a launch?")
    assert_one_final_last(result)
    assert kinds(result) == [
        "session", "agent_state", "text",
        "agent_state", "tool_call", "tool_result",
        "agent_state", "text", "final",
    ]  # fmt: skip
    assert [e.state for e in of_type(result, "agent_state")] == ["thinking", "executing_tool", "thinking"]
    # the text streams as the server sends it, a word at a time, before the step's tool call runs
    assert texts(result) == ["Let me look at the templates. ", "One template fits: Product launch."]
    assert len(of_type(result, "text")) == 6 + 5
    call, done = of_type(result, "tool_call")[0], of_type(result, "tool_result")[0]
    assert (call.name, call.args, call.call_id) == ("list_templates", {"query": "launch"}, "call_fake_0")
    assert done.status == "ok" and done.call_id == call.call_id
    assert result.final is not None and result.final.answer == "One template fits: Product launch."
    assert not result.final.fallback
    assert len(fake.requests) == 2
    for request in fake.requests:
        assert request["model"] == MODEL and request["stream"] is True
        assert request["stream_options"] == {"include_usage": True}
        assert offered(request) == PLANNER_TOOLS and "tool_choice" not in request
        assert request["messages"][0]["role"] == "system"
        assert request["messages"][1] == {"role": "user", "content": "Which template fits a launch?"}
    # the second step reads the first step's call and the real tool's result
    assistant = fake.requests[1]["messages"][2]
    assert assistant["role"] == "assistant"
    assert [(c["id"], c["function"]["name"], json.loads(c["function"]["arguments"])) for c in
            assistant["tool_calls"]] == [("call_fake_0", "list_templates", {"query": "launch"})]  # fmt: skip
    result_message = tool_message(fake.requests[1])
    assert result_message["tool_call_id"] == "call_fake_0"
    assert json.loads(result_message["content"])["templates"][0]["template_id"] == "product-launch"


async def test_usage_rows_carry_the_providers_tokens_and_the_price_tables_cost(provider_env, database):
    replies = [
        tool_reply("list_templates", {}, text="Looking. ", prompt_tokens=120, completion_tokens=30),
        Reply(text="Three templates.", prompt_tokens=310, completion_tokens=12),
    ]
    with fake_openai(*replies) as fake:
        provider_env(fake.url)
        result = await session(database, "Which templates are there?", user_id="ada", session_id="s-1")
    assert_one_final_last(result)
    rows = await usage_rows(database)
    assert [
        (r.call_index, r.operation_type, r.model, r.profile, r.input_tokens, r.output_tokens, r.cost_usd)
        for r in rows
    ] == [
        (0, "planner_stream", SPEC, "balanced", 120, 30, cost(SPEC, 120, 30)),
        (1, "planner_stream", SPEC, "balanced", 310, 12, cost(SPEC, 310, 12)),
    ]
    assert rows[0].cost_usd == pytest.approx((120 * 0.15 + 30 * 0.6) / 1_000_000)  # gpt-4o-mini's rates
    assert all(
        (r.user_id, r.session_id, r.context_type, r.scope) == ("ada", "s-1", "general", "default")
        for r in rows
    )
    assert all(r.latency_ms > 0 and r.execution_mode is None for r in rows)
    assert result.final is not None and result.final.usage == {
        "calls": 2,
        "inputTokens": 430,
        "outputTokens": 42,
        "costUsd": round(cost(SPEC, 120, 30) + cost(SPEC, 310, 12), 8),
    }
    assert len(fake.requests) == 2


# --- profiles -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fields", "profile", "temperature", "max_tokens"),
    [
        ({}, "balanced", 0.2, 1024),  # general's profile
        ({"context_type": "task"}, "speed", 0.0, 512),
        ({"profile": "quality"}, "quality", 0.0, 2048),
        ({"profiles": {"balanced": {"temperature": 0.7, "max_tokens": 321}}}, "balanced", 0.7, 321),
    ],
)
async def test_the_profiles_temperature_and_max_tokens_reach_the_provider(
    provider_env, database, fields: dict[str, Any], profile: str, temperature: float, max_tokens: int
):
    with fake_openai(Reply(text="Hello.")) as fake:
        provider_env(fake.url)
        result = await session(database, "Hi", **fields)
    assert_one_final_last(result)
    [request] = fake.requests
    assert request["temperature"] == temperature
    assert request["max_completion_tokens"] == max_tokens and "max_tokens" not in request
    assert of_type(result, "session")[0].profile == profile
    assert [r.profile for r in await usage_rows(database)] == [profile]


async def test_plan_calls_use_the_session_profile_and_the_reviewer_the_quality_profile(
    provider_env, database
):
    profiles = {
        "balanced": {"temperature": 0.7, "max_tokens": 321},
        "quality": {"model": "openai:gpt-4.1", "temperature": 0.1, "max_tokens": 777},
    }
    replies = [
        tool_reply("agent_create_plan", {**PLAN_CALL, "execution_mode": "agent_review"}),
        tool_reply("PlanDraft", DRAFT),
        tool_reply("PlanVerdict", {"verdict": "approved", "notes": "Sound."}),
        Reply(text=DONE),
    ]
    with fake_openai(*replies) as fake:
        provider_env(fake.url)
        result = await session(database, "Set up Orbit", context_type="project_create", profiles=profiles)
    await assert_plan_ran(result, database)
    assert of_type(result, "plan_review")[0].verdict == "approved"
    sent = [(r["model"], r["temperature"], r["max_completion_tokens"]) for r in fake.requests]
    assert sent == [
        (MODEL, 0.7, 321),  # planner step
        (MODEL, 0.7, 321),  # PlanDraft: the session's profile
        ("gpt-4.1", 0.1, 777),  # PlanVerdict: the quality profile, its own model
        (MODEL, 0.7, 321),  # planner step
    ]
    assert [forced_tool(r) for r in fake.requests[1:3]] == ["PlanDraft", "PlanVerdict"]
    rows = await usage_rows(database)
    assert [(r.operation_type, r.profile, r.model, r.execution_mode) for r in rows] == [
        ("planner_stream", "balanced", SPEC, None),
        ("plan_create", "balanced", SPEC, "agent_review"),
        ("plan_review", "quality", "openai:gpt-4.1", "agent_review"),
        ("planner_stream", "balanced", SPEC, None),
    ]
    assert rows[2].cost_usd == cost("openai:gpt-4.1", 5, 2)  # priced at gpt-4.1's rates


# --- agent_create_plan with auto_execute ----------------------------------------------------------------


async def test_auto_execute_drafts_the_plan_through_the_forced_tool_and_runs_it(provider_env, database):
    replies = [
        tool_reply("agent_create_plan", PLAN_CALL, prompt_tokens=100, completion_tokens=20),
        tool_reply("PlanDraft", DRAFT, prompt_tokens=400, completion_tokens=90),
        Reply(text=DONE, prompt_tokens=700, completion_tokens=10),
    ]
    with fake_openai(*replies) as fake:
        provider_env(fake.url)
        result = await session(database, "Set up Orbit", context_type="project_create")
    await assert_plan_ran(result, database)
    assert len(fake.requests) == 3
    plan_request = fake.requests[1]
    assert forced_tool(plan_request) == "PlanDraft"
    parameters = plan_request["tools"][0]["function"]["parameters"]
    assert parameters["properties"].keys() == PlanDraft.model_fields.keys()
    assert "response_format" not in plan_request
    system = plan_request["messages"][0]
    assert system["role"] == "system" and system["content"].startswith(PLAN_PROMPT.split("\n", 1)[0])
    assert f"Objective: {OBJECTIVE}" in system["content"]
    assert "- create_project:" in system["content"]  # the tools a step may call
    # the plan's outcome answers the plan call: the planner reads it on its next step
    answer = tool_message(fake.requests[2])
    assert answer["tool_call_id"] == "call_fake_0"
    outcome = json.loads(answer["content"])
    assert outcome["status"] == "completed" and [s["status"] for s in outcome["steps"]] == ["ok"] * 3
    rows = await usage_rows(database)
    assert [(r.operation_type, r.input_tokens, r.output_tokens, r.execution_mode) for r in rows] == [
        ("planner_stream", 100, 20, None),
        ("plan_create", 400, 90, "auto_execute"),
        ("planner_stream", 700, 10, None),
    ]
    assert rows[1].cost_usd == cost(SPEC, 400, 90)


async def test_auto_execute_drafts_the_plan_in_json_mode_when_the_server_refuses_tools(
    provider_env, database
):
    replies = [
        tool_reply("agent_create_plan", PLAN_CALL),
        Reply(text=json.dumps(DRAFT), refuse_tools=True, prompt_tokens=410, completion_tokens=95),
        Reply(text=DONE),
    ]
    with fake_openai(*replies) as fake:
        provider_env(fake.url)
        result = await session(database, "Set up Orbit", context_type="project_create")
    await assert_plan_ran(result, database)
    # the plan is asked with the PlanDraft tool first (400), then for JSON text
    assert len(fake.requests) == 4
    refused, answered = fake.requests[1], fake.requests[2]
    assert forced_tool(refused) == "PlanDraft"
    assert "tools" not in answered and "tool_choice" not in answered
    assert answered["response_format"] == {"type": "json_object"}
    assert answered["messages"][:-1] == refused["messages"]  # the same prompt plus the JSON instruction
    assert json.loads(last_message(answered).split("schema:\n", 1)[1])["title"] == "PlanDraft"
    assert offered(fake.requests[3]) == PLANNER_TOOLS  # the planner's own steps still call tools
    plan_rows = [r for r in await usage_rows(database) if r.operation_type == "plan_create"]
    # a refused tool is a switch, not a call that answered: one row, with the JSON answer's tokens
    assert [(r.input_tokens, r.output_tokens) for r in plan_rows] == [(410, 95)]


async def test_a_server_without_any_tool_calling_ends_the_turn_with_one_provider_error(
    provider_env, database
):
    # The planner's own step binds the tools; a server that refuses them cannot run a planner session.
    with fake_openai(Reply(text="never sent", refuse_tools=True)) as fake:
        provider_env(fake.url)
        result = await session(database, "Which templates are there?")
    assert kinds(result) == ["session", "agent_state", "error"]
    assert result.final is None and result.error is not None and result.error.kind == "provider"
    assert "HTTP 400" in result.error.message and "does not support tools" in result.error.message
    assert len(fake.requests) == 1 and offered(fake.requests[0]) == PLANNER_TOOLS


# --- malformed model output (PROTOCOL_DONE 11) ------------------------------------------------------------


@pytest.mark.parametrize("name", ["list_templates", "agent_create_plan"])
async def test_broken_json_arguments_are_answered_with_an_error_the_model_reads(
    provider_env, database, name: str
):
    replies = [tool_reply(name, BROKEN_ARGS), Reply(text="Sorry, let me answer plainly.")]
    with fake_openai(*replies) as fake:
        provider_env(fake.url)
        result = await session(database, "Which templates fit a launch?")
    assert_one_final_last(result)
    assert result.final is not None and result.final.answer == "Sorry, let me answer plainly."
    assert len(fake.requests) == 2
    # the model sees its own call as it sent it, and the error under that call's id
    [sent] = fake.requests[1]["messages"][2]["tool_calls"]
    assert (sent["id"], sent["function"]["name"], sent["function"]["arguments"]) == (
        "call_fake_0",
        name,
        BROKEN_ARGS,
    )
    answer = tool_message(fake.requests[1])
    assert answer["tool_call_id"] == "call_fake_0"
    assert f"the arguments of {name} were not valid JSON" in answer["content"]
    assert BROKEN_ARGS in answer["content"]
    assert "plan_created" not in kinds(result) and "step_start" not in kinds(result)
    if name == "list_templates":  # a real tool: refused through the runner, never run
        [done] = of_type(result, "tool_result")
        assert done.status == "error" and "not valid JSON" in (done.error or "")
        assert [(r.stage, r.tool_name) for r in await error_rows(database)] == [
            ("tool_execution", "list_templates")
        ]
    else:  # a meta-tool: answered before any plan is drafted
        assert answer["content"].startswith("ERROR: ") and "tool_call" not in kinds(result)
        assert [r.operation_type for r in await usage_rows(database)] == ["planner_stream"] * 2


FIRST_TOKENS = {"prompt_tokens": 400, "completion_tokens": 80}


@pytest.mark.parametrize(
    ("first", "problem"),
    [
        (tool_reply("PlanDraft", WRONG_SCHEMA, **FIRST_TOKENS), "does not match the schema"),
        (tool_reply("PlanDraft", '{"reasoning": "x" "steps": []}', **FIRST_TOKENS), "not valid JSON"),
        (Reply(text="", prompt_tokens=400, completion_tokens=80), "the answer was empty"),
    ],
    ids=["wrong_schema", "broken_json", "empty"],
)
async def test_an_unusable_plan_draft_gets_one_corrective_retry(
    provider_env, database, first: Reply, problem: str
):
    replies = [
        tool_reply("agent_create_plan", PLAN_CALL),
        first,
        tool_reply("PlanDraft", DRAFT, prompt_tokens=520, completion_tokens=90),
        Reply(text=DONE),
    ]
    with fake_openai(*replies) as fake:
        provider_env(fake.url)
        result = await session(database, "Set up Orbit", context_type="project_create")
    await assert_plan_ran(result, database)
    assert len(fake.requests) == 4
    asked, retry = fake.requests[1], fake.requests[2]
    assert forced_tool(asked) == forced_tool(retry) == "PlanDraft"
    assert retry["messages"][:-1] == asked["messages"]  # the same prompt plus one correction
    correction = retry["messages"][-1]
    assert correction["role"] == "user"
    assert correction["content"].startswith(CORRECTION.split("{", 1)[0])
    assert problem in correction["content"] and "Answer again with a PlanDraft" in correction["content"]
    plan_rows = [r for r in await usage_rows(database) if r.operation_type == "plan_create"]
    assert [(r.call_index, r.input_tokens, r.output_tokens) for r in plan_rows] == [
        (1, 400, 80),
        (2, 520, 90),
    ]
    assert await error_rows(database) == []  # corrected: nothing to log


async def test_two_bad_plan_drafts_are_an_error_the_planner_reads(provider_env, database):
    replies = [
        tool_reply("agent_create_plan", PLAN_CALL),
        tool_reply("PlanDraft", '{"reasoning": "x" "steps": []}', prompt_tokens=40, completion_tokens=4),
        tool_reply("PlanDraft", WRONG_SCHEMA, prompt_tokens=60, completion_tokens=6),
        Reply(text="I could not draft that plan."),
    ]
    with fake_openai(*replies) as fake:
        provider_env(fake.url)
        result = await session(database, "Set up Orbit", context_type="project_create")
    assert_one_final_last(result)
    assert result.final is not None and result.final.answer == "I could not draft that plan."
    assert "plan_created" not in kinds(result) and "step_start" not in kinds(result)
    assert len(fake.requests) == 4
    assert "not valid JSON" in last_message(fake.requests[2])  # the one correction
    answer = tool_message(fake.requests[3])
    assert answer["tool_call_id"] == "call_fake_0"
    refused = json.loads(answer["content"])
    assert refused["status"] == "error"
    assert "PlanDraft could not be used, even after a corrective retry" in refused["error"]
    assert "does not match the schema" in refused["error"]
    [row] = await error_rows(database)
    assert (row.stage, row.kind, row.tool_name, row.execution_mode, row.component) == (
        "plan_create",
        "plan_invalid",
        "agent_create_plan",
        "auto_execute",
        "planner",
    )
    assert row.message == refused["error"]
    rows = await usage_rows(database)
    assert [(r.operation_type, r.input_tokens) for r in rows if r.operation_type == "plan_create"] == [
        ("plan_create", 40),
        ("plan_create", 60),
    ]
    async with opened(database) as store:
        assert await store.plans.list("default") == []


async def test_an_empty_planner_answer_falls_back_to_the_tool_results(provider_env, database):
    replies = [tool_reply("list_templates", {"query": "launch"}), Reply(text="", completion_tokens=0)]
    with fake_openai(*replies) as fake:
        provider_env(fake.url)
        result = await session(database, "Which template fits a launch?")
    assert_one_final_last(result)
    final = result.final
    assert final is not None and final.fallback and not final.all_tools_failed
    assert final.answer.startswith(FALLBACK_ANSWER_HEADER)
    assert "list_templates(query='launch') [ok]" in final.answer and "product-launch" in final.answer
    assert len(fake.requests) == 2  # no extra call to ask again


async def test_an_empty_first_answer_ends_with_the_no_results_answer(provider_env, database):
    with fake_openai(Reply(text="")) as fake:
        provider_env(fake.url)
        result = await session(database, "Anything?")
    assert kinds(result) == ["session", "agent_state", "final"]
    assert result.final is not None and result.final.fallback and result.final.answer == NO_RESULTS_ANSWER
    assert len(fake.requests) == 1


async def test_an_oversized_tool_call_is_refused_with_the_reason_and_not_run(provider_env, database):
    big = {"name": "x" * 500, "template_id": "event-plan"}
    replies = [tool_reply("create_project", big), Reply(text="That name is too long.")]
    with fake_openai(*replies) as fake:
        provider_env(fake.url)
        result = await session(database, "Make the project", max_tool_args_chars=100)
    assert_one_final_last(result)
    reason = ARGS_TOO_LARGE.format(name="create_project", limit=100)
    [call], [done] = of_type(result, "tool_call"), of_type(result, "tool_result")
    assert call.name == "create_project" and call.args == {}  # the oversized arguments are not passed on
    assert done.status == "error" and done.error == reason
    answer = tool_message(fake.requests[1])
    assert answer["tool_call_id"] == "call_fake_0" and reason in answer["content"]
    assert result.final is not None and result.final.answer == "That name is too long."
    async with opened(database) as store:
        assert await store.domain.list_projects("default", "") == []
    assert [(r.stage, r.tool_name) for r in await error_rows(database)] == [
        ("tool_execution", "create_project")
    ]


async def test_an_unknown_tool_is_answered_with_an_error_the_model_reads(provider_env, database):
    replies = [tool_reply("format_disk", {"drive": "C"}), Reply(text="I cannot do that.")]
    with fake_openai(*replies) as fake:
        provider_env(fake.url)
        result = await session(database, "Format the disk")
    assert_one_final_last(result)
    [done] = of_type(result, "tool_result")
    assert done.name == "format_disk" and done.status == "error" and "unknown tool" in (done.error or "")
    answer = tool_message(fake.requests[1])
    assert "unknown tool 'format_disk'" in answer["content"]
    assert result.final is not None and result.final.answer == "I cannot do that."


async def test_a_tool_call_cut_off_at_the_token_limit_is_not_run(provider_env, database):
    cut = '{"name": "Orbit", "template_id": "event-plan", "description": "A launch event for'
    replies = [tool_reply("create_project", cut, finish_reason="length"), Reply(text="I was cut off.")]
    with fake_openai(*replies) as fake:
        provider_env(fake.url)
        result = await session(database, "Make the Orbit project")
    assert_one_final_last(result)
    assert all(e.status == "error" for e in of_type(result, "tool_result"))
    async with opened(database) as store:
        assert await store.domain.list_projects("default", "") == []  # nothing ran on half an argument
    answer = tool_message(fake.requests[1])
    assert "cut off" in answer["content"] or "token limit" in answer["content"]


# --- failed model calls: each is a usage row, each failure an error row (seed 002 section 2) -------------


def call_rows(rows: list[UsageRow]) -> list[tuple[Any, ...]]:
    return [
        (r.call_index, r.operation_type, r.status, r.error_kind, r.input_tokens, r.output_tokens)
        for r in rows
    ]


async def test_a_provider_error_on_the_first_call_is_a_usage_row_and_an_error_row(provider_env, database):
    with fake_openai(error(500, "the upstream model crashed")) as fake:
        provider_env(fake.url)
        result = await session(database, "Which templates are there?", user_id="ada", session_id="s-1")
    assert kinds(result) == ["session", "agent_state", "error"]
    assert result.error is not None and result.error.kind == "provider" and "HTTP 500" in result.error.message
    assert len(fake.requests) == 1
    rows = await usage_rows(database)
    assert call_rows(rows) == [(0, "planner_stream", "error", "provider", 0, 0)]
    assert (rows[0].model, rows[0].cost_usd, rows[0].user_id, rows[0].session_id) == (SPEC, 0.0, "ada", "s-1")
    [logged] = await error_rows(database)
    assert (logged.component, logged.stage, logged.kind, logged.user_id, logged.session_id) == (
        "planner", "planner_loop", "provider", "ada", "s-1"
    )  # fmt: skip
    assert logged.message == result.error.message


async def test_a_provider_error_on_the_second_call_of_a_turn_is_its_own_usage_row(provider_env, database):
    replies = [
        tool_reply("list_templates", {}, prompt_tokens=120, completion_tokens=30),
        error(500, "the upstream model crashed"),
    ]
    with fake_openai(*replies) as fake:
        provider_env(fake.url)
        result = await session(database, "Which templates are there?")
    assert kinds(result)[-1] == "error" and result.error is not None and result.error.kind == "provider"
    assert len(fake.requests) == 2
    assert call_rows(await usage_rows(database)) == [
        (0, "planner_stream", "ok", None, 120, 30),
        (1, "planner_stream", "error", "provider", 0, 0),
    ]
    assert [(r.stage, r.kind) for r in await error_rows(database)] == [("planner_loop", "provider")]
    async with opened(database) as store:
        report = await store.ledger.usage(LedgerFilter(request_id=REQUEST), by="status")
    assert (report.totals["calls"], report.totals["failed"]) == (2, 1)
    assert [(g["key"], g["calls"], g["failed"]) for g in report.groups] == [("error", 1, 1), ("ok", 1, 0)]


async def test_a_provider_error_while_drafting_a_plan_is_a_usage_row_the_planner_goes_on(
    provider_env, database
):
    replies = [
        tool_reply("agent_create_plan", PLAN_CALL),
        error(500, "the upstream model crashed"),
        Reply(text="I could not draft that plan."),
    ]
    with fake_openai(*replies) as fake:
        provider_env(fake.url)
        result = await session(database, "Set up Orbit", context_type="project_create")
    assert_one_final_last(result)
    assert len(fake.requests) == 3
    assert call_rows(await usage_rows(database)) == [
        (0, "planner_stream", "ok", None, 5, 2),
        (1, "plan_create", "error", "provider", 0, 0),
        (2, "planner_stream", "ok", None, 5, 2),
    ]
    [logged] = await error_rows(database)
    assert (logged.stage, logged.kind) == ("plan_create", "plan_invalid") and "HTTP 500" in logged.message
