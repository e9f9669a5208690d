"""Spans and metrics of any protocol's run, read back with the SDK's in-memory exporter and reader.

The end-to-end export (OTLP to a receiver, every protocol, through the server) is tests/test_otlp_export.py;
these check what the span handler and the run's root do in the cases a run can end in.
"""

from __future__ import annotations

import logging
from typing import Any

from langchain_core.messages import HumanMessage
from langgraph.checkpoint.memory import InMemorySaver
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import SpanKind, StatusCode

from phasegraph.graphs.registry import get_protocol
from phasegraph.graphs.run import run, stream_graph, stream_run
from phasegraph.nodes.events import ApprovalAnswered, IgnoredToolCall, StepStart
from phasegraph.nodes.logs import RunFieldsFilter
from phasegraph.nodes.settings import run_settings
from phasegraph.nodes.telemetry import metrics
from phasegraph.nodes.telemetry.handler import event_attributes
from phasegraph.nodes.triggered_phase.context import TriggeredPhaseContext
from tests.conftest import _clear_settings
from tests.graphs.test_failures import ProviderDown
from tests.helpers import metric_points, turn, write_script

SECRET = "sk-telemetry-secret-0123456789"


def _one(finished: tuple[ReadableSpan, ...], name: str) -> ReadableSpan:
    (span,) = [s for s in finished if s.name == name]
    return span


def _sum(points: list[Any], **attributes: Any) -> float:
    return sum(p.value for p in points if all(p.attributes.get(k) == v for k, v in attributes.items()))


async def test_a_run_is_a_root_with_node_model_and_tool_spans_and_its_events_on_them(
    spans, reader, workspace
):
    result = await run("triggered_phase", "Summarise the roadmap", workspace=str(workspace), thread_id="c-1")
    assert result.final is not None
    finished = spans.get_finished_spans()
    root = _one(finished, "invoke_agent triggered_phase")
    attributes = root.attributes or {}
    assert root.parent is None and attributes["phasegraph.outcome"] == "completed"
    assert attributes["gen_ai.conversation.id"] == "c-1"
    assert attributes["phasegraph.request_id"] == result.final.request_id
    nodes = [s for s in finished if s.parent is not None and s.parent.span_id == root.context.span_id]
    assert {s.name for s in nodes} <= set(get_protocol("triggered_phase").node_names())
    assert [s.name for s in sorted(nodes, key=lambda s: s.start_time or 0)][:3] == [
        "start_turn", "action_phase", "tool_phase",
    ]  # fmt: skip
    by_id = {s.context.span_id: s for s in finished}
    chats = [s for s in finished if s.name.startswith("chat ")]
    assert chats and all(s.kind == SpanKind.CLIENT for s in chats)
    assert all(by_id[s.parent.span_id].name == "action_phase" for s in chats if s.parent is not None)
    assert any((s.attributes or {}).get("gen_ai.usage.input_tokens", 0) > 0 for s in chats)
    assert any((s.attributes or {}).get("phasegraph.stream_cut") for s in chats)  # read up to a tool call
    assert all(s.status.status_code != StatusCode.ERROR for s in chats)  # a cut stream is no failure
    tools = [s for s in finished if s.name.startswith("execute_tool ")]
    calls = [e for e in result.events if e.type == "tool_call"]
    assert [(s.attributes or {})["gen_ai.tool.call.id"] for s in tools] == [e.call_id for e in calls]
    refusal = _one(finished, "refuse_duplicate")
    assert [e.name for e in refusal.events] == ["phasegraph.duplicate_tool_call"]
    assert "phasegraph.args" not in (refusal.events[0].attributes or {})  # content is off by default

    points = metric_points(reader)
    assert _sum(points["phasegraph.runs.started"], **{"phasegraph.protocol": "triggered_phase"}) == 1
    assert _sum(points["phasegraph.runs.ended"], **{"phasegraph.outcome": "completed"}) == 1
    assert _sum(points["phasegraph.tool.calls"], **{"phasegraph.status": "ok"}) == len(calls)
    assert _sum(points["phasegraph.tool.duplicates_refused"]) == 1
    tokens = {p.attributes["gen_ai.token.type"]: p.sum for p in points["gen_ai.client.token.usage"]}
    final_usage = [s for s in chats if (s.attributes or {}).get("gen_ai.usage.input_tokens")]
    assert tokens["input"] == sum((s.attributes or {})["gen_ai.usage.input_tokens"] for s in final_usage)
    assert _sum(points["phasegraph.model.cost"]) > 0


async def test_a_paused_run_ends_its_root_as_paused_and_its_resumption_links_to_it(spans, reader, workspace):
    spec = get_protocol("triggered_phase")
    graph = spec.compile(InMemorySaver())
    config: Any = {"configurable": {"thread_id": "t-pause"}}
    first = TriggeredPhaseContext(workspace=str(workspace))
    inputs = {"messages": [HumanMessage("Summarise the roadmap")]}
    stops = {"interrupt_before": ["tool_phase"]}
    events = [e async for e in stream_graph(spec, graph, inputs, first, config, interrupts=stops)]
    assert events[-1].type != "final"
    traceparent = first.run_trace().traceparent
    await first.aclose()
    root = _one(spans.get_finished_spans(), "invoke_agent triggered_phase")
    assert (root.attributes or {})["phasegraph.outcome"] == "paused"
    assert traceparent.split("-")[1] == f"{root.context.trace_id:032x}"

    spans.clear()
    again = TriggeredPhaseContext(
        workspace=str(workspace), request_id=first.request_id, trace_parent=traceparent
    )
    rest = [e async for e in stream_graph(spec, graph, None, again, config, seq_start=events[-1].seq)]
    await again.aclose()
    assert rest[-1].type == "final"
    resumed = _one(spans.get_finished_spans(), "invoke_agent triggered_phase")
    assert resumed.context.trace_id != root.context.trace_id
    assert [(link.context.trace_id, link.context.span_id) for link in resumed.links] == [
        (root.context.trace_id, root.context.span_id)
    ]
    attributes = resumed.attributes or {}
    assert attributes["phasegraph.resumed"] is True and attributes["phasegraph.outcome"] == "completed"
    started = metric_points(reader)["phasegraph.runs.started"]
    assert (
        _sum(started, **{"phasegraph.resumed": False}) == 1
        and _sum(started, **{"phasegraph.resumed": True}) == 1
    )


async def test_a_failed_run_marks_its_root_and_the_failing_model_call(spans, reader, tmp_path, workspace):
    result = await run("triggered_phase", "Summarise", workspace=str(workspace), chat_model=ProviderDown())
    assert result.error is not None
    root = _one(spans.get_finished_spans(), "invoke_agent triggered_phase")
    assert root.status.status_code == StatusCode.ERROR
    assert (root.attributes or {})["phasegraph.outcome"] == "failed"
    assert [e.name for e in root.events] == ["phasegraph.error"]
    failed = [s for s in spans.get_finished_spans() if s.status.status_code == StatusCode.ERROR]
    assert {s.name for s in failed} >= {"invoke_agent triggered_phase", "action_phase"}
    assert _sum(metric_points(reader)["phasegraph.runs.ended"], **{"phasegraph.outcome": "failed"}) == 1


async def test_content_reaches_spans_only_when_allowed_and_masked_of_secrets(
    spans, monkeypatch, tmp_path, workspace
):
    (workspace / "docs" / "secret.md").write_text(f"the key is {SECRET}\n", encoding="utf-8")
    script = write_script(tmp_path, turn("", ("read_file", {"path": "docs/secret.md"})), turn("Done."))
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    _clear_settings()
    try:
        await run("triggered_phase", "Read it", workspace=str(workspace), model=script)
        without = spans.get_finished_spans()
        spans.clear()
        monkeypatch.setenv("PHASEGRAPH_OTEL_CAPTURE_CONTENT", "true")
        run_settings.cache_clear()
        await run("triggered_phase", "Read it", workspace=str(workspace), model=script)
        with_content = spans.get_finished_spans()
    finally:
        _clear_settings()
    tool = _one(without, "execute_tool read_file")
    assert "gen_ai.tool.call.result" not in (tool.attributes or {})
    assert not any("gen_ai.input.messages" in (s.attributes or {}) for s in without)
    tool = _one(with_content, "execute_tool read_file")
    result = str((tool.attributes or {})["gen_ai.tool.call.result"])
    assert "the key is" in result and SECRET not in result
    assert '"path": "docs/secret.md"' in str((tool.attributes or {})["gen_ai.tool.call.arguments"])
    chats = [s for s in with_content if s.name.startswith("chat ")]
    assert any("Read it" in str((s.attributes or {}).get("gen_ai.input.messages")) for s in chats)
    assert not any(SECRET in str(s.attributes) + str([e.attributes for e in s.events]) for s in with_content)


async def test_calls_a_protocol_runs_itself_are_tool_spans_too(spans, workspace):
    result = await run("xml_contract", "Summarise the roadmap", workspace=str(workspace))
    assert result.final is not None
    finished = spans.get_finished_spans()
    by_id = {s.context.span_id: s for s in finished}
    tools = sorted(
        (s for s in finished if s.name.startswith("execute_tool ")), key=lambda s: s.start_time or 0
    )
    calls = [e for e in result.events if e.type == "tool_call"]
    assert [s.name for s in tools] == [f"execute_tool {e.name}" for e in calls]
    assert {(s.attributes or {})["gen_ai.tool.call.id"] for s in tools} == {e.call_id for e in calls}
    assert {by_id[s.parent.span_id].name for s in tools if s.parent is not None} == {"execute_blocks"}


async def test_secrets_stay_off_span_statuses_and_events_with_content_off(
    spans, monkeypatch, tmp_path, workspace
):
    path = f"docs/{SECRET}.md"  # no such file: the tool's error, and the refused repeat, name it
    call = turn("", ("read_file", {"path": path}))
    made_up = turn("", (f"tool_{SECRET}", {}))  # a tool name the model made up from what it read
    script = write_script(tmp_path, call, call, made_up, made_up, turn("No."))
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    _clear_settings()
    try:
        result = await run("triggered_phase", "Read it", workspace=str(workspace), model=script)
        failed = await run("triggered_phase", "Read it", workspace=str(workspace), chat_model=Leaky())
    finally:
        _clear_settings()
    assert [e.type for e in result.events if e.type in ("tool_result", "duplicate_tool_call")] == [
        "tool_result", "duplicate_tool_call", "tool_result", "duplicate_tool_call",
    ]  # fmt: skip
    assert failed.error is not None
    finished = spans.get_finished_spans()
    tool = _one(finished, "execute_tool read_file")
    assert tool.status.status_code == StatusCode.ERROR and "[REDACTED]" in str(tool.status.description)
    texts = [str(s.attributes) + str(s.status.description) + str([e.attributes for e in s.events])
             for s in finished]  # fmt: skip
    assert not any(SECRET in text for text in texts)
    assert any("[REDACTED]" in str(s.status.description) for s in finished if s.name == "chat model")
    refused = [e for s in finished if s.name == "refuse_duplicate" for e in s.events]
    assert [str((e.attributes or {})["phasegraph.name"]) for e in refused] == ["read_file", "tool_[REDACTED]"]


class Leaky(ProviderDown):
    """A provider whose error quotes the key it was given."""

    def _generate(self, *args: Any, **kwargs: Any) -> Any:
        raise ConnectionError(f"401 Unauthorized: Incorrect API key provided: {SECRET}")


def test_an_events_free_text_reaches_spans_only_with_content_on(monkeypatch):
    answered = ApprovalAnswered(call_id="c1", name="delete_file", decision="reject", args={"path": "x"},
                                reason="no: it deletes prod")  # fmt: skip
    assert event_attributes(answered) == {
        "phasegraph.callId": "c1", "phasegraph.name": "delete_file", "phasegraph.decision": "reject",
    }  # fmt: skip
    ignored = IgnoredToolCall(name="shout", reason="tools_unbound")  # a reason that is a kind, not text
    assert event_attributes(ignored) == {"phasegraph.name": "shout", "phasegraph.reason": "tools_unbound"}
    step = StepStart(step_id="s1", tool="create_project", args={}, rationale="the user asked for it")
    assert "phasegraph.rationale" not in event_attributes(step)
    monkeypatch.setenv("PHASEGRAPH_OTEL_CAPTURE_CONTENT", "true")
    run_settings.cache_clear()
    try:
        assert event_attributes(answered)["phasegraph.reason"] == "no: it deletes prod"
    finally:
        run_settings.cache_clear()


def test_tool_names_a_model_makes_up_are_bounded_metric_labels(monkeypatch):
    monkeypatch.setattr(metrics, "_tool_labels", set())
    monkeypatch.setattr(metrics, "MAX_TOOL_LABELS", 3)
    assert [metrics.tool_label(n) for n in ("read_file", "a", "b", "c", "read_file")] == [
        "read_file", "a", "b", "_other", "read_file",
    ]  # fmt: skip
    monkeypatch.setattr(metrics, "_tool_labels", set())
    assert metrics.tool_label("ignore previous instructions; {x}") == "_other"


async def test_a_callers_lines_between_events_do_not_carry_the_runs_ids(workspace):
    async for event in stream_run("triggered_phase", "Summarise the roadmap", workspace=str(workspace)):
        record = logging.LogRecord("app", logging.INFO, __file__, 1, "mine", None, None)
        RunFieldsFilter().filter(record)
        assert not hasattr(record, "request_id"), event.type
        if event.type == "tool_call":
            break  # the caller leaves the run: nothing of it stays bound
    record = logging.LogRecord("app", logging.INFO, __file__, 1, "mine", None, None)
    RunFieldsFilter().filter(record)
    assert not hasattr(record, "request_id")


async def test_each_turn_on_one_context_is_a_run_of_its_own(spans, workspace):
    context = TriggeredPhaseContext(workspace=str(workspace))
    saver = InMemorySaver()
    for message in ("Summarise the roadmap", "And again?"):
        events = [e async for e in stream_run("triggered_phase", message, context=context,
                                              checkpointer=saver, thread_id="t-turns")]  # fmt: skip
        assert events[-1].type == "final"
    roots = [s for s in spans.get_finished_spans() if s.parent is None]
    assert len(roots) == 2 and roots[0].context.trace_id != roots[1].context.trace_id
    assert all((r.attributes or {})["phasegraph.outcome"] == "completed" for r in roots)
    assert all(s.end_time is not None and s.end_time <= roots[1].end_time for s in spans.get_finished_spans())


async def test_a_python_tool_with_a_timeout_runs_on_its_own_thread_and_is_still_traced(
    spans, tmp_path, workspace
):
    """A tool with ``timeout_seconds`` runs on a daemon thread (a call given up holds no exit); its span and
    its parent are what any tool call's are."""
    model = write_script(tmp_path, turn("", ("word_count", {"text": "one two three"})), turn("Three."))
    project = tmp_path / "phasegraph.toml"
    project.write_text(
        f'model = "{model}"\n[python_tools]\nword_count = "tests.user_tools:word_count"\n'
        "[tools.word_count]\ntimeout_seconds = 30\n",
        encoding="utf-8",
    )
    result = await run("unified", "Count them.", workspace=str(workspace), config=str(project))
    [tool_result] = [e for e in result.events if e.type == "tool_result"]
    assert tool_result.status == "ok"
    finished = spans.get_finished_spans()
    tool = _one(finished, "execute_tool word_count")
    [call] = [e for e in result.events if e.type == "tool_call"]
    assert (tool.attributes or {})["gen_ai.tool.call.id"] == call.call_id
    by_id = {s.context.span_id: s for s in finished}
    assert tool.parent is not None and by_id[tool.parent.span_id].name != "execute_tool word_count"
