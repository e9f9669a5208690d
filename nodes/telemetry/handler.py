"""A LangChain callback handler that turns a graph run's nodes, model calls and tool calls into spans.

LangGraph reports every node it runs, and LangChain every model and tool call, to the callbacks of
the run's config, each with its parent: the handler opens a span for each node of the protocol's
graph (named after the node: ``action_phase``, ``decide_action``...), each model call
(``chat <model>``, with token usage) and each tool call (``execute_tool <tool>``), nested as they
ran. Everything else a graph runs (routing functions, a subgraph's own run) is not a span; what it
starts nests under the nearest span above it. ``note`` puts an event a node emits on that node's
span (refusals, budget stops, approvals, validation errors...). A node may leave its span open for
the node that runs next (``continue_span_in``): that node then runs within it, as one step.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any
from uuid import UUID

from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.outputs import LLMResult
from langgraph.config import get_config
from langgraph.errors import GraphBubbleUp
from opentelemetry import trace
from opentelemetry.trace import Span, SpanKind, Status, StatusCode

from phasegraph.nodes.errors import ConfigurationError
from phasegraph.nodes.events import EventBase
from phasegraph.nodes.prices import cost_usd
from phasegraph.nodes.redact import redactor
from phasegraph.nodes.telemetry import content, metrics
from phasegraph.nodes.telemetry.setup import tracer

#: Events not put on spans: model text (the chat span has it) and tool calls (their own spans).
UNNOTED = frozenset({"text", "tool_call", "tool_result", "phase_start", "agent_state"})
#: Envelope fields every event has: the span says them already.
ENVELOPE = frozenset({"type", "requestId", "projectId", "protocol", "seq", "ts"})
#: Event fields shown on spans always: ids, names, kinds, counts and flags (wire names). Any other field
#: (text a model or a person wrote, arguments, answers) only when content may be captured.
SHOWN = frozenset({
    "phase", "phaseIndex", "cycleIndex", "graphStep", "iteration", "contextRound", "step", "agent", "epoch",
    "contextType", "planId", "final", "reason", "chunksRead", "streamCut", "promptChars", "promptTokens",
    "retries", "callId", "name", "executionId", "stepIndex", "group", "attempts", "limit", "budget", "used",
    "decision", "decisionType", "tool", "status", "verdict", "confidence", "deferred", "action", "chars",
    "contextChars", "uris", "tools", "from", "to", "kind", "fallback", "allToolsFailed", "exit",
    "checkpointId", "fromPhaseIndex", "fork", "replacesFromSeq", "turn", "profile", "state", "stepId",
})  # fmt: skip
#: Fields of that list that hold free text in some events (a person's reason for a rejected approval).
FREE_TEXT = {"approval_requested": {"reason"}, "approval_answered": {"reason"}}


class _RunFailed(Exception):
    """The run failed while the span was open (its error event says why)."""


@dataclass
class _Opened:
    """A span the handler opened: its kind (node, chat, tool), start and first attributes."""

    span: Span
    kind: str
    attributes: dict[str, Any]
    started: float = field(default_factory=time.perf_counter)


class SpanHandler(BaseCallbackHandler):
    """Spans of one run's nodes, model calls and tool calls, under the run's root span."""

    run_inline = True  # called in the event loop, in order: no thread hop per callback

    def __init__(self, root: Span, protocol: str, settle: Callable[[EventBase], None]) -> None:
        self.root, self.protocol, self._settle = root, protocol, settle
        self._open: dict[UUID, _Opened] = {}
        self._under: dict[UUID, Span] = {}  # a run that is no span -> the span it nests under
        self._passing: dict[UUID, str] = {}  # a node's run -> the node its span is left open for
        self._held: tuple[str, Span] | None = None  # a span left open, and the node it waits for

    def span_of(self, run_id: UUID | None) -> Span:
        """The span a run is, or nests under (the root for a run the handler has not seen)."""
        if run_id is None:
            return self.root
        opened = self._open.get(run_id)
        return opened.span if opened is not None else self._under.get(run_id, self.root)

    def _start(self, run_id: UUID, parent: UUID | None, name: str, kind: str, attributes: dict[str, Any],
               span_kind: SpanKind = SpanKind.INTERNAL) -> Span:  # fmt: skip
        context = trace.set_span_in_context(self.span_of(parent))
        span = tracer().start_span(name, context=context, kind=span_kind, attributes=attributes)
        self._open[run_id] = _Opened(span, kind, attributes)
        return span

    def pass_on(self, run_id: UUID, node: str) -> None:
        """Leave the span of the node run ``run_id`` open for ``node``, the node that runs next."""
        if run_id in self._open:
            self._passing[run_id] = node

    def _end(self, run_id: UUID, error: BaseException | None = None) -> tuple[_Opened, float] | None:
        """End a run's span; its record and how long it was open (``None``: the run is no span).

        A node's span left open for the next node (``pass_on``) is held instead, unless the node failed.
        """
        self._under.pop(run_id, None)
        opened = self._open.pop(run_id, None)
        if opened is None:
            return None
        passed_to = self._passing.pop(run_id, None)
        if passed_to is not None and error is None:
            self._release_held()
            self._held = (passed_to, opened.span)
        else:
            _finish(opened.span, error)
        return opened, time.perf_counter() - opened.started

    def _release_held(self, error: BaseException | None = None) -> None:
        """End the span held for a node that did not run (the run stopped, or went elsewhere)."""
        held, self._held = self._held, None
        if held is not None:
            _finish(held[1], error)

    # Nodes

    def on_chain_start(self, serialized: dict[str, Any] | None, inputs: Any, *, run_id: UUID,
                       parent_run_id: UUID | None = None, tags: list[str] | None = None,
                       metadata: dict[str, Any] | None = None, **kwargs: Any) -> None:  # fmt: skip
        """A node of the graph opens a span; any other chain nests under its parent's."""
        node = (metadata or {}).get("langgraph_node")
        if (
            parent_run_id is not None
            and node is not None
            and kwargs.get("name") == node
            and any(t.startswith("graph:step:") for t in tags or ())
        ):
            step = int((metadata or {}).get("langgraph_step", 0))
            attributes = {"phasegraph.node": str(node), "phasegraph.graph_step": step}
            if self._held is not None and self._held[0] == node:  # it goes on in the span left for it
                self._open[run_id] = _Opened(self._held[1], "node", attributes)
                self._held = None
            else:
                self._release_held()
                self._start(run_id, parent_run_id, str(node), "node", attributes)
        else:
            self._under[run_id] = self.span_of(parent_run_id)

    def on_chain_end(self, outputs: Any, *, run_id: UUID, **kwargs: Any) -> None:
        """A node's span ends (its duration is recorded)."""
        self._ended(run_id, None)

    def on_chain_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        """A node failed, or stopped at an interrupt (not a failure)."""
        self._ended(run_id, error)

    def _ended(self, run_id: UUID, error: BaseException | None) -> None:
        ended = self._end(run_id, error)
        if ended is not None and ended[0].kind == "node":
            node = ended[0].attributes["phasegraph.node"]
            metrics.instruments().phase_duration.record(
                ended[1], {"phasegraph.protocol": self.protocol, "phasegraph.node": node}
            )

    # Model calls

    def on_chat_model_start(self, serialized: dict[str, Any] | None, messages: list[list[Any]], *,
                            run_id: UUID, parent_run_id: UUID | None = None,
                            metadata: dict[str, Any] | None = None, **kwargs: Any) -> None:  # fmt: skip
        """A model call opens ``chat <model>``."""
        model = str((metadata or {}).get("ls_model_name") or "model")
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": str((metadata or {}).get("ls_provider") or "unknown"),
            "gen_ai.request.model": model,
        }
        sent = messages[0] if messages else []
        attributes["phasegraph.prompt.chars"] = sum(len(str(getattr(m, "content", ""))) for m in sent)
        if content.allowed():
            attributes["gen_ai.input.messages"] = content.text(content.messages(sent))
        self._start(run_id, parent_run_id, f"chat {model}", "chat", attributes, SpanKind.CLIENT)

    def on_llm_end(self, response: LLMResult, *, run_id: UUID, **kwargs: Any) -> None:
        """The call's usage (tokens, cost) goes on its span and into the metrics."""
        opened = self._open.get(run_id)
        if opened is None:
            return
        span = opened.span
        generation = response.generations[0][0] if response.generations and response.generations[0] else None
        message = getattr(generation, "message", None)
        usage = getattr(message, "usage_metadata", None) or {}
        input_tokens, output_tokens = int(usage.get("input_tokens", 0)), int(usage.get("output_tokens", 0))
        if usage:
            span.set_attribute("gen_ai.usage.input_tokens", input_tokens)
            span.set_attribute("gen_ai.usage.output_tokens", output_tokens)
        answer = getattr(message, "response_metadata", {}) or {}
        if answer.get("model_name"):
            span.set_attribute("gen_ai.response.model", str(answer["model_name"]))
        if answer.get("finish_reason"):
            span.set_attribute("gen_ai.response.finish_reasons", [str(answer["finish_reason"])])
        if content.allowed() and generation is not None:
            span.set_attribute(
                "gen_ai.output.messages", content.text(content.messages([message or generation]))
            )
        self._model_ended(run_id, None, input_tokens, output_tokens)

    def on_llm_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        """A model call failed, or its stream was cut on purpose (read up to a tool call)."""
        if isinstance(error, GeneratorExit):
            opened = self._open.get(run_id)
            if opened is not None:
                opened.span.set_attribute("phasegraph.stream_cut", True)
            self._model_ended(run_id, None, 0, 0)
        else:
            self._model_ended(run_id, error, 0, 0)

    def _model_ended(
        self, run_id: UUID, error: BaseException | None, input_tokens: int, output_tokens: int
    ) -> None:
        opened = self._open.get(run_id)
        if opened is None:
            return
        model = {key: str(opened.attributes[key]) for key in ("gen_ai.provider.name", "gen_ai.request.model")}
        try:
            spec = f"{model['gen_ai.provider.name']}:{model['gen_ai.request.model']}"
            cost = cost_usd(spec, input_tokens, output_tokens)
        except ConfigurationError:  # a bad price table is reported where usage is shown
            cost = 0.0
        if cost:
            opened.span.set_attribute("phasegraph.cost_usd", cost)
        seconds = time.perf_counter() - opened.started
        self._end(run_id, error)
        metrics.model_call(self.protocol, model, input_tokens, output_tokens, cost, seconds)

    # Tool calls

    def on_tool_start(self, serialized: dict[str, Any] | None, input_str: str, *, run_id: UUID,
                      parent_run_id: UUID | None = None, inputs: dict[str, Any] | None = None,
                      **kwargs: Any) -> None:  # fmt: skip
        """A tool call opens ``execute_tool <tool>``."""
        name = str(kwargs.get("name") or (serialized or {}).get("name") or "tool")
        call_id = kwargs.get("tool_call_id") or (kwargs.get("metadata") or {}).get("phasegraph_call_id")
        attributes = _tool_attributes(name, str(call_id or ""), inputs or input_str)
        self._start(run_id, parent_run_id, f"execute_tool {name}", "tool", attributes)

    def on_tool_end(self, output: Any, *, run_id: UUID, **kwargs: Any) -> None:
        """The tool call's span ends (its result on it when content is allowed)."""
        opened = self._open.get(run_id)
        if opened is not None and content.allowed():
            opened.span.set_attribute(
                "gen_ai.tool.call.result", content.text(getattr(output, "content", output))
            )
        self._end(run_id)

    def on_tool_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        """The tool call failed."""
        self._end(run_id, error)

    def note(self, run_id: UUID | None, event: EventBase) -> None:
        """Put an event a node emitted on the span it ran in (a final or error also settles the run)."""
        if event.type in UNNOTED:  # type: ignore[attr-defined]
            return
        if event.type in ("final", "error"):  # type: ignore[attr-defined]
            self._settle(event)
        span = self.span_of(run_id)
        if span.is_recording():
            span.add_event(f"phasegraph.{event.type}", event_attributes(event))  # type: ignore[attr-defined]

    def close(self, error: str | None = None) -> None:
        """End every span still open (the run paused, or failed with ``error``, in the middle of them)."""
        failed = _RunFailed(error) if error is not None else None
        for run_id in list(self._open):
            self._passing.pop(run_id, None)  # the run stops: nothing comes next
            self._end(run_id, failed)
        self._release_held(failed)
        self._under.clear()


def _finish(span: Span, error: BaseException | None) -> None:
    """End a span, saying how its run ended when not plainly: stopped on purpose, or failed."""
    if isinstance(error, GraphBubbleUp):  # an interrupt or a handoff: control flow, not a failure
        span.add_event("phasegraph.interrupt", {"phasegraph.kind": type(error).__name__})
    elif isinstance(error, asyncio.CancelledError):  # a cancel, or a pause at shutdown: no failure
        span.add_event("phasegraph.cancelled")
    elif error is not None:
        span.set_status(Status(StatusCode.ERROR, redactor().text(str(error))[:200] or type(error).__name__))
        span.set_attribute("error.type", type(error).__qualname__)
    span.end()


def event_attributes(event: EventBase) -> dict[str, Any]:
    """An event's fields as span attributes: ids, kinds and counts always, content only when allowed."""
    attributes: dict[str, Any] = {}
    hidden = FREE_TEXT.get(str(getattr(event, "type", "")), set())
    for key, value in event.to_dict().items():
        if key in ENVELOPE:
            continue
        if (
            key in SHOWN
            and key not in hidden
            and (isinstance(value, str | int | float | bool) or _scalars(value))
        ):
            attributes[f"phasegraph.{key}"] = value
        elif content.allowed():
            attributes[f"phasegraph.{key}"] = content.text(value)
    return attributes


def _scalars(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(v, str) for v in value)


def note(event: EventBase) -> None:
    """Put an event on the span of the node emitting it (nothing outside a traced run)."""
    if event.type in UNNOTED:  # type: ignore[attr-defined]  # model text: many, and never noted
        return
    found = _current()
    if found is not None:  # as clients get it: no configured secret in it
        found[0].note(found[1], redactor().model(event))


@contextmanager
def tool_span(name: str, call_id: str, args: dict[str, Any]) -> Iterator[Span]:
    """An ``execute_tool`` span for a call a protocol runs itself (not as a LangChain tool).

    The caller sets an error status on the yielded span when the call failed.
    """
    found = _current()
    if found is None:
        yield trace.INVALID_SPAN
        return
    handler, parent = found
    context = trace.set_span_in_context(handler.span_of(parent))
    attributes = _tool_attributes(name, call_id, args)
    span = tracer().start_span(f"execute_tool {name}", context=context, attributes=attributes)
    try:
        yield span
    finally:
        span.end()


def _tool_attributes(name: str, call_id: str, args: Any) -> dict[str, Any]:
    """An ``execute_tool`` span's attributes; its arguments (not the run's injected context) if allowed."""
    attributes: dict[str, Any] = {
        "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": name, "gen_ai.tool.type": "function",
    }  # fmt: skip
    if call_id:
        attributes["gen_ai.tool.call.id"] = call_id
    if content.allowed():
        shown = {k: v for k, v in args.items() if k != "context"} if isinstance(args, dict) else args
        attributes["gen_ai.tool.call.arguments"] = content.text(shown)
    return attributes


def continue_span_in(node: str) -> None:
    """Leave the running node's span open for ``node``, the node the graph runs next, as one step.

    ``node`` runs within that span: what it starts (a tool call's ``execute_tool``) and emits nests
    there, and the span ends when ``node`` ends. If the run stops before ``node`` starts (a pause, a
    breakpoint, a failure) or another node runs first, the span ends then. A run resumed at ``node``
    has no such span (it is a new trace): ``node`` has its own.
    """
    found = _current()
    if found is not None and found[1] is not None:
        found[0].pass_on(found[1], node)


def current_span() -> Span:
    """The span of the node running now (a non-recording span outside a traced run)."""
    found = _current()
    return found[0].span_of(found[1]) if found is not None else trace.INVALID_SPAN


def _current() -> tuple[SpanHandler, UUID | None] | None:
    try:
        manager = get_config().get("callbacks")
    except RuntimeError:  # not inside a graph run
        return None
    for handler in getattr(manager, "handlers", None) or ():
        if isinstance(handler, SpanHandler):
            return handler, getattr(manager, "parent_run_id", None)
    return None


def root_span() -> Span:
    """The root span of the run going on now (a non-recording span outside a traced run)."""
    found = _current()
    return found[0].root if found is not None else trace.INVALID_SPAN
