"""A real LangSmith-compatible HTTP server on loopback that records the runs a tracer sends it.

It answers what the ``langsmith`` client (0.15) asks of a LangSmith API when ``LANGSMITH_TRACING`` is on:
``GET /info`` (which tells the client how to send: zstd-compressed multipart, plain multipart, or JSON
batches), ``POST /runs/multipart`` (one form part per run operation, ``post.<id>`` or ``patch.<id>``, its
big fields in parts of their own such as ``post.<id>.inputs``; optionally a zstd-compressed body),
``POST /runs/batch`` (``{"post": [...], "patch": [...]}``), and the single-run ``POST /runs`` and
``PATCH /runs/<id>``. Every request is recorded with its headers and decoded body; the runs are merged
by id (a patch adds its end time and outputs to the run its post created). Anything else is answered 404
and kept in ``unexpected``.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import zstandard

#: The form part names the client uses: ``post.<id>``, ``patch.<id>.outputs``, ``attachment.<id>.<name>``.
PART_NAME = re.compile(r"^(post|patch)\.([0-9a-f-]{36})(?:\.(\w+))?$")
#: How long one request body may take to arrive before the handler gives up on it.
READ_TIMEOUT = 10


@dataclass
class Received:
    """One request as the receiver saw it: method, path, headers (lower-cased names), decoded body."""

    method: str
    path: str
    headers: dict[str, str]
    body: bytes


@dataclass
class LangSmithReceiver:
    """What a fake LangSmith API was sent; ``mode`` picks what its ``/info`` offers the client."""

    mode: str = "zstd"  # "zstd": compressed multipart; "multipart": plain multipart; "batch": JSON batches
    url: str = ""
    requests: list[Received] = field(default_factory=list)
    runs: dict[str, dict[str, Any]] = field(default_factory=dict)
    unexpected: list[Received] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def info(self) -> dict[str, Any]:
        """The ``/info`` answer: a LangSmith server, with or without compressed multipart ingestion."""
        return {
            "version": "0.10.0",
            "instance_flags": {"zstd_compression_enabled": self.mode == "zstd"},
            "batch_ingest_config": {
                "use_multipart_endpoint": self.mode != "batch",
                "size_limit": 100,
                "size_limit_bytes": 20_971_520,
                "scale_up_qsize_trigger": 1000,
                "scale_up_nthreads_limit": 16,
                "scale_down_nempty_trigger": 4,
            },
        }

    def record(self, received: Received) -> bool:
        """Keep a request and the run operations it carries; False for a request LangSmith would refuse."""
        with self._lock:
            self.requests.append(received)
            if received.method == "POST" and received.path == "/runs/multipart":
                for name, value in multipart_parts(received):
                    self._part(name, value)
            elif received.method == "POST" and received.path == "/runs/batch":
                batch = json.loads(received.body)
                for operation in ("post", "patch"):
                    for run in batch.get(operation) or []:
                        self._merge(str(run["id"]), run)
            elif received.method == "POST" and received.path == "/runs":
                run = json.loads(received.body)
                self._merge(str(run["id"]), run)
            elif received.method == "PATCH" and received.path.startswith("/runs/"):
                self._merge(received.path.removeprefix("/runs/"), json.loads(received.body))
            else:
                self.unexpected.append(received)
                return False
            return True

    def _part(self, name: str, value: bytes) -> None:
        matched = PART_NAME.match(name)
        if matched is None:  # an attachment: kept in the request, not in the run
            return
        _, run_id, key = matched.groups()
        data = json.loads(value)
        self._merge(run_id, {key: data} if key else data)

    def _merge(self, run_id: str, fields: dict[str, Any]) -> None:
        run = self.runs.setdefault(run_id, {"id": run_id})
        for key, value in fields.items():
            if value is not None:
                run[key] = value

    def snapshot(self) -> dict[str, dict[str, Any]]:
        """A copy of the runs received so far, by id."""
        with self._lock:
            return {run_id: dict(run) for run_id, run in self.runs.items()}

    def payload_bytes(self) -> bytes:
        """Every request body received (decompressed), joined: what left the process."""
        with self._lock:
            return b"\n".join(r.body for r in self.requests)


def multipart_parts(received: Received) -> list[tuple[str, bytes]]:
    """The ``(name, content)`` of each part of a ``multipart/form-data`` body."""
    found = re.search(r'boundary="?([^";]+)"?', received.headers.get("content-type", ""))
    if found is None:
        raise ValueError(f"multipart without a boundary: {received.headers}")
    delimiter = b"--" + found.group(1).encode()
    parts = []
    for chunk in received.body.split(delimiter)[1:]:
        if chunk.startswith(b"--"):  # the closing delimiter
            break
        head, _, content = chunk.removeprefix(b"\r\n").partition(b"\r\n\r\n")
        named = re.search(rb'name="([^"]+)"', head)
        if named is None:
            raise ValueError(f"a form part without a name: {head!r}")
        parts.append((named.group(1).decode(), content.removesuffix(b"\r\n")))
    return parts


def _read_body(handler: BaseHTTPRequestHandler) -> bytes:
    """The request body, by ``Content-Length`` or chunked, decompressed when it says ``zstd``."""
    if handler.headers.get("Transfer-Encoding", "").lower() == "chunked":
        pieces = []
        while size := int(handler.rfile.readline().split(b";")[0], 16):
            pieces.append(handler.rfile.read(size))
            handler.rfile.readline()
        handler.rfile.readline()
        body = b"".join(pieces)
    else:
        body = handler.rfile.read(int(handler.headers.get("Content-Length") or 0))
    if handler.headers.get("Content-Encoding", "").lower() == "zstd":
        # The client streams its frames without a content size: decompress as a stream, every frame.
        body = zstandard.ZstdDecompressor().decompressobj(read_across_frames=True).decompress(body)
    return body


def _handler(receiver: LangSmithReceiver) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        timeout = READ_TIMEOUT

        def _answer(self, status: int, payload: dict[str, Any]) -> None:
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _ingest(self) -> None:
            body = _read_body(self)
            headers = {name.lower(): value for name, value in self.headers.items()}
            accepted = receiver.record(Received(self.command, self.path, headers, body))
            self._answer(202 if accepted else 404, {} if accepted else {"detail": "Not Found"})

        def do_GET(self) -> None:
            if self.path == "/info":
                self._answer(200, receiver.info())
            else:
                self._ingest()

        do_POST = _ingest
        do_PATCH = _ingest

        def log_message(self, format: str, *args: Any) -> None:
            """Keep the test output quiet."""

    return Handler


@contextmanager
def langsmith_receiver(mode: str = "zstd") -> Iterator[LangSmithReceiver]:
    """Serve a fake LangSmith API on 127.0.0.1 (a free port) for the duration of the block."""
    receiver = LangSmithReceiver(mode=mode)
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(receiver))
    server.daemon_threads = True
    receiver.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield receiver
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
