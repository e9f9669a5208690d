"""agent_network's OpenTelemetry spans, read back with the SDK's in-memory exporter."""

from __future__ import annotations

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import StatusCode

from phasegraph.graphs.run import run
from phasegraph.nodes import telemetry
from phasegraph.nodes.agent_network.context import AgentNetworkContext
from phasegraph.nodes.settings import run_settings
from tests.graphs.test_agent_network import QUESTION, route, scripted

#: Words of the compiled triage prompt: they must not reach a span unless prompts are allowed.
PROMPT_WORDS = "the first agent to read a user's request"


def by_name(finished: tuple[ReadableSpan, ...]) -> dict[str, list[ReadableSpan]]:
    named: dict[str, list[ReadableSpan]] = {}
    for span in finished:
        named.setdefault(span.name, []).append(span)
    return named


async def test_a_run_is_one_root_with_a_child_per_step_and_tool_spans_beneath(spans):
    result = await run("agent_network", QUESTION, thread_id="conversation-7")
    assert result.final is not None
    finished = spans.get_finished_spans()
    named = by_name(finished)
    (root,) = named["invoke_workflow research"]
    assert root.parent is None and root.status.status_code != StatusCode.ERROR
    assert root.attributes is not None and root.attributes["gen_ai.conversation.id"] == "conversation-7"
    steps = sorted(
        (s for s in finished if s.name.startswith("invoke_agent ")), key=lambda s: s.start_time or 0
    )
    assert [s.name for s in steps] == [
        "invoke_agent triage", "invoke_agent researcher", "invoke_agent researcher",
        "invoke_agent researcher", "invoke_agent writer",
    ]  # fmt: skip
    for step in steps:
        assert step.parent is not None and step.parent.span_id == root.context.span_id
        assert step.context.trace_id == root.context.trace_id
        attributes = step.attributes or {}
        assert attributes["gen_ai.operation.name"] == "invoke_agent"
        assert attributes["gen_ai.agent.name"] == step.name.removeprefix("invoke_agent ")
        assert attributes["phasegraph.prompt.chars"] > 0
        decision = next(e for e in step.events if e.name == "gen_ai.agent.decision")
        assert decision.attributes is not None and decision.attributes["action"] in (
            "USE_TOOL", "ROUTE_TO_AGENT", "RESPOND",
        )  # fmt: skip
    tools = sorted(
        (s for s in finished if s.name.startswith("execute_tool ")), key=lambda s: s.start_time or 0
    )
    assert [s.name for s in tools] == ["execute_tool search_files", "execute_tool read_file"]
    calls = [e.execution_id for e in result.events if e.type == "tool_call"]
    uses = named["use_tool"]  # the node that runs the decided call, after the step that decided it
    for tool_span, use, call_id in zip(tools, uses, calls, strict=True):
        assert tool_span.parent is not None and tool_span.parent.span_id == use.context.span_id
        assert use.parent is not None and use.parent.span_id == root.context.span_id
        assert (use.attributes or {})["gen_ai.agent.name"] == "researcher"
        attributes = tool_span.attributes or {}
        assert attributes["gen_ai.operation.name"] == "execute_tool"
        assert attributes["gen_ai.tool.name"] == tool_span.name.removeprefix("execute_tool ")
        assert attributes["gen_ai.tool.call.id"] == call_id
        assert tool_span.status.status_code != StatusCode.ERROR
    assert not any(
        PROMPT_WORDS in str(s.attributes) + str([e.attributes for e in s.events]) for s in finished
    )


async def test_prompts_reach_spans_only_when_allowed(spans, monkeypatch):
    monkeypatch.setenv("PHASEGRAPH_OTEL_CAPTURE_PROMPTS", "true")
    run_settings.cache_clear()
    try:
        await run("agent_network", QUESTION)
    finally:
        run_settings.cache_clear()
    triage = next(s for s in spans.get_finished_spans() if s.name == "invoke_agent triage")
    assert triage.attributes is not None and PROMPT_WORDS in str(triage.attributes["gen_ai.prompt"])


async def test_a_failed_run_ends_its_spans_with_an_error_status(spans, tmp_path):
    context = AgentNetworkContext(chat_model=scripted(route("researcher")), max_steps=1)
    result = await run("agent_network", "go", context=context)
    assert result.error is not None and result.error.kind == "budget_exhausted"
    root = next(s for s in spans.get_finished_spans() if s.name.startswith("invoke_workflow"))
    assert root.status.status_code == StatusCode.ERROR
    assert "steps" in (root.status.description or "")


async def test_a_run_without_an_exporter_makes_no_spans_here(spans):
    telemetry.use_exporter(None)
    await run("agent_network", QUESTION)
    assert spans.get_finished_spans() == ()
    assert telemetry.force_flush() is True
