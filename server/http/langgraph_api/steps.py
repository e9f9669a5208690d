"""A run's own checkpoints, read as the run goes: what each superstep wrote, and which nodes ran in it.

A LangGraph API stream reads them for ``values`` and ``updates`` (the state after each superstep and
what its nodes wrote) and for ``messages`` and ``events`` (the node an event of superstep ``s`` came
from is a task of the checkpoint saved after superstep ``s - 1``).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from langgraph.types import StateSnapshot

from phasegraph.server.storage.checkpoints import thread_config
from phasegraph.server.storage.records import RequestRecord

#: How long a live stream waits for a step's checkpoint (durability ``async`` writes it meanwhile).
CHECKPOINT_WAIT_SECONDS = 2.0
CHECKPOINT_POLL_SECONDS = 0.02


@dataclass(frozen=True)
class NodeRun:
    """One node of a superstep, as LangGraph ran it (one task)."""

    name: str
    step: int
    task_id: str
    path: tuple[Any, ...] = ()


@dataclass
class Saved:
    """A checkpoint of the run not looked at before: the state after a superstep, and what wrote it."""

    snapshot: StateSnapshot
    #: The checkpoint before it (the state the superstep's nodes read), when there is one.
    previous: StateSnapshot | None = None
    #: The superstep's nodes that wrote something, with what they wrote.
    writes: list[tuple[NodeRun, Any]] = field(default_factory=list)


class RunCheckpoints:
    """The checkpoints one run saved on its thread (their metadata names the run), oldest first."""

    def __init__(self, graph: Any, record: RequestRecord, *, saved_per_step: bool = True) -> None:
        self.graph, self.record = graph, record
        self.base_step: int = record.options.get("base_step", -2)
        #: ``False`` with durability ``exit``: no checkpoint comes between supersteps, none is waited for.
        self.saved_per_step = saved_per_step
        self._seen: set[str] = set()
        self._nodes: dict[int, list[NodeRun]] = {}  # superstep -> the nodes that ran in it
        self._base_read = False

    def nodes(self, step: int | None) -> list[NodeRun]:
        """The nodes of superstep ``step``, as far as the checkpoints read so far tell."""
        return self._nodes.get(step, []) if step is not None else []

    async def subgraph_step(self, since: int, names: set[str]) -> int | None:
        """The first superstep from ``since`` on that runs one of ``names`` (the nodes holding a subgraph).

        A subgraph's events carry no superstep of the run; this places them. Live, the checkpoint
        naming that superstep may still be being written: it is waited for (briefly).
        """
        waited = 0.0
        while True:
            steps = [step for step, nodes in self._nodes.items()
                     if step >= since and any(node.name in names for node in nodes)]  # fmt: skip
            if steps or not self.saved_per_step or waited >= CHECKPOINT_WAIT_SECONDS:
                return min(steps, default=None)
            await asyncio.sleep(CHECKPOINT_POLL_SECONDS)
            waited += CHECKPOINT_POLL_SECONDS
            await self._learn_all(await self._snapshots())

    async def saved(self, before: int | None) -> list[Saved]:
        """The run's checkpoints with a step below ``before`` (all: ``None``) not returned before.

        Live, the checkpoint of the step just before ``before`` may still be being written: it is
        waited for (briefly), so a replay places it where the live stream did.
        """
        snapshots = await self._snapshots()
        wanted = None if before is None else before - 1
        waited = 0.0
        while (
            self.saved_per_step and wanted is not None and wanted > self.base_step
            and waited < CHECKPOINT_WAIT_SECONDS and not any(_step(s) >= wanted for s in snapshots)
        ):  # fmt: skip
            await asyncio.sleep(CHECKPOINT_POLL_SECONDS)
            waited += CHECKPOINT_POLL_SECONDS
            snapshots = await self._snapshots()
        await self._learn_all(snapshots)
        found: list[Saved] = []
        for index, snapshot in enumerate(snapshots):
            checkpoint_id = snapshot.config["configurable"]["checkpoint_id"]
            source = (snapshot.metadata or {}).get("source")
            if (
                checkpoint_id in self._seen
                or source != "loop"
                or (before is not None and _step(snapshot) >= before)
            ):
                continue
            self._seen.add(checkpoint_id)
            previous = snapshots[index - 1] if index else await self._parent(snapshot)
            writes = [
                (self._node(t, _step(snapshot)), t.result)
                for t in (previous.tasks if previous else ())
                if t.name != "__start__" and t.result is not None
            ]
            found.append(Saved(snapshot, previous, writes))
        return found

    def _learn(self, snapshot: StateSnapshot) -> None:
        """Remember which nodes run in the superstep after ``snapshot``."""
        step = _step(snapshot) + 1
        if step not in self._nodes:
            self._nodes[step] = [self._node(t, step) for t in snapshot.tasks]

    def _node(self, task: Any, step: int) -> NodeRun:
        return NodeRun(task.name, step, task.id, tuple(task.path))

    async def _learn_all(self, snapshots: list[StateSnapshot]) -> None:
        """Learn the nodes of each of the run's ``snapshots``, and of the checkpoint it started from."""
        await self._read_base(snapshots)
        for snapshot in snapshots:
            self._learn(snapshot)

    async def _read_base(self, snapshots: list[StateSnapshot]) -> None:
        """The checkpoint the run started from (a resume, a fork) names the nodes of its first step."""
        base_id = self.record.options.get("base_checkpoint_id")
        if self._base_read or not base_id:
            return
        self._base_read = True
        if not any(s.config["configurable"]["checkpoint_id"] == base_id for s in snapshots):
            base = await self.graph.aget_state(thread_config(self.record.thread_key, base_id))
            if base.config:
                self._learn(base)

    async def _snapshots(self) -> list[StateSnapshot]:
        """The run's own checkpoints (top level), oldest first."""
        config = thread_config(self.record.thread_key)
        found = [
            s async for s in self.graph.aget_state_history(config, filter={"run_id": self.record.request_id})
        ]
        return [s for s in reversed(found) if not (s.config["configurable"].get("checkpoint_ns") or "")]

    async def _parent(self, snapshot: StateSnapshot) -> StateSnapshot | None:
        if snapshot.parent_config is None:
            return None
        return await self.graph.aget_state(snapshot.parent_config)


def _step(snapshot: StateSnapshot) -> int:
    return int((snapshot.metadata or {}).get("step", -1))
