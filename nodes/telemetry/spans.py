"""The spans of one run: a root for the run, and the handler that opens spans beneath it.

A run is one root span, ``invoke_agent <protocol>`` (agent_network renames its own
``invoke_workflow <network>``), begun when the run is accepted and ended when it ends or pauses
(``RunTrace.close``). Beneath it, ``phasegraph.nodes.telemetry.handler`` opens a span per node of
the protocol's graph, per model call and per tool call. A run resumed later (on another replica,
after a crash or a pause) is a new root that links to the first one's ``traceparent``.
"""

from __future__ import annotations

import time

from opentelemetry import trace
from opentelemetry.trace import Link, Span, SpanKind, Status, StatusCode
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
from opentelemetry.util.types import AttributeValue

from phasegraph.nodes.events import ErrorEvent, Event, EventBase, Final
from phasegraph.nodes.telemetry import metrics
from phasegraph.nodes.telemetry.handler import SpanHandler, event_attributes
from phasegraph.nodes.telemetry.setup import tracer

_PROPAGATOR = TraceContextTextMapPropagator()


class RunTrace:
    """The root span of one run (one attempt of a request), its outcome and its span handler."""

    def __init__(
        self, protocol: str, request_id: str, project_id: str, conversation: str = "", link: str = "",
        resumed: bool | None = None,
    ) -> None:  # fmt: skip
        """Begin the run's root; ``link``: the first run's traceparent (``resumed`` by default with one)."""
        self.protocol = protocol
        self.outcome: str | None = None
        self.started = time.perf_counter()
        first = _span_context(link) if link else None
        self.resumed = resumed if resumed is not None else first is not None
        attributes: dict[str, AttributeValue] = {
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.name": protocol,
            "phasegraph.protocol": protocol,
            "phasegraph.request_id": request_id,
            "phasegraph.project_id": project_id,
            "phasegraph.resumed": self.resumed,
        }
        if conversation:
            attributes["gen_ai.conversation.id"] = conversation
        self.root: Span = tracer().start_span(
            f"invoke_agent {protocol}", kind=SpanKind.INTERNAL, attributes=attributes,
            links=[Link(first, {"phasegraph.link": "first_run"})] if first is not None else None,
        )  # fmt: skip
        self.handler = SpanHandler(self.root, protocol, self.settle)
        self._closed = False
        self._error = ""
        metrics.instruments().runs_started.add(1, {"phasegraph.protocol": protocol,
                                                   "phasegraph.resumed": self.resumed})  # fmt: skip

    @property
    def traceparent(self) -> str:
        """The root's W3C ``traceparent`` (empty when no tracer provider records spans)."""
        carrier: dict[str, str] = {}
        _PROPAGATOR.inject(carrier, trace.set_span_in_context(self.root))
        return carrier.get("traceparent", "")

    @property
    def trace_id(self) -> str:
        """The run's trace id in hex (empty when spans are not recorded)."""
        context = self.root.get_span_context()
        return trace.format_trace_id(context.trace_id) if context.is_valid else ""

    def observe(self, event: Event) -> None:
        """Count what an event of the run's stream says (and settle the run by its final or error)."""
        metrics.observe(event)
        if isinstance(event, Final | ErrorEvent) and self.outcome is None:
            self.settle(event)

    def settle(self, event: EventBase) -> None:
        """Take the run's outcome from its final or error, as a node emits it.

        A failing node ends the run's root at once (``reports_errors`` closes the Context), before
        the stream delivers the error, so the node's own emit settles it.
        """
        if self._closed or self.outcome is not None:
            return
        if isinstance(event, Final):
            self.outcome = "completed"
        elif isinstance(event, ErrorEvent):
            self.outcome, self._error = "failed", f"{event.kind}: {event.message}"[:200]
            if self.root.is_recording():
                self.root.add_event("phasegraph.error", event_attributes(event))
                self.root.set_status(Status(StatusCode.ERROR, event.message[:200]))
                self.root.set_attribute("error.type", event.kind)

    def close(self, outcome: str | None = None) -> None:
        """End what is open and the root: the run ended (its outcome), or paused (``paused``)."""
        if self._closed:
            return
        self._closed = True
        ended = self.outcome or outcome or "paused"
        self.handler.close(self._error if ended == "failed" else None)
        if ended == "failed" and self.outcome is None:  # the server failed it (no error event of the run's)
            self.root.set_status(Status(StatusCode.ERROR, "the run failed outside its graph"))
        self.root.set_attribute("phasegraph.outcome", ended)
        self.root.end()
        attributes = {"phasegraph.protocol": self.protocol, "phasegraph.outcome": ended}
        tools = metrics.instruments()
        tools.runs_ended.add(1, attributes)
        tools.run_duration.record(time.perf_counter() - self.started, attributes)


def _span_context(traceparent: str) -> trace.SpanContext | None:
    context = trace.get_current_span(_PROPAGATOR.extract({"traceparent": traceparent})).get_span_context()
    return context if context.is_valid else None
