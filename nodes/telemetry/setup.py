"""OpenTelemetry spans for protocol runs, named after the GenAI semantic conventions.

The exporter is chosen by ``PHASEGRAPH_OTEL_EXPORTER``: ``otlp`` (the exporter reads the standard
``OTEL_EXPORTER_OTLP_*`` variables), ``console``, or ``none``, where spans go to the process's
global tracer provider: silent unless the application hosting phasegraph installed one.
``use_exporter`` installs another (tests use the SDK's in-memory exporter).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import (
    BatchSpanProcessor,
    ConsoleSpanExporter,
    SimpleSpanProcessor,
    SpanExporter,
)
from opentelemetry.trace import Span, SpanKind, Status, StatusCode, Tracer

from phasegraph.nodes.redact import redactor
from phasegraph.nodes.settings import run_settings

SCOPE = "phasegraph"
_provider: TracerProvider | None = None
_configured = False


def use_exporter(exporter: SpanExporter | None, *, batch: bool = False) -> TracerProvider | None:
    """Send phasegraph's spans to ``exporter`` (``None``: back to the global tracer provider)."""
    global _provider, _configured
    if _provider is not None:
        _provider.shutdown()
    _provider, _configured = None, True
    if exporter is not None:
        _provider = TracerProvider(resource=Resource.create({"service.name": SCOPE}))
        processor = BatchSpanProcessor(exporter) if batch else SimpleSpanProcessor(exporter)
        _provider.add_span_processor(processor)
    return _provider


def _configure_from_settings() -> None:
    choice = run_settings().otel_exporter
    if choice == "otlp":
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        use_exporter(OTLPSpanExporter(), batch=True)
    elif choice == "console":
        use_exporter(ConsoleSpanExporter())
    else:
        use_exporter(None)


def tracer() -> Tracer:
    """The tracer of phasegraph's spans (configured from the settings at first use)."""
    if not _configured:
        _configure_from_settings()
    if _provider is not None:
        return _provider.get_tracer(SCOPE)
    return trace.get_tracer(SCOPE)


def force_flush(timeout_ms: int = 5_000) -> bool:
    """Export every finished span now (what a short-lived process does before it answers)."""
    provider = _provider if _provider is not None else trace.get_tracer_provider()
    flush = getattr(provider, "force_flush", None)
    return bool(flush(timeout_ms)) if flush is not None else True


def prompt_attributes(prompt: str) -> dict[str, Any]:
    """A prompt as span attributes: its size always, its (secret-masked) text only when allowed."""
    attributes: dict[str, Any] = {"phasegraph.prompt.chars": len(prompt)}
    if run_settings().otel_capture_prompts:
        attributes["gen_ai.prompt"] = redactor().text(prompt)
    return attributes


class RunSpans:
    """The spans of one driven run: a root, and the step spans still open beneath it.

    A Context owns one; its driver closes the Context when the run ends or pauses, which ends
    whatever is still open, so nothing is left unexported.
    """

    def __init__(self, name: str, attributes: Mapping[str, Any]) -> None:
        self.name, self.attributes = name, dict(attributes)
        self._root: Span | None = None
        self._open: dict[str, Span] = {}

    def root(self) -> Span:
        """The run's root span (started at the first use)."""
        if self._root is None:
            self._root = tracer().start_span(self.name, kind=SpanKind.INTERNAL, attributes=self.attributes)
        return self._root

    def start(self, key: str, name: str, attributes: Mapping[str, Any], parent: str | None = None) -> Span:
        """Start a span under the span ``parent`` (still open in this process) or under the root."""
        above = self._open.get(parent) if parent is not None else None
        context = trace.set_span_in_context(above if above is not None else self.root())
        span = tracer().start_span(name, context=context, kind=SpanKind.INTERNAL, attributes=dict(attributes))
        self._open[key] = span
        return span

    def get(self, key: str) -> Span | None:
        """An open span."""
        return self._open.get(key)

    def end(self, key: str, error: str | None = None) -> None:
        """End an open span (with an error status when ``error``)."""
        span = self._open.pop(key, None)
        if span is not None:
            _finish(span, error)

    def close(self, error: str | None = None) -> None:
        """End every open span, then the root."""
        for key in list(self._open):
            self.end(key, error)
        if self._root is not None:
            _finish(self._root, error)
            self._root = None


def _finish(span: Span, error: str | None) -> None:
    if error is not None:
        span.set_status(Status(StatusCode.ERROR, error))
        span.set_attribute("error.type", error.split(":", 1)[0][:100])
    span.end()
