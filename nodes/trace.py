"""The full trace of a request: everything that happened, raw tool outputs included."""

from __future__ import annotations

from collections import defaultdict
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
    """Traces kept in this process, keyed by request id."""

    def __init__(self) -> None:
        self._entries: dict[str, list[TraceEntry]] = defaultdict(list)

    def append(self, entry: TraceEntry) -> None:
        """Record one entry."""
        self._entries[entry.request_id].append(entry)

    def get(self, request_id: str) -> list[TraceEntry]:
        """All entries of a request, oldest first (empty when unknown)."""
        return list(self._entries.get(request_id, []))


#: The process-wide default store used when a run is not given one.
DEFAULT_TRACES = MemoryTraceStore()


def get_trace(request_id: str, store: TraceStore | None = None) -> list[TraceEntry]:
    """Return the trace of ``request_id`` from ``store`` (the default store when omitted)."""
    return (store or DEFAULT_TRACES).get(request_id)
