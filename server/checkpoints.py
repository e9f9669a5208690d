"""Checkpoint inspection: a thread's timeline, one checkpoint's values, and phase lookup for resume."""

from __future__ import annotations

from typing import Any

from langchain_core.load import dumpd
from langchain_core.runnables import RunnableConfig
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import StateSnapshot
from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel

from graphs.registry import ProtocolSpec
from nodes.errors import ConflictError, NotFoundError


class CheckpointInfo(BaseModel):
    """One point of a thread's timeline."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True)

    checkpoint_id: str
    step: int | None
    node: str | None  # the node whose work this checkpoint saved (None for the input)
    next: list[str]
    created_at: str | None
    phase_index: int | None = None
    cycle_index: int | None = None


def thread_config(thread_id: str, checkpoint_id: str | None = None) -> RunnableConfig:
    """LangGraph config for a thread, optionally pinned to one checkpoint."""
    configurable = {"thread_id": thread_id}
    if checkpoint_id:
        configurable["checkpoint_id"] = checkpoint_id
    return {"configurable": configurable}


async def history(graph: CompiledStateGraph[Any, Any, Any, Any], thread_id: str) -> list[StateSnapshot]:
    """Every checkpoint of the thread, oldest first."""
    snapshots = [s async for s in graph.aget_state_history(thread_config(thread_id))]
    return list(reversed(snapshots))


async def timeline(
    spec: ProtocolSpec, graph: CompiledStateGraph[Any, Any, Any, Any], thread_id: str
) -> list[CheckpointInfo]:
    """The thread's checkpoints, oldest first, with the node that produced each and phase fields."""
    snapshots = await history(graph, thread_id)
    if not snapshots:
        raise NotFoundError(f"thread {thread_id!r} has no checkpoints")
    infos = []
    for before, snap in zip([None, *snapshots], snapshots, strict=False):
        meta = spec.event_meta(snap.values)
        infos.append(
            CheckpointInfo(
                checkpoint_id=snap.config["configurable"]["checkpoint_id"],
                step=(snap.metadata or {}).get("step"),
                node=",".join(before.next) if before is not None and before.next else None,
                next=list(snap.next),
                created_at=snap.created_at,
                phase_index=meta.get("phase_index"),
                cycle_index=meta.get("cycle_index"),
            )
        )
    return infos


async def snapshot_at(
    graph: CompiledStateGraph[Any, Any, Any, Any], thread_id: str, checkpoint_id: str
) -> StateSnapshot:
    """One checkpoint of the thread, or NotFoundError."""
    snap = await graph.aget_state(thread_config(thread_id, checkpoint_id))
    if snap.config["configurable"].get("checkpoint_id") != checkpoint_id or not (snap.values or snap.next):
        raise NotFoundError(f"thread {thread_id!r} has no checkpoint {checkpoint_id!r}")
    return snap


def require_next(snapshot: StateSnapshot) -> None:
    """Refuse to continue from a checkpoint where the run had already finished."""
    if not snapshot.next:
        raise ConflictError("nothing is left to run from that point: the run finished there")


async def checkpoint_values(
    graph: CompiledStateGraph[Any, Any, Any, Any], thread_id: str, checkpoint_id: str
) -> dict[str, Any]:
    """The state values saved in one checkpoint, as JSON-safe data."""
    snap = await snapshot_at(graph, thread_id, checkpoint_id)
    return {"checkpointId": checkpoint_id, "next": list(snap.next), "values": dumpd(snap.values)}


async def end_of_phase(
    graph: CompiledStateGraph[Any, Any, Any, Any], thread_id: str, phase_index: int | None
) -> tuple[StateSnapshot, bool]:
    """The checkpoint at the end of ``phase_index`` (the latest when ``None``) and whether it forks.

    Resuming from anything but the thread's latest checkpoint starts a new branch (a fork).
    """
    snapshots = await history(graph, thread_id)
    if not snapshots:
        raise NotFoundError(f"thread {thread_id!r} has no checkpoints")
    latest = snapshots[-1]
    if phase_index is None:
        chosen = latest
    else:
        matching = [s for s in snapshots if s.values.get("phase_index") == phase_index]
        if not matching:
            raise NotFoundError(f"the run never reached phase {phase_index}")
        chosen = matching[-1]
    require_next(chosen)
    fork = chosen.config["configurable"]["checkpoint_id"] != latest.config["configurable"]["checkpoint_id"]
    return chosen, fork
