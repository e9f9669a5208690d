"""The one mapping from the event union to Server-Sent Events, and streams with keep-alive comments."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any, Literal, TypeVar

import anyio
from fastapi.sse import KEEPALIVE_COMMENT, EventSourceResponse, ServerSentEvent, format_sse_event
from starlette.types import Send

from phasegraph.nodes.errors import ConflictError
from phasegraph.nodes.events import Event
from phasegraph.server.runs.engine import ServerStopping
from phasegraph.server.runs.manager import RunManager
from phasegraph.server.storage.records import RequestRecord

T = TypeVar("T")


def to_sse(event: Event) -> ServerSentEvent:
    """``event: <type>``, ``id: <seq>``, ``data: <the event JSON>``."""
    return ServerSentEvent(event=event.type, id=str(event.seq), raw_data=event.to_json())


def frame(event: Event) -> bytes:
    """``to_sse(event)`` in the SSE wire format, without building the part first.

    The same bytes ``encode(to_sse(event))`` gives: an event's type is one word and its JSON has no
    line break (JSON escapes them), so neither needs splitting into lines.
    """
    return f"event: {event.type}\ndata: {event.to_json()}\nid: {event.seq}\n\n".encode()


async def follow_sse(
    manager: RunManager, record: RequestRecord, after: int, on_disconnect: str
) -> AsyncIterator[ServerSentEvent]:
    """Follow a request as SSE; a dropped connection pauses the run unless told to continue."""
    async for part in _follow(manager, record, after, on_disconnect, to_sse):
        yield part


def stream_events(
    manager: RunManager, record: RequestRecord, after: int, on_disconnect: str,
    headers: Mapping[str, str] | None = None,
) -> EventSourceResponse:  # fmt: skip
    """``follow_sse`` as a response, each event encoded once and those ready together sent in one write.

    Keep-alives are what these routes sent when FastAPI streamed them: ``: ping`` every 15 s.
    """
    events = _follow(manager, record, after, on_disconnect, frame)
    return sse_response(events, headers, keepalive=PING, every=PING_SECONDS)


async def _follow(
    manager: RunManager, record: RequestRecord, after: int, on_disconnect: str, shape: Callable[[Event], T]
) -> AsyncIterator[T]:
    finished = False
    try:
        async for event in manager.follow(record, after):
            yield shape(event)
        finished = True
    except ServerStopping:  # the run goes on elsewhere: its client follows it again from its last event
        finished = True
    finally:
        if not finished and on_disconnect == "stop":
            await settle_dropped(manager, record, "pause")


async def settle_dropped(
    manager: RunManager, record: RequestRecord, action: Literal["pause", "cancel"]
) -> None:
    """A client left before its run's end: pause the request (if running) or cancel it (if not over)."""
    with anyio.CancelScope(shield=True):  # the connection's scope is cancelled by now
        current = await manager.store.get(record.request_key)
        with contextlib.suppress(ConflictError):
            if current is not None and action == "pause" and current.status == "running":
                await manager.pause(current, reason="disconnected")
            elif current is not None and action == "cancel" and current.status in ("running", "paused"):
                await manager.cancel(current)


#: Seconds without a part after which a stream sends a keep-alive (the reference server: every 5 s).
KEEPALIVE_SECONDS = 5.0
#: A keep-alive: one SSE comment line and no blank line after it, so no client parser dispatches an
#: event for it (a blank line would: the JS SDK's repeats the last ``id`` with an empty event name).
KEEPALIVE = b": heartbeat\n"
#: The keep-alive and its interval of FastAPI's own SSE responses, which the native run routes keep.
PING, PING_SECONDS = KEEPALIVE_COMMENT, 15.0
#: Encoded bytes a stream's reader may hold for its writer before it waits for the client to read them.
BUFFER_BYTES = 64 * 1024
#: What every stream answers with besides its content type (no proxy buffering, no cache).
STREAM_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
#: The OpenAPI answer of a route streaming with ``sse_response`` (``response_class=StreamingResponse``).
SSE_DOC = {
    "description": "Server-Sent Events",
    "content": {
        "text/event-stream": {
            "itemSchema": {
                "type": "object",
                "properties": {
                    "data": {"type": "string"},
                    "event": {"type": "string"},
                    "id": {"type": "string"},
                    "retry": {"type": "integer", "minimum": 0},
                },
            }
        }
    },
}


def sse_answers(answers: dict[int | str, dict[str, Any]]) -> dict[int | str, dict[str, Any]]:
    """A streaming route's OpenAPI answers: its refusals, and its events as FastAPI documents them."""
    return {200: {**SSE_DOC, "description": "Successful Response"}, **answers}


def sse_response(
    parts: AsyncIterator[ServerSentEvent] | AsyncIterator[bytes],
    headers: Mapping[str, str] | None = None,
    *,
    keepalive: bytes = KEEPALIVE,
    every: float = KEEPALIVE_SECONDS,
) -> EventSourceResponse:
    """Stream ``parts`` (or their encoded bytes) as SSE, with ``keepalive`` after each quiet ``every`` s."""
    content = _with_keepalives(parts, keepalive, every)
    return _Closing(content, headers={**STREAM_HEADERS, **(headers or {})})


class _Closing(EventSourceResponse):
    """An SSE response that closes its parts when it ends, however it ends.

    Starlette cancels a response whose client left without closing its body's generator, whose
    own way out (pausing a run whose client left) would then wait for garbage collection.
    """

    async def stream_response(self, send: Send) -> None:
        """Stream the body; close it, shielded from the cancel that may have ended the stream."""
        try:
            await super().stream_response(send)
        finally:
            aclose = getattr(self.body_iterator, "aclose", None)
            if aclose is not None:
                with anyio.CancelScope(shield=True):
                    await aclose()


def encode(part: ServerSentEvent) -> bytes:
    """One part in the SSE wire format (its data as given: ``raw_data``)."""
    return format_sse_event(
        data_str=part.raw_data, event=part.event, id=part.id, retry=part.retry, comment=part.comment
    )


class _Relay:
    """Encoded parts handed from the task reading them to the response writing them, in batches."""

    def __init__(self) -> None:
        self.frames: list[bytes] = []
        self.size = 0
        self.ended = False
        self.failure: Exception | None = None
        self._waiter: asyncio.Future[None] | None = None  # of whichever side waits for the other

    def put(self, data: bytes) -> None:
        self.frames.append(data)
        self.size += len(data)
        self._wake()

    def end(self, failure: Exception | None) -> None:
        self.ended, self.failure = True, failure
        self._wake()

    def take(self) -> bytes:
        """Everything ready, as one chunk; the reader may go on."""
        data = self.frames[0] if len(self.frames) == 1 else b"".join(self.frames)
        self.frames.clear()
        self.size = 0
        self._wake()
        return data

    async def ready(self, timeout: float) -> bool:
        """Wait until something is ready (or the parts ended); False after ``timeout`` s of nothing."""
        if self.frames or self.ended:
            return True
        await self._wait(timeout)
        return bool(self.frames) or self.ended

    async def room(self) -> None:
        """Wait until the writer has taken what is ready (the client is slower than the parts)."""
        while self.size >= BUFFER_BYTES:
            await self._wait(None)

    async def _wait(self, timeout: float | None) -> None:
        loop = asyncio.get_running_loop()
        waiter = self._waiter = loop.create_future()
        timer = None if timeout is None else loop.call_later(timeout, _resolve, waiter)
        try:
            await waiter
        finally:
            if self._waiter is waiter:  # the other side may wait by now: its waiter stays
                self._waiter = None
            if timer is not None:
                timer.cancel()

    def _wake(self) -> None:
        if self._waiter is not None:
            _resolve(self._waiter)


def _resolve(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)


async def _with_keepalives(
    parts: AsyncIterator[ServerSentEvent] | AsyncIterator[bytes], keepalive: bytes, every: float
) -> AsyncIterator[bytes]:
    """The encoded parts, read by a task of their own so a quiet stream can send keep-alives.

    Whatever the reader has ready when the response writes goes in one chunk (a commit hands a
    follower all its events at once); the reader holds at most ``BUFFER_BYTES`` before it waits.
    When the client goes, the task is cancelled and waited for: what ``parts`` does on its way
    out (cancel a run its client asked to cancel on disconnect) is done before the response ends.
    """
    relay = _Relay()

    async def read() -> None:
        try:
            async for part in parts:
                relay.put(part if isinstance(part, bytes) else encode(part))
                if relay.size >= BUFFER_BYTES:
                    await relay.room()
        except Exception as exc:  # the stream's failure, raised where the response is written
            relay.end(exc)
        else:
            relay.end(None)
        finally:  # cancelled while waiting for room: the parts' own way out runs now, not at collection
            aclose = getattr(parts, "aclose", None)
            if aclose is not None:
                await aclose()

    reader = asyncio.create_task(read())
    try:
        while True:
            if not await relay.ready(every):
                yield keepalive
                continue
            if relay.frames:
                yield relay.take()
            elif relay.failure is not None:
                raise relay.failure
            else:
                return
    finally:
        reader.cancel()
        with anyio.CancelScope(shield=True), contextlib.suppress(asyncio.CancelledError):
            await reader
