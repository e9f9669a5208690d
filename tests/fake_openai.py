"""A real OpenAI-compatible HTTP server on loopback that answers from a queue of planned replies.

It speaks ``POST /v1/chat/completions`` with Server-Sent Events streaming, so the real ``openai``
client (with its own retries and timeouts) talks to it exactly as it talks to a provider.
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


@dataclass
class Reply:
    """One planned answer: an HTTP error, a streamed completion, or a hang."""

    status: int = 200
    text: str = ""
    body: dict[str, Any] | None = None  # the JSON error body for a non-200 status
    hang: bool = False  # never answer (until the server stops)


def error(status: int, message: str) -> Reply:
    """An OpenAI-style error reply."""
    return Reply(status=status, body={"error": {"message": message, "type": "error", "code": status}})


@dataclass
class FakeOpenAI:
    """The server's plan and what it saw; the last reply repeats when the plan runs out."""

    replies: list[Reply]
    requests: list[dict[str, Any]] = field(default_factory=list)
    url: str = ""
    stopping: threading.Event = field(default_factory=threading.Event)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def next_reply(self, payload: dict[str, Any]) -> Reply:
        with self.lock:
            self.requests.append(payload)
            index = min(len(self.requests), len(self.replies)) - 1
            return self.replies[index]


def _chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    return {
        "id": "chatcmpl-fake",
        "object": "chat.completion.chunk",
        "created": 0,
        "model": "test-model",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }


def _handler(fake: FakeOpenAI) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:  # keep test output quiet
            return

        def do_POST(self) -> None:
            length = int(self.headers.get("content-length", "0"))
            payload = json.loads(self.rfile.read(length) or b"{}")
            reply = fake.next_reply(payload)
            if reply.hang:
                fake.stopping.wait()
                return
            if reply.status != 200:
                body = json.dumps(reply.body or {}).encode()
                self.send_response(reply.status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(body)))
                self.send_header("retry-after-ms", "10")  # the openai client honours it: a short backoff
                self.end_headers()
                self.wfile.write(body)
                return
            self.send_response(200)
            self.send_header("content-type", "text/event-stream")
            self.send_header("connection", "close")
            self.end_headers()
            chunks = [_chunk({"role": "assistant", "content": ""})]
            chunks += [_chunk({"content": word}) for word in re.findall(r"\S+\s*", reply.text)]
            chunks.append(_chunk({}, finish="stop"))
            usage = {"prompt_tokens": 5, "completion_tokens": 2, "total_tokens": 7}
            chunks.append({**_chunk({}), "choices": [], "usage": usage})
            for chunk in chunks:
                self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
                self.wfile.flush()
            self.wfile.write(b"data: [DONE]\n\n")
            self.wfile.flush()
            self.close_connection = True

    return Handler


@contextmanager
def fake_openai(*replies: Reply) -> Iterator[FakeOpenAI]:
    """Serve ``replies`` on a free loopback port; ``fake.url`` is the OpenAI base URL."""
    fake = FakeOpenAI(replies=list(replies))
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(fake))
    server.daemon_threads = True
    fake.url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield fake
    finally:
        fake.stopping.set()
        server.shutdown()
        server.server_close()
        thread.join(10)
