"""The one mapping from the event union to Server-Sent Events."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

import anyio
from fastapi.sse import ServerSentEvent

from nodes.errors import ConflictError
from nodes.events import Event
from server.runs import RunManager
from server.store import RequestRecord


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
            with anyio.CancelScope(shield=True):  # the connection's scope is cancelled by now
                current = await manager.store.get(record.request_key)
                if current is not None and current.status == "running":
                    with contextlib.suppress(ConflictError):
                        await manager.pause(current, reason="disconnected")
