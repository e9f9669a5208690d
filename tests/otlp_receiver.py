"""A loopback OTLP/HTTP receiver: what a collector would get from phasegraph, kept for the tests to read.

It is a real HTTP server on 127.0.0.1 (the standard library's, in a thread of its own) answering the
two OTLP/HTTP export routes, ``POST /v1/traces`` and ``POST /v1/metrics``, as a collector does:
protobuf bodies (JSON ones too), gzip- or deflate-encoded when ``Content-Encoding`` says so, decoded
with ``opentelemetry-proto`` and answered 200 with an empty ``Export*ServiceResponse``. Anything else
is answered as a collector would (404, 405, 400, 415), so an exporter that sends the wrong thing fails
the test instead of being believed.
"""

from __future__ import annotations

import gzip
import threading
import time
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, TypeVar

from google.protobuf import json_format
from google.protobuf.message import DecodeError, Message
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
    ExportMetricsServiceResponse,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.metrics.v1.metrics_pb2 import Metric
from opentelemetry.proto.trace.v1.trace_pb2 import Span, Status

T = TypeVar("T")
PROTOBUF = "application/x-protobuf"
JSON = "application/json"


@dataclass(frozen=True)
class SpanEvent:
    """One event of a span."""

    name: str
    attributes: dict[str, Any]


@dataclass(frozen=True)
class SpanLink:
    """A link from a span to another span's context."""

    trace_id: str
    span_id: str
    attributes: dict[str, Any]


@dataclass(frozen=True)
class ReceivedSpan:
    """One span as it arrived (ids in lowercase hex, ``parent_span_id`` empty for a root)."""

    name: str
    trace_id: str
    span_id: str
    parent_span_id: str
    kind: str  # INTERNAL, CLIENT, SERVER, PRODUCER, CONSUMER
    attributes: dict[str, Any]
    events: list[SpanEvent]
    links: list[SpanLink]
    status: str  # UNSET, OK, ERROR
    status_message: str
    resource: dict[str, Any]
    scope: str
    start_ns: int
    end_ns: int

    def event_names(self) -> list[str]:
        """The names of the span's events, in order."""
        return [event.name for event in self.events]


@dataclass(frozen=True)
class MetricPoint:
    """One data point: its attributes and value (a histogram's ``value`` is its count)."""

    attributes: dict[str, Any]
    value: float
    total: float | None = None  # a histogram's sum


@dataclass
class Received:
    """Everything the receiver was sent."""

    spans: list[ReceivedSpan] = field(default_factory=list)
    #: Each metric's points as of the last export that carried it (cumulative: later supersedes earlier).
    metrics: dict[str, list[MetricPoint]] = field(default_factory=dict)
    units: dict[str, str] = field(default_factory=dict)
    #: (path, Content-Type, Content-Encoding) of every export request, in order of arrival.
    requests: list[tuple[str, str, str]] = field(default_factory=list)
    #: ``time.monotonic()`` when the last span arrived.
    last_span_at: float = 0.0


class OtlpReceiver:
    """An OTLP/HTTP endpoint on a free loopback port; ``start``, then read what arrived."""

    def __init__(self) -> None:
        self._received = Received()
        self._changed = threading.Condition()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(self))
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, name="otlp-receiver", daemon=True)

    @property
    def endpoint(self) -> str:
        """The base URL an exporter's ``OTEL_EXPORTER_OTLP_ENDPOINT`` names."""
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def start(self) -> OtlpReceiver:
        """Serve in the background."""
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and free the port."""
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(5)

    # What arrived

    def spans(self) -> list[ReceivedSpan]:
        """Every span received so far, in order of arrival."""
        with self._changed:
            return list(self._received.spans)

    def metric(self, name: str) -> list[MetricPoint]:
        """The latest points of metric ``name`` (empty when it never arrived)."""
        with self._changed:
            return list(self._received.metrics.get(name, []))

    def unit(self, name: str) -> str:
        """The unit metric ``name`` arrived with."""
        with self._changed:
            return self._received.units.get(name, "")

    def quiet_for(self, seconds: float) -> bool:
        """Whether spans arrived, the last of them ``seconds`` ago or longer."""
        with self._changed:
            last = self._received.last_span_at
            return bool(last) and time.monotonic() - last >= seconds

    def requests(self) -> list[tuple[str, str, str]]:
        """(path, Content-Type, Content-Encoding) of every export request so far."""
        with self._changed:
            return list(self._received.requests)

    def wait_for(self, found: Callable[[], T | None], timeout: float, what: str) -> T:
        """Until ``found()`` gives something truthy (checked at each export); fails after ``timeout`` s."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while True:
                result = found()
                if result:
                    return result
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"the receiver never got {what} in {timeout} s")
                self._changed.wait(min(left, 0.5))

    # Called by the request handler

    def _add_spans(self, request: ExportTraceServiceRequest) -> None:
        spans = [
            _span(span, _attributes(resource.resource.attributes), scoped.scope.name)
            for resource in request.resource_spans
            for scoped in resource.scope_spans
            for span in scoped.spans
        ]
        with self._changed:
            self._received.spans.extend(spans)
            self._received.last_span_at = time.monotonic()
            self._changed.notify_all()

    def _add_metrics(self, request: ExportMetricsServiceRequest) -> None:
        metrics = [
            m for resource in request.resource_metrics for s in resource.scope_metrics for m in s.metrics
        ]
        with self._changed:
            for metric in metrics:
                self._received.metrics[metric.name] = _points(metric)
                self._received.units[metric.name] = metric.unit
            self._changed.notify_all()

    def _add_request(self, path: str, content_type: str, encoding: str) -> None:
        with self._changed:
            self._received.requests.append((path, content_type, encoding))


@contextmanager
def otlp_receiver() -> Iterator[OtlpReceiver]:
    """A started receiver, stopped at the end."""
    receiver = OtlpReceiver().start()
    try:
        yield receiver
    finally:
        receiver.stop()


#: Route -> the request message it takes, the response it answers, and where its contents go.
_ROUTES: dict[str, tuple[type[Message], type[Message], str]] = {
    "/v1/traces": (ExportTraceServiceRequest, ExportTraceServiceResponse, "_add_spans"),
    "/v1/metrics": (ExportMetricsServiceRequest, ExportMetricsServiceResponse, "_add_metrics"),
}


def _handler_for(receiver: OtlpReceiver) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive, as exporters expect

        def do_POST(self) -> None:
            route = _ROUTES.get(self.path)
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length)
            if route is None:
                self._answer(404, "text/plain", b"no such OTLP route")
                return
            content_type = (self.headers.get("Content-Type") or "").split(";")[0].strip()
            encoding = (self.headers.get("Content-Encoding") or "").strip().lower()
            receiver._add_request(self.path, content_type, encoding)
            request_type, response_type, add = route
            try:
                raw = _decompress(body, encoding)
                message = request_type()
                if content_type == PROTOBUF:
                    message.ParseFromString(raw)
                elif content_type == JSON:
                    json_format.Parse(raw, message)
                else:
                    self._answer(415, "text/plain", f"unsupported content type {content_type!r}".encode())
                    return
            except (OSError, EOFError, zlib.error, DecodeError, json_format.ParseError, ValueError) as exc:
                self._answer(400, "text/plain", f"undecodable export: {exc}".encode())
                return
            getattr(receiver, add)(message)
            reply = response_type()
            if content_type == JSON:
                self._answer(200, JSON, json_format.MessageToJson(reply).encode())
            else:
                self._answer(200, PROTOBUF, reply.SerializeToString())

        def do_GET(self) -> None:
            self._answer(405, "text/plain", b"OTLP routes take POST")

        def _answer(self, status: int, content_type: str, body: bytes) -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            """Quiet: a test's output is not the place for an access log."""

    return Handler


def _decompress(body: bytes, encoding: str) -> bytes:
    if encoding in ("", "identity"):
        return body
    if encoding == "gzip":
        return gzip.decompress(body)
    if encoding == "deflate":
        return zlib.decompress(body)
    raise ValueError(f"unsupported content encoding {encoding!r}")


def _value(value: AnyValue) -> Any:
    which = value.WhichOneof("value")
    if which is None:
        return None
    if which == "array_value":
        return [_value(v) for v in value.array_value.values]
    if which == "kvlist_value":
        return _attributes(value.kvlist_value.values)
    return getattr(value, which)


def _attributes(pairs: Any) -> dict[str, Any]:
    found: dict[str, Any] = {}
    pair: KeyValue
    for pair in pairs:
        found[pair.key] = _value(pair.value)
    return found


def _span(span: Span, resource: dict[str, Any], scope: str) -> ReceivedSpan:
    return ReceivedSpan(
        name=span.name,
        trace_id=span.trace_id.hex(),
        span_id=span.span_id.hex(),
        parent_span_id=span.parent_span_id.hex(),
        kind=Span.SpanKind.Name(span.kind).removeprefix("SPAN_KIND_"),
        attributes=_attributes(span.attributes),
        events=[SpanEvent(e.name, _attributes(e.attributes)) for e in span.events],
        links=[SpanLink(k.trace_id.hex(), k.span_id.hex(), _attributes(k.attributes)) for k in span.links],
        status=Status.StatusCode.Name(span.status.code).removeprefix("STATUS_CODE_"),
        status_message=span.status.message,
        resource=resource,
        scope=scope,
        start_ns=span.start_time_unix_nano,
        end_ns=span.end_time_unix_nano,
    )


def _points(metric: Metric) -> list[MetricPoint]:
    data = metric.WhichOneof("data")
    if data in ("sum", "gauge"):
        return [
            MetricPoint(
                _attributes(p.attributes), p.as_int if p.WhichOneof("value") == "as_int" else p.as_double
            )
            for p in getattr(metric, data).data_points
        ]
    if data in ("histogram", "exponential_histogram"):
        return [
            MetricPoint(_attributes(p.attributes), p.count, p.sum) for p in getattr(metric, data).data_points
        ]
    return []  # summaries: no phasegraph instrument makes one
