"""A loopback OTLP/HTTP collector for row 8, and the exporters the bench sends to it.

``python -m bench.otlp_sink`` serves ``POST /v1/traces`` and ``POST /v1/metrics`` on 127.0.0.1 (a port
of its own, printed on its first line), answers each export 200 with an empty OTLP response before
looking at it, then decodes the body (``opentelemetry-proto``) to count what arrived. ``GET /stats``
returns the counts as JSON. It runs as a process of its own, as a collector does, so its work is not
charged to the run that exports. ``Sink`` starts it and holds one OTLP/HTTP exporter of each kind to
it, kept across the bench's switches of providers (``KeptSpans``, ``KeptMetrics``).
"""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
import threading
import urllib.request
import zlib
from collections.abc import Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import ExportMetricsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.metrics.export import MetricExporter, MetricExportResult, MetricsData
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

_counts = {"span_requests": 0, "spans": 0, "metric_requests": 0, "data_points": 0, "bytes": 0}
_batches: list[int] = []  # spans in each traces request, in order
_lock = threading.Lock()
_idle = threading.Condition(_lock)
_in_flight = [0]  # exports answered and not yet counted


def _count(path: str, body: bytes) -> None:
    if path == "/v1/traces":
        traces = ExportTraceServiceRequest.FromString(body)
        spans = sum(len(s.spans) for r in traces.resource_spans for s in r.scope_spans)
        with _lock:
            _counts["span_requests"] += 1
            _counts["spans"] += spans
            _batches.append(spans)
    else:
        metrics = ExportMetricsServiceRequest.FromString(body)
        points = 0
        for resource in metrics.resource_metrics:
            for scope in resource.scope_metrics:
                for metric in scope.metrics:
                    kind = metric.WhichOneof("data")
                    points += len(getattr(metric, kind).data_points) if kind else 0
        with _lock:
            _counts["metric_requests"] += 1
            _counts["data_points"] += points


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive: the exporter's session reuses its connection

    def do_POST(self) -> None:
        """Take an export: answer at once, then count what it carried."""
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        if self.path not in ("/v1/traces", "/v1/metrics"):
            self._answer(404, b"", "text/plain")
            return
        with _lock:
            _in_flight[0] += 1
        try:
            self._answer(200, b"", "application/x-protobuf")  # an empty Export*ServiceResponse
            encoding = self.headers.get("Content-Encoding", "")
            if encoding == "gzip":
                body = gzip.decompress(body)
            elif encoding == "deflate":
                body = zlib.decompress(body)
            with _lock:
                _counts["bytes"] += len(body)
            _count(self.path, body)
        finally:
            with _lock:
                _in_flight[0] -= 1
                _idle.notify_all()

    def do_GET(self) -> None:
        """The counts so far, once every export already answered has been counted."""
        with _lock:
            _idle.wait_for(lambda: _in_flight[0] == 0, timeout=10)
            shown = json.dumps({**_counts, "batches": _batches}).encode()
        self._answer(200 if self.path == "/stats" else 404, shown, "application/json")

    def _answer(self, status: int, body: bytes, content_type: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        """Quiet: one line per export would drown the bench's output."""


class Sink:
    """The loopback collector (``bench.otlp_sink``, a subprocess) and one exporter of each kind to it."""

    def __init__(self) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "bench.otlp_sink"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.process.stdout is not None
        self.url = f"http://127.0.0.1:{int(self.process.stdout.readline())}"
        self.spans = OTLPSpanExporter(endpoint=f"{self.url}/v1/traces")
        self.metrics = OTLPMetricExporter(endpoint=f"{self.url}/v1/metrics")

    def stats(self) -> dict[str, Any]:
        """What the collector has counted of the exports it has answered (``batches``: spans per request)."""
        with urllib.request.urlopen(f"{self.url}/stats", timeout=5) as answer:
            return dict(json.loads(answer.read()))

    def close(self) -> None:
        """Shut the exporters down and end the collector."""
        self.spans.shutdown()
        self.metrics.shutdown()
        assert self.process.stdin is not None
        self.process.stdin.close()
        self.process.wait(timeout=10)


class KeptSpans(SpanExporter):
    """Hands batches to the sink's exporter and outlives the provider (a switch shuts providers down)."""

    def __init__(self, inner: SpanExporter) -> None:
        self.inner = inner

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        """Send ``spans`` through the kept exporter."""
        return self.inner.export(spans)

    def shutdown(self) -> None:
        """Keep the exporter (and its connection) for the next provider."""


class KeptMetrics(MetricExporter):
    """The metric twin of ``KeptSpans``, with the OTLP exporter's temporality and aggregation."""

    def __init__(self, inner: OTLPMetricExporter) -> None:
        super().__init__(inner._preferred_temporality, inner._preferred_aggregation)
        self.inner = inner

    def export(
        self, metrics_data: MetricsData, timeout_millis: float = 10_000, **kwargs: Any
    ) -> MetricExportResult:
        """Send one collection through the kept exporter."""
        return self.inner.export(metrics_data, timeout_millis)

    def force_flush(self, timeout_millis: float = 10_000) -> bool:
        """Nothing is held here."""
        return True

    def shutdown(self, timeout_millis: float = 30_000, **kwargs: Any) -> None:
        """Keep the exporter for the next provider."""


def main() -> None:
    """Serve until stdin closes (the bench ends it by closing the pipe)."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    print(server.server_address[1], flush=True)
    sys.stdin.read()
    server.shutdown()


if __name__ == "__main__":
    main()
