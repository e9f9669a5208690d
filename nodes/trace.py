"""The full trace of a request: everything that happened, raw tool outputs included."""

from __future__ import annotations

from collections import OrderedDict
from datetime import UTC, datetime
from typing import Any, Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

TraceType = Literal[
    "tool_registration",
    "tool_call",
    "tool_result",
    "duplicate_tool_call",
    "ignored_tool_call",
    "orchestration_phase_start",
    "orchestration_phase_end",
    "model_output_rejected",
    "agent_prompt",
    "execution_log",
]


class TraceEntry(BaseModel):
    """One line of a request's trace (wire names in camelCase, like events)."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True)

    type: TraceType
    request_id: str
    ts: datetime = Field(default_factory=lambda: datetime.now(UTC))
    details: dict[str, Any] = Field(default_factory=dict)


class TraceStore(Protocol):
    """Where traces are kept; the server plugs in a persistent one."""

    def append(self, entry: TraceEntry) -> None:
        """Record one entry."""

    def get(self, request_id: str) -> list[TraceEntry]:
        """All entries of a request, oldest first."""


class MemoryTraceStore:
    """Traces kept in this process, keyed by request id, for the most recent requests only.

    A notebook or Studio session runs request after request; keeping every trace for the
    life of the process would grow without bound, so the least recently written request's
    trace is dropped once ``max_requests`` are held.
    """

    def __init__(self, max_requests: int = 256) -> None:
        if max_requests < 1:
            raise ValueError("max_requests must be at least 1")
        self.max_requests = max_requests
        self._entries: OrderedDict[str, list[TraceEntry]] = OrderedDict()

    def append(self, entry: TraceEntry) -> None:
        """Record one entry (the request becomes the most recent one)."""
        entries = self._entries.setdefault(entry.request_id, [])
        entries.append(entry)
        self._entries.move_to_end(entry.request_id)
        while len(self._entries) > self.max_requests:
            self._entries.popitem(last=False)

    def request_ids(self) -> list[str]:
        """Requests whose traces are held, least recent first."""
        return list(self._entries)

    def get(self, request_id: str) -> list[TraceEntry]:
        """All entries of a request, oldest first (empty when unknown)."""
        return list(self._entries.get(request_id, []))


#: The process-wide default store used when a run is not given one.
DEFAULT_TRACES = MemoryTraceStore()


def get_trace(request_id: str, store: TraceStore | None = None) -> list[TraceEntry]:
    """Return the trace of ``request_id`` from ``store`` (the default store when omitted)."""
    return (store or DEFAULT_TRACES).get(request_id)
