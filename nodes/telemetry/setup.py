"""Where phasegraph's spans and metrics go: the tracer and meter providers, chosen once per process.

``PHASEGRAPH_OTEL_EXPORTER`` picks the exporter: ``otlp`` (the OTLP/HTTP exporters read the standard
``OTEL_EXPORTER_OTLP_*`` variables), ``console``, or ``none``. With ``none``, spans go to the
process's global tracer provider (silent unless the application hosting phasegraph installed one).
Metrics have a Prometheus reader on a registry of their own (what ``GET /metrics`` serves) or, when
the processes of a server share them (``PROMETHEUS_MULTIPROC_DIR``), are written to the shared files
too, which ``GET /metrics`` reads instead (``shared``); ``otlp`` exports them too. ``use_exporter``
and ``use_metric_reader`` install others (tests read spans and metrics back with the SDK's in-memory
exporter and reader).
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

from opentelemetry import trace
from opentelemetry.metrics import Meter
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import MetricReader, PeriodicExportingMetricReader
from opentelemetry.sdk.resources import OTELResourceDetector, Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import (
    BatchSpanProcessor,
    ConsoleSpanExporter,
    SimpleSpanProcessor,
    SpanExporter,
)
from opentelemetry.trace import Tracer

from phasegraph.nodes.settings import run_settings

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry

SCOPE = "phasegraph"
#: ``service.name`` is phasegraph unless ``OTEL_SERVICE_NAME`` / ``OTEL_RESOURCE_ATTRIBUTES`` say otherwise.
RESOURCE = Resource.create({"service.name": SCOPE}).merge(OTELResourceDetector().detect())
_provider: TracerProvider | None = None
_configured = False
_tracer: Tracer | None = None
_meters: MeterProvider | None = None
_registry: CollectorRegistry | None = None


def use_exporter(exporter: SpanExporter | None, *, batch: bool = False) -> TracerProvider | None:
    """Send phasegraph's spans to ``exporter`` (``None``: back to the global tracer provider)."""
    global _provider, _configured, _tracer
    if _provider is not None:
        _provider.shutdown()
    _provider, _configured, _tracer = None, True, None
    if exporter is not None:
        _provider = TracerProvider(resource=RESOURCE)
        processor = BatchSpanProcessor(exporter) if batch else SimpleSpanProcessor(exporter)
        _provider.add_span_processor(processor)
    return _provider


def _configure_from_settings() -> None:
    choice = run_settings().otel_exporter
    if choice == "otlp":
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        use_exporter(OTLPSpanExporter(), batch=True)
    elif choice == "console":  # on standard error, a span a line: standard output is a command's answer
        use_exporter(
            ConsoleSpanExporter(out=sys.stderr, formatter=lambda span: span.to_json(indent=None) + "\n")
        )
    else:
        use_exporter(None)


def tracer() -> Tracer:
    """The tracer of phasegraph's spans (configured from the settings at first use).

    Kept until the exporter changes: the SDK's ``get_tracer`` builds a scope object and takes a lock
    at every call, which a span per node and call would pay each time.
    """
    global _tracer
    if not _configured:
        _configure_from_settings()
    if _tracer is None:  # the global provider's is a proxy: it follows whatever provider is set later
        _tracer = _provider.get_tracer(SCOPE) if _provider is not None else trace.get_tracer(SCOPE)
    return _tracer


def use_metric_reader(reader: MetricReader | None = None) -> MeterProvider:
    """A new meter provider: the Prometheus reader, the OTLP exporter when chosen, and ``reader``.

    Instruments are made again for the new provider (``phasegraph.nodes.telemetry.metrics``).
    """
    global _meters, _registry
    # The Prometheus client at the first metric, not at start-up: a server that is only asked for
    # its health, and a command that records no metric, never load it.
    from opentelemetry.exporter.prometheus import PrometheusMetricReader
    from prometheus_client import CollectorRegistry

    if _meters is not None:
        _meters.shutdown()
    readers: list[MetricReader] = []
    if shared_folder():
        from phasegraph.nodes.telemetry.shared import scrape_registry

        _registry = scrape_registry(shared_folder(), RESOURCE)
    else:
        _registry = CollectorRegistry(auto_describe=True)
        readers.append(PrometheusMetricReader(registry=_registry))
    if run_settings().otel_exporter == "otlp":
        from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter

        readers.append(PeriodicExportingMetricReader(OTLPMetricExporter()))
    if reader is not None:
        readers.append(reader)
    _meters = MeterProvider(metric_readers=readers, resource=RESOURCE)
    return _meters


def meter() -> Meter:
    """The meter of phasegraph's instruments (the provider is made at first use)."""
    return (_meters or use_metric_reader()).get_meter(SCOPE)


def shared_folder() -> str:
    """The folder this server's processes share their metrics in (empty: this process counts alone)."""
    return run_settings().shared_metrics_dir


def prometheus_registry() -> CollectorRegistry:
    """The registry ``GET /metrics`` renders (phasegraph's metrics, read at each scrape)."""
    if _registry is None:
        use_metric_reader()
    assert _registry is not None
    return _registry


def force_flush(timeout_ms: int = 5_000) -> bool:
    """Export every finished span and metric now (what a short-lived process does before it exits)."""
    provider = _provider if _provider is not None else trace.get_tracer_provider()
    flush = getattr(provider, "force_flush", None)
    flushed = bool(flush(timeout_ms)) if flush is not None else True
    if _meters is not None:
        flushed = _meters.force_flush(timeout_ms) and flushed
    return flushed


def current_meter_provider() -> MeterProvider | None:
    """The meter provider phasegraph's instruments belong to now."""
    return _meters
