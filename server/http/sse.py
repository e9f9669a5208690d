"""The one mapping from the event union to Server-Sent Events."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Literal

import anyio
from fastapi.sse import ServerSentEvent

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
