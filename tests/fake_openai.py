"""A real OpenAI-compatible HTTP server on loopback that answers from a queue of planned replies.

It speaks ``POST /v1/chat/completions`` with Server-Sent Events streaming, so the real ``openai``
client (with its own retries and timeouts) talks to it exactly as it talks to a provider. A
reply streams text and/or tool calls (the argument text in small pieces, as OpenAI sends it),
reports usage in a last chunk when the request asks for it (``stream_options.include_usage``),
honours ``stop`` as providers do (the text is cut before the first stop string, nothing after it is
sent, the finish reason is "stop"), and can stand for a server without tool calling (400 to any
request that carries ``tools``).
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

#: What a server without tool calling answers (Ollama's words) to a request that carries ``tools``.
NO_TOOLS_MESSAGE = "test-model does not support tools"


@dataclass
class ToolCall:
    """One streamed tool call: its name and its argument text, sent as is (it may be broken JSON)."""

    name: str
    arguments: str
    id: str = ""  # "call_fake_<index>" when empty


@dataclass
class Reply:
    """One planned answer: an HTTP error, a streamed completion (text, tool calls), or a hang."""

    status: int = 200
    text: str = ""
    body: dict[str, Any] | None = None  # the JSON error body for a non-200 status
    hang: bool = False  # never answer (until the server stops)
    tool_calls: list[ToolCall] = field(default_factory=list)  # streamed after the text
    piece_chars: int = 7  # argument text is streamed in pieces of this many characters
    prompt_tokens: int = 5  # reported when the request asks for usage
    completion_tokens: int = 2
    finish_reason: str = ""  # "tool_calls" after tool calls, else "stop"; "length" for a cut-off answer
    # A server without tool calling: a request carrying ``tools`` gets a 400, and this reply stays
    # planned for the next request.
    refuse_tools: bool = False


def error(status: int, message: str) -> Reply:
    """An OpenAI-style error reply."""
    return Reply(status=status, body={"error": {"message": message, "type": "error", "code": status}})


def tool_reply(name: str, arguments: dict[str, Any] | str, **options: Any) -> Reply:
    """A reply that streams one call of ``name``; ``arguments`` as a dict is sent as its JSON."""
    text = arguments if isinstance(arguments, str) else json.dumps(arguments)
    return Reply(tool_calls=[ToolCall(name, text)], **options)


@dataclass
class FakeOpenAI:
    """The server's plan and what it saw; the last reply repeats when the plan runs out."""

    replies: list[Reply]
    requests: list[dict[str, Any]] = field(default_factory=list)  # every request, refused ones too
    url: str = ""
    stopping: threading.Event = field(default_factory=threading.Event)
    lock: threading.Lock = field(default_factory=threading.Lock)
    served: int = 0  # planned replies used so far (a refused request uses none)
    # per streamed reply, in order: the stop string that cut it, or None
    stopped_by: list[str | None] = field(default_factory=list)

    def next_reply(self, payload: dict[str, Any]) -> Reply:
        with self.lock:
            self.requests.append(payload)
            reply = self.replies[min(self.served, len(self.replies) - 1)]
            if reply.refuse_tools and payload.get("tools"):
                return error(400, NO_TOOLS_MESSAGE)
            self.served += 1
            if reply.status != 200 or reply.hang:
                return reply
            reply, stopped = stopped_reply(reply, payload.get("stop"))
            self.stopped_by.append(stopped)
            return reply


def stopped_reply(reply: Reply, stop: str | list[str] | None) -> tuple[Reply, str | None]:
    """``reply`` as a provider honouring ``stop`` sends it, and the stop string that cut it (or None).

    The text is cut before the earliest stop string (which is not sent); nothing after it is sent,
    tool calls included, and the stream ends with finish_reason "stop".
    """
    sequences = [stop] if isinstance(stop, str) else list(stop or [])
    found = [(reply.text.find(s), s) for s in sequences if s and s in reply.text]
    if not found:
        return reply, None
    at, sequence = min(found)
    return replace(reply, text=reply.text[:at], tool_calls=[], finish_reason="stop"), sequence


def last_message(request: dict[str, Any]) -> str:
    """The text of a request's last message."""
    content = request["messages"][-1]["content"]
    return content if isinstance(content, str) else json.dumps(content)


def forced_tool(request: dict[str, Any]) -> str:
    """The one tool a request forces, checked to be the only one offered."""
    assert [t["type"] for t in request["tools"]] == ["function"]
    name = request["tools"][0]["function"]["name"]
    assert request["tool_choice"] == {"type": "function", "function": {"name": name}}
    return str(name)


def _chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    return {
        "id": "chatcmpl-fake",
        "object": "chat.completion.chunk",
        "created": 0,
        "model": "test-model",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }


def _stream(reply: Reply, payload: dict[str, Any]) -> list[dict[str, Any]]:
    """The chunks of a streamed completion, as OpenAI sends them."""
    silent = bool(reply.tool_calls) and not reply.text  # OpenAI's content is null before a call
    chunks = [_chunk({"role": "assistant", "content": None if silent else ""})]
    chunks += [_chunk({"content": word}) for word in re.findall(r"\S+\s*", reply.text)]
    for index, call in enumerate(reply.tool_calls):
        header = {"index": index, "id": call.id or f"call_fake_{index}", "type": "function"}
        chunks.append(_chunk({"tool_calls": [header | {"function": {"name": call.name, "arguments": ""}}]}))
        size = max(reply.piece_chars, 1)
        for start in range(0, len(call.arguments), size):
            piece = {"index": index, "function": {"arguments": call.arguments[start : start + size]}}
            chunks.append(_chunk({"tool_calls": [piece]}))
    finish = reply.finish_reason or ("tool_calls" if reply.tool_calls else "stop")
    chunks.append(_chunk({}, finish=finish))
    if (payload.get("stream_options") or {}).get("include_usage"):
        usage = {
            "prompt_tokens": reply.prompt_tokens,
            "completion_tokens": reply.completion_tokens,
            "total_tokens": reply.prompt_tokens + reply.completion_tokens,
        }
        chunks.append({**_chunk({}), "choices": [], "usage": usage})
    return chunks


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
            for chunk in _stream(reply, payload):
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
    # a short poll interval: shutdown() waits for it at the end of every test
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield fake
    finally:
        fake.stopping.set()
        server.shutdown()
        server.server_close()
        thread.join(10)
