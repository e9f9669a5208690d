"""Checkpoint inspection: a thread's timeline, one checkpoint's values, and phase lookup for resume."""

from __future__ import annotations

import contextlib
from typing import Any

from langchain_core.load import dumpd
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver, CheckpointTuple
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import Command, StateSnapshot
from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel

from phasegraph.graphs.registry import ProtocolSpec
from phasegraph.nodes.errors import ConflictError, NotFoundError
from phasegraph.server.storage.history import walk


class CheckpointInfo(BaseModel):
    """One point of a thread's timeline.

    A thread's checkpoints form a tree: a fork (a run from an older checkpoint) or a state edit starts a
    branch at its parent, so ``parent_id`` and not the order of the list says what came before.
    """

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True)

    checkpoint_id: str
    #: the checkpoint this one continues (None for the thread's first)
    parent_id: str | None = None
    step: int | None
    #: how it was written: ``input`` (a turn's input), ``loop`` (a step of a run), ``update`` (a state
    #: edit), ``fork`` (a copy made to start a branch)
    source: str | None = None
    node: str | None  # the node whose work this checkpoint saved (None for the input)
    next: list[str]
    #: what the run waits on there: the values of its pending ``interrupt`` calls (an approval...)
    interrupts: list[Any] = []
    created_at: str | None
    phase_index: int | None = None
    cycle_index: int | None = None


def thread_config(thread_id: str, checkpoint_id: str | None = None) -> RunnableConfig:
    """LangGraph config for a thread, optionally pinned to one checkpoint."""
    configurable = {"thread_id": thread_id}
    if checkpoint_id:
        configurable["checkpoint_id"] = checkpoint_id
    return {"configurable": configurable}


#: Checkpoints per page of a timeline, unless the caller asks for another size (at most MAX_PAGE).
DEFAULT_PAGE = 50
MAX_PAGE = 500


async def timeline(
    spec: ProtocolSpec,
    graph: CompiledStateGraph[Any, Any, Any, Any],
    thread_id: str,
    *,
    limit: int = DEFAULT_PAGE,
    before: str | None = None,
) -> tuple[list[CheckpointInfo], str | None]:
    """One page of the thread's checkpoints, oldest first, with the node that produced each.

    The page holds the ``limit`` newest checkpoints older than ``before`` (the newest of the
    thread without it). Returns the page and the ``before`` of the next, older page (``None``
    on the last). Only ``limit + 1`` checkpoints are read, however long the thread.
    """
    older_than = None
    if before is not None:
        older_than = thread_config(thread_id, before)
        if (await graph.aget_state(older_than)).created_at is None:
            raise NotFoundError(f"thread {thread_id!r} has no checkpoint {before!r}")
    newest_first = [
        s
        async for s in graph.aget_state_history(thread_config(thread_id), before=older_than, limit=limit + 1)
    ]
    if not newest_first:
        if before is None:
            raise NotFoundError(f"thread {thread_id!r} has no checkpoints")
        return [], None
    page, older = newest_first[:limit], newest_first[limit:]
    snapshots = list(reversed(page))
    known = {snap.config["configurable"]["checkpoint_id"]: snap for snap in [*older, *snapshots]}
    infos = [_info(spec, snap, await _parent(graph, snap, known)) for snap in snapshots]
    next_before = snapshots[0].config["configurable"]["checkpoint_id"] if older else None
    return infos, next_before


def _id_of(config: RunnableConfig | None) -> str | None:
    return (config or {}).get("configurable", {}).get("checkpoint_id")


async def _parent(
    graph: CompiledStateGraph[Any, Any, Any, Any], snap: StateSnapshot, known: dict[str, StateSnapshot]
) -> StateSnapshot | None:
    """The checkpoint ``snap`` continues: from the page when it is there, else read (a branch's root)."""
    parent_id = _id_of(snap.parent_config)
    if parent_id is None:
        return None
    if parent_id not in known:
        known[parent_id] = await graph.aget_state(snap.parent_config or {})
    return known[parent_id]


def _info(spec: ProtocolSpec, snap: StateSnapshot, parent: StateSnapshot | None) -> CheckpointInfo:
    meta = spec.event_meta(snap.values)
    metadata: dict[str, Any] = dict(snap.metadata or {})
    return CheckpointInfo(
        checkpoint_id=snap.config["configurable"]["checkpoint_id"],
        parent_id=_id_of(snap.parent_config),
        step=metadata.get("step"),
        source=metadata.get("source"),
        node=_ran(parent, metadata),
        next=list(snap.next),
        interrupts=[dumpd(i.value) for i in snap.interrupts],
        created_at=snap.created_at,
        phase_index=meta.get("phase_index"),
        cycle_index=meta.get("cycle_index"),
    )


def _ran(parent: StateSnapshot | None, metadata: dict[str, Any]) -> str | None:
    """The node(s) whose work the checkpoint saved: what its parent had next.

    None for the input, for an edit (``update``) and for the copy a replay from an older checkpoint
    starts its branch with (``fork``): no node ran to make those.
    """
    if metadata.get("source") in ("update", "fork") or parent is None or not parent.next:
        return None
    return ",".join(parent.next)


async def snapshot_at(
    graph: CompiledStateGraph[Any, Any, Any, Any], thread_id: str, checkpoint_id: str, *, shown_as: str = ""
) -> StateSnapshot:
    """One checkpoint of the thread, or NotFoundError (naming the thread ``shown_as``, its key by default).

    A saver that has no such checkpoint still answers a snapshot, of the config it was asked
    (no ``created_at``, no values): that is what "not found" looks like.
    """
    snap = await graph.aget_state(thread_config(thread_id, checkpoint_id))
    if snap.created_at is None or snap.config["configurable"].get("checkpoint_id") != checkpoint_id:
        raise NotFoundError(f"thread {shown_as or thread_id!r} has no checkpoint {checkpoint_id!r}")
    return snap


def can_go_on(snapshot: StateSnapshot) -> bool:
    """True when going on from ``snapshot`` runs something: a task is next, or saved writes wait to apply.

    LangGraph's ``next`` leaves out the tasks whose writes are saved: a run that crashed after a step's
    writes were saved but before the checkpoint after them was (durability ``async`` writes it while the
    next step runs) shows ``next == ()``, yet ``astream(None)`` applies the writes and carries on. Its
    ``tasks`` still list the step's tasks; at the end of a run there are none.
    """
    return bool(snapshot.next) or bool(snapshot.tasks)


def require_next(snapshot: StateSnapshot, graph_input: Any = None) -> None:
    """Refuse to go on from a checkpoint where going on would run nothing.

    A thread whose run finished there has nothing left to run. A thread waiting in an
    ``interrupt`` (a question its last turn asked) goes on only with the answer, a
    ``Command(resume=...)``: without one, the node asks again and the run stops at once.
    """
    if snapshot.created_at is None:
        raise ConflictError("the thread has no checkpoint to go on from: send an input to start it")
    if not can_go_on(snapshot):
        raise ConflictError(
            "nothing is left to run from that point: the run finished there; send a new message instead"
        )
    if snapshot.interrupts and not isinstance(graph_input, Command):
        raise ConflictError(
            "the thread waits for the answer to the question its last turn asked (an interrupt): send "
            "the answer as the thread's next message (LangGraph API: command.resume), not a resume"
        )


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

    Resuming from anything but the thread's latest checkpoint starts a new branch (a fork). The
    history is walked newest first and only as far as the phase, never loaded whole.
    """
    latest = await graph.aget_state(thread_config(thread_id))
    if latest.created_at is None:
        raise NotFoundError(f"thread {thread_id!r} has no checkpoints")
    chosen = latest
    if phase_index is not None:
        found = None
        async with contextlib.aclosing(walk(graph, thread_config(thread_id))) as snapshots:
            async for snap in snapshots:
                if snap.values.get("phase_index") == phase_index:
                    found = snap
                    break
        if found is None:
            raise NotFoundError(
                f"the thread has no checkpoint for phase {phase_index}: the run never reached it, or "
                "checkpoint retention (PHASEGRAPH_RETENTION) removed it"
            )
        chosen = found
    require_next(chosen)
    fork = chosen.config["configurable"]["checkpoint_id"] != latest.config["configurable"]["checkpoint_id"]
    return chosen, fork


async def copy_checkpoints(saver: BaseCheckpointSaver[Any], source: str, target: str) -> int:
    """Copy every checkpoint of thread ``source`` (subgraphs' too) with its pending writes to ``target``.

    Oldest first, ids and parents kept, so the copy has the same history, forks and interrupts and a
    run on it goes on from the same point. Returns how many checkpoints were copied.
    """
    newest_first = [t async for t in saver.alist({"configurable": {"thread_id": source}})]
    for saved in reversed(newest_first):
        await _copy_one(saver, saved, target)
    return len(newest_first)


async def _copy_one(saver: BaseCheckpointSaver[Any], saved: CheckpointTuple, target: str) -> None:
    """One checkpoint under ``target``: on its parent, all its channels stored, then its pending writes."""
    namespace = saved.config["configurable"].get("checkpoint_ns", "")
    parent = (saved.parent_config or {}).get("configurable", {}).get("checkpoint_id")
    on: RunnableConfig = {"configurable": {"thread_id": target, "checkpoint_ns": namespace}}
    if parent:
        on["configurable"]["checkpoint_id"] = parent
    versions = dict(saved.checkpoint["channel_versions"])  # every channel's blob, not only the changed ones
    stored = await saver.aput(on, saved.checkpoint, saved.metadata, versions)
    by_task: dict[str, list[tuple[str, Any]]] = {}
    for task_id, channel, value in saved.pending_writes or []:
        by_task.setdefault(task_id, []).append((channel, value))
    for task_id, writes in by_task.items():
        await saver.aput_writes(stored, writes, task_id)
