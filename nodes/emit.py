"""Emit typed events and trace entries through LangGraph's custom stream."""

from __future__ import annotations

from typing import Any, TypeVar

from langgraph.config import get_config, get_stream_writer
from langgraph.types import StreamWriter

from nodes.context import RunContext
from nodes.events import EventBase
from nodes.trace import TraceEntry, TraceType

E = TypeVar("E", bound=EventBase)

#: Keys of the custom-stream payloads; the run layer splits the stream on them.
EVENT_KEY = "phasegraph_event"
TRACE_KEY = "phasegraph_trace"


class Emitter:
    """Stamps events with the run's ids and writes them, and trace entries, to the stream."""

    def __init__(self, context: RunContext, writer: StreamWriter | None = None) -> None:
        self.context = context
        self.writer = writer or get_stream_writer()

    def emit(self, event_type: type[E], **fields: Any) -> E:
        """Build an event of ``event_type`` for this run and write it."""
        event = event_type(
            request_id=self.context.request_id,
            project_id=self.context.project_id,
            protocol=self.context.PROTOCOL,
            graph_step=current_step(),
            **fields,
        )
        self.writer({EVENT_KEY: event.to_dict()})
        return event

    def trace(self, kind: TraceType, **details: Any) -> None:
        """Write one trace entry (kept in full, raw tool outputs included)."""
        entry = TraceEntry(type=kind, request_id=self.context.request_id, details=details)
        self.writer({TRACE_KEY: entry.model_dump(mode="json")})


def current_step() -> int | None:
    """The LangGraph superstep running now (``None`` outside a graph run)."""
    try:
        step = get_config().get("metadata", {}).get("langgraph_step")
    except RuntimeError:  # called outside a runnable context
        return None
    return step if isinstance(step, int) else None
