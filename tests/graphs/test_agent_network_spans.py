"""agent_network's OpenTelemetry spans, read back with the SDK's in-memory exporter."""

from __future__ import annotations

from typing import Any

from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import StatusCode

from phasegraph.graphs.registry import get_protocol
from phasegraph.graphs.run import run, stream_graph
from phasegraph.nodes import telemetry
from phasegraph.nodes.agent_network.context import AgentNetworkContext
from phasegraph.nodes.settings import run_settings
from tests import user_tools
from tests.graphs.test_agent_network import QUESTION, route, scripted
from tests.graphs.test_agent_network_user_tools import Thread, approval_context

#: Words of the compiled triage prompt: they must not reach a span unless prompts are allowed.
PROMPT_WORDS = "the first agent to read a user's request"


def parent_of(span: ReadableSpan, finished: tuple[ReadableSpan, ...]) -> ReadableSpan:
    assert span.parent is not None
    return next(s for s in finished if s.context.span_id == span.parent.span_id)


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
    for tool_span, call_id in zip(tools, calls, strict=True):
        # nested in the step of the agent that decided the call: its span lasts until the call ends
        step = parent_of(tool_span, finished)
        assert step.name == "invoke_agent researcher" and step in steps
        decision = next(e for e in step.events if e.name == "gen_ai.agent.decision")
        assert (decision.attributes or {})["action"] == "USE_TOOL"
        assert (step.start_time or 0) <= (tool_span.start_time or 0)
        assert (tool_span.end_time or 0) <= (step.end_time or 0)
        attributes = tool_span.attributes or {}
        assert attributes["gen_ai.operation.name"] == "execute_tool"
        assert attributes["gen_ai.tool.name"] == tool_span.name.removeprefix("execute_tool ")
        assert attributes["gen_ai.tool.call.id"] == call_id
        assert tool_span.status.status_code != StatusCode.ERROR
    assert "use_tool" not in named  # the node that runs a step's call goes on in the step's span
    assert not any(
        PROMPT_WORDS in str(s.attributes) + str([e.attributes for e in s.events]) for s in finished
    )


async def test_a_call_held_for_approval_nests_in_its_agents_step_in_either_run(spans, tmp_path):
    """The step's span ends at the approval; the call, run by the resumed run, nests in that run's step span.

    The resumed run is a trace of its own (its root links to the first): the step it goes on with is an
    ``invoke_agent <agent>`` span there too, named for the same agent and step.
    """
    workspace = tmp_path / "ws"
    workspace.mkdir()
    context = approval_context(tmp_path, workspace)
    thread = Thread(context)
    events = await thread.send({"messages": [("user", "archive it all")]})
    assert [e.type for e in events] == ["agent_step", "approval_requested"]
    await context.aclose()  # the run paused: its root ends
    first = spans.get_finished_spans()
    (asked,) = by_name(first)["invoke_agent worker"]
    assert [e.name for e in asked.events][-2:] == ["phasegraph.approval_requested", "phasegraph.interrupt"]
    assert not any(s.name.startswith("execute_tool ") or s.name == "use_tool" for s in first)

    spans.clear()
    events = await thread.send(Command(resume="approve"))
    assert events[-1].type == "final"
    await context.aclose()
    finished = spans.get_finished_spans()
    (tool_span,) = by_name(finished)["execute_tool archive_everything"]
    parent = parent_of(tool_span, finished)
    assert parent.name == "invoke_agent worker" and parent.context.trace_id != asked.context.trace_id
    attributes, first_step = parent.attributes or {}, asked.attributes or {}
    assert attributes["gen_ai.agent.name"] == "worker"
    assert (attributes["phasegraph.step"], attributes["phasegraph.epoch"]) == (
        first_step["phasegraph.step"], first_step["phasegraph.epoch"],
    )  # fmt: skip
    assert "use_tool" not in by_name(finished)
    user_tools.ARCHIVED.clear()


async def test_a_run_stopped_before_the_call_ends_the_step_there_and_the_resumed_run_nests_the_call(spans):
    spec = get_protocol("agent_network")
    graph = spec.compile(InMemorySaver())
    context = AgentNetworkContext()
    config: Any = {"configurable": {"thread_id": context.request_id}}
    stops = {"interrupt_before": ["use_tool"]}
    inputs = {"messages": [("user", QUESTION)]}
    events = [e async for e in stream_graph(spec, graph, inputs, context, config, interrupts=stops)]
    await context.aclose()  # a breakpoint before the researcher's first call
    first = spans.get_finished_spans()
    decided = by_name(first)["invoke_agent researcher"]
    assert len(decided) == 1 and decided[0].end_time is not None  # ended with the run
    assert not any(s.name.startswith("execute_tool ") for s in first)

    spans.clear()
    rest = [e async for e in stream_graph(spec, graph, None, context, config, seq_start=events[-1].seq)]
    await context.aclose()
    assert rest[-1].type == "final"
    finished = spans.get_finished_spans()
    tools = sorted(
        (s for s in finished if s.name.startswith("execute_tool ")), key=lambda s: s.start_time or 0
    )
    parents = [parent_of(tool_span, finished) for tool_span in tools]
    steps = [(p.name, (p.attributes or {})["phasegraph.step"]) for p in parents]
    nesting = [(t.name, *step) for t, step in zip(tools, steps, strict=True)]
    assert nesting == [
        ("execute_tool search_files", "invoke_agent researcher", 2),  # the resumed step: use_tool's span
        ("execute_tool read_file", "invoke_agent researcher", 3),  # a step of the resumed run
    ]
    assert (parents[0].attributes or {})["phasegraph.node"] == "use_tool"
    assert (parents[1].attributes or {})["phasegraph.node"] == "run_agent_step"


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
