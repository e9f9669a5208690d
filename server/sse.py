"""The one mapping from the event union to Server-Sent Events."""

from __future__ import annotations

from fastapi.sse import ServerSentEvent

from nodes.events import Event


def to_sse(event: Event) -> ServerSentEvent:
    """``event: <type>``, ``id: <seq>``, ``data: <the event JSON>``."""
    return ServerSentEvent(event=event.type, id=str(event.seq), raw_data=event.to_json())
