"""The one mapping from the event union to Server-Sent Events, and streams with keep-alive comments."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Mapping
from typing import Literal

import anyio
from fastapi.sse import EventSourceResponse, ServerSentEvent, format_sse_event

from phasegraph.nodes.errors import ConflictError
from phasegraph.nodes.events import Event
from phasegraph.server.runs.manager import RunManager
from phasegraph.server.storage.records import RequestRecord


def to_sse(event: Event) -> ServerSentEvent:
    """``event: <type>``, ``id: <seq>``, ``data: <the event JSON>``."""
    return ServerSentEvent(event=event.type, id=str(event.seq), raw_data=event.to_json())


async def follow_sse(
    manager: RunManager, record: RequestRecord, after: int, on_disconnect: str
) -> AsyncIterator[ServerSentEvent]:
    """Follow a request as SSE; a dropped connection pauses the run unless told to continue."""
    finished = False
    try:
        async for event in manager.follow(record, after):
            yield to_sse(event)
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


def sse_response(
    parts: AsyncIterator[ServerSentEvent], headers: Mapping[str, str] | None = None
) -> EventSourceResponse:
    """Stream ``parts`` as SSE, with a keep-alive comment line after each quiet ``KEEPALIVE_SECONDS``."""
    return EventSourceResponse(_with_keepalives(parts), headers={**STREAM_HEADERS, **(headers or {})})


def encode(part: ServerSentEvent) -> bytes:
    """One part in the SSE wire format (its data as given: ``raw_data``)."""
    return format_sse_event(
        data_str=part.raw_data, event=part.event, id=part.id, retry=part.retry, comment=part.comment
    )


async def _with_keepalives(parts: AsyncIterator[ServerSentEvent]) -> AsyncIterator[bytes]:
    """The encoded parts, read by a task of their own so a quiet stream can send keep-alives.

    When the client goes, the task is cancelled and waited for: what ``parts`` does on its way
    out (cancel a run its client asked to cancel on disconnect) is done before the response ends.
    """
    queue: asyncio.Queue[bytes | Exception | None] = asyncio.Queue(maxsize=1)

    async def read() -> None:
        try:
            async for part in parts:
                await queue.put(encode(part))
        except Exception as exc:  # the stream's failure, raised where the response is written
            await queue.put(exc)
        await queue.put(None)

    reader = asyncio.create_task(read())
    waiting: asyncio.Future[bytes | Exception | None] | None = None
    try:
        while True:
            waiting = waiting or asyncio.ensure_future(queue.get())
            done, _ = await asyncio.wait({waiting}, timeout=KEEPALIVE_SECONDS)
            if not done:
                yield KEEPALIVE
                continue
            item, waiting = waiting.result(), None
            if item is None:
                return
            if isinstance(item, Exception):
                raise item
            yield item
    finally:
        for task in (waiting, reader):
            if task is not None:
                task.cancel()
        with anyio.CancelScope(shield=True), contextlib.suppress(asyncio.CancelledError):
            await reader
