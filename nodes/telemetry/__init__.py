"""OpenTelemetry for every protocol: spans named after the GenAI semantic conventions, and metrics.

``setup`` chooses where spans and metrics go (``PHASEGRAPH_OTEL_EXPORTER``); ``RunTrace`` is one
run's root span and the callback handler that opens a span per node, model call and tool call
beneath it; ``metrics`` holds the instruments (``shared``: and counts them for all of a server's
worker processes); ``content`` decides what text a span may carry.
"""

from phasegraph.nodes.telemetry.content import prompt_attributes
from phasegraph.nodes.telemetry.handler import (
    SpanHandler,
    continue_span_in,
    current_span,
    note,
    root_span,
    tool_span,
)
from phasegraph.nodes.telemetry.setup import (
    force_flush,
    meter,
    prometheus_registry,
    tracer,
    use_exporter,
    use_metric_reader,
)
from phasegraph.nodes.telemetry.spans import RunTrace

__all__ = [
    "RunTrace",
    "SpanHandler",
    "continue_span_in",
    "current_span",
    "force_flush",
    "meter",
    "note",
    "prometheus_registry",
    "prompt_attributes",
    "root_span",
    "tool_span",
    "tracer",
    "use_exporter",
    "use_metric_reader",
]
