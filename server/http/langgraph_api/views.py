"""The JSON the LangGraph Server API answers with: assistants, threads, states and runs."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any

from fastapi.encoders import jsonable_encoder
from langgraph.types import StateSnapshot

from phasegraph.graphs.registry import PROTOCOLS, ProtocolSpec
from phasegraph.server.storage.records import RequestRecord
from phasegraph.server.storage.threads import ThreadRecord

#: When the assistants were "made": they are the registered protocols, fixed for a process.
STARTED = datetime.now(UTC).isoformat()

#: A request's status as a LangGraph API run's.
RUN_STATUS = {
    "running": "running",
    "completed": "success",
    "failed": "error",
    "cancelled": "interrupted",
    "paused": "interrupted",
    "superseded": "interrupted",  # a later run went on from where it stopped, as LangGraph leaves such a run
}


def iso(timestamp: float) -> str:
    """A store timestamp as the API writes times."""
    return datetime.fromtimestamp(timestamp, UTC).isoformat()


def jsonable(value: Any) -> Any:
    """Graph values as JSON: messages and other models dumped, interrupts as ``{value, id}``."""
    return jsonable_encoder(value)


def output(graph: Any, values: dict[str, Any] | None) -> dict[str, Any]:
    """The graph's output channels of ``values``, as the reference streams and returns them."""
    channels = graph.output_channels
    keys = [channels] if isinstance(channels, str) else channels
    return {key: jsonable(values[key]) for key in keys if values and key in values}


def assistant(spec: ProtocolSpec) -> dict[str, Any]:
    """A protocol as its assistant: the assistant id is the protocol id, like its graph id."""
    return {
        "assistant_id": spec.id,
        "graph_id": spec.id,
        "name": spec.id,
        "description": spec.summary,
        "config": {},
        "context": {},
        "metadata": {"created_by": "system", "seed": spec.seed},
        "version": 1,
        "created_at": STARTED,
        "updated_at": STARTED,
    }


def assistants() -> list[dict[str, Any]]:
    """Every protocol's assistant."""
    return [assistant(spec) for spec in PROTOCOLS.values()]


def checkpoint_ref(thread_id: str, config: Any) -> dict[str, Any] | None:
    """``{checkpoint_id, thread_id, checkpoint_ns}`` of a snapshot's config, under the client's thread id."""
    if not config:
        return None
    configurable = config["configurable"]
    return {
        "checkpoint_id": configurable["checkpoint_id"],
        "thread_id": thread_id,
        "checkpoint_ns": configurable.get("checkpoint_ns", ""),
    }


def state(thread_id: str, snapshot: StateSnapshot | None) -> dict[str, Any]:
    """A thread state (``GET /threads/{id}/state``, one entry of its history)."""
    if snapshot is None or not snapshot.config:
        return {"values": {}, "next": [], "tasks": [], "metadata": {}, "created_at": None,
                "checkpoint": None, "parent_checkpoint": None, "interrupts": [],
                "checkpoint_id": None, "parent_checkpoint_id": None}  # fmt: skip
    current = checkpoint_ref(thread_id, snapshot.config)
    parent = checkpoint_ref(thread_id, snapshot.parent_config)
    tasks = [
        {"id": t.id, "name": t.name, "path": list(t.path), "error": str(t.error) if t.error else None,
         "interrupts": jsonable(t.interrupts), "checkpoint": None, "state": None,
         "result": jsonable(t.result)}
        for t in snapshot.tasks
    ]  # fmt: skip
    return {
        "values": jsonable(snapshot.values),
        "next": list(snapshot.next),
        "tasks": tasks,
        "metadata": jsonable({**(snapshot.metadata or {}), "thread_id": thread_id}),
        "created_at": snapshot.created_at,
        "checkpoint": current,
        "parent_checkpoint": parent,
        "interrupts": jsonable(snapshot.interrupts),
        "checkpoint_id": current["checkpoint_id"] if current else None,
        "parent_checkpoint_id": parent["checkpoint_id"] if parent else None,
    }


def thread(record: ThreadRecord, status: str, snapshot: StateSnapshot | None) -> dict[str, Any]:
    """A thread with its status and current values."""
    # Keyed by the id of the task that asks, as the reference keys them (one task may ask several).
    interrupts: dict[str, Any] = {}
    for task in snapshot.tasks if snapshot is not None else ():
        if task.interrupts:
            interrupts[task.id] = jsonable(task.interrupts)
    return {
        "thread_id": record.thread_id,
        "created_at": iso(record.created_at),
        "updated_at": iso(record.updated_at),
        "state_updated_at": snapshot.created_at if snapshot is not None else iso(record.updated_at),
        "metadata": record.metadata,
        "status": status,
        "config": {},
        "values": jsonable(snapshot.values) if snapshot is not None and snapshot.config else None,
        "interrupts": interrupts,
    }


_NEVER = datetime.min.replace(tzinfo=UTC)


def sort_key(field: str) -> Callable[[dict[str, Any]], Any]:
    """How ``POST /threads/search`` orders threads by ``field`` (times as times, not as text)."""
    if field in ("created_at", "updated_at", "state_updated_at"):  # a thread with no saved state: oldest
        return lambda thread: datetime.fromisoformat(thread[field]) if thread[field] else _NEVER
    return lambda thread: thread[field]


def selected(thread: dict[str, Any], fields: Sequence[str] | None) -> dict[str, Any]:
    """The thread with only ``fields`` (all of them without a ``select``)."""
    if fields is None:
        return thread
    return {field: thread[field] for field in fields}


def run(record: RequestRecord, status: str | None = None) -> dict[str, Any]:
    """A request as a LangGraph API run (the run id is the request id)."""
    return {
        "run_id": record.request_id,
        "thread_id": record.thread_id,
        "assistant_id": record.protocol,
        "status": status or RUN_STATUS[record.status],
        "metadata": record.options.get("metadata", {}),
        "multitask_strategy": record.options.get("multitask_strategy", "enqueue"),
        "created_at": iso(record.created_at),
        "updated_at": iso(record.updated_at),
        "kwargs": {},
    }
