"""What checkpoint pruning reads and removes, whichever LangGraph saver holds the checkpoints.

Each backend (``pruning_memory``, ``pruning_sqlite``, ``pruning_postgres``) answers the same few
questions about its tables or dicts: which threads there are, what each namespace of a thread holds
(its newest checkpoint, the oldest one to keep, how many), and removes checkpoints older than a
given id with their pending writes and the blobs nothing kept refers to. ``storage.retention``
decides what to remove; the backends only carry it out.

Checkpoint ids are LangGraph's UUIDv6 strings: they sort by creation time as text, so "older than"
is a string comparison, and an id says when its checkpoint was made.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from langgraph.checkpoint.base.id import UUID as UUID6
from langgraph.checkpoint.serde.types import INTERRUPT

__all__ = [
    "ACTIVE", "CHUNK", "INTERRUPT", "NamespaceView", "Pruner", "Removed", "ThreadView", "id_at", "is_dated",
    "made_at", "thread_id_of",
]  # fmt: skip

#: 100-ns intervals between the UUID epoch (1582-10-15) and the Unix epoch.
_UUID_EPOCH_TICKS = 0x01B21DD213814000
#: Checkpoints removed per transaction: a huge thread is pruned in many short ones.
CHUNK = 500
#: Request statuses whose threads must stay resumable (the server's request store).
ACTIVE = ("running", "paused")


def id_at(moment: float) -> str:
    """The smallest checkpoint id LangGraph could give a checkpoint made at ``moment`` (Unix seconds)."""
    ticks = int(moment * 10_000_000) + _UUID_EPOCH_TICKS
    value = ((ticks >> 12) & 0xFFFF_FFFF_FFFF) << 80 | (ticks & 0x0FFF) << 64
    return str(UUID6(int=value, version=6))


def made_at(checkpoint_id: str) -> float | None:
    """When a checkpoint was made, read from its id (``None`` for an id that is not a UUIDv6)."""
    try:
        parsed = UUID6(checkpoint_id)
    except ValueError:
        return None
    if parsed.version != 6:
        return None
    return (parsed.time - _UUID_EPOCH_TICKS) / 10_000_000


def is_dated(checkpoint_id: str) -> bool:
    """Whether the id tells its checkpoint's age (a thread whose age is unknown never expires)."""
    return made_at(checkpoint_id) is not None


@dataclass
class NamespaceView:
    """One checkpoint namespace of a thread ('' is the root graph's; a subgraph call's has a ':')."""

    name: str
    count: int  # checkpoints it holds
    newest: str  # its newest checkpoint id
    oldest_kept: str | None = None  # the Nth newest id under keep_latest=N (None: it holds N or fewer)
    root: str | None = None  # a subgraph call's: the root checkpoint its call started from
    interrupted: bool = False  # its newest checkpoint's writes hold a pending interrupt

    @property
    def is_call(self) -> bool:
        """A subgraph call's namespace (``node:task_id``), which lives as long as that call."""
        return ":" in self.name


@dataclass
class ThreadView:
    """What pruning needs to know of one thread."""

    thread_id: str
    namespaces: dict[str, NamespaceView] = field(default_factory=dict)

    @property
    def newest(self) -> str:
        """The thread's newest checkpoint id, over every namespace."""
        return max(ns.newest for ns in self.namespaces.values())

    @property
    def interrupted(self) -> bool:
        """Whether the thread waits in a LangGraph interrupt (a question for the user)."""
        return any(ns.interrupted for ns in self.namespaces.values())


@dataclass
class Removed:
    """Rows (or entries) one pruning step removed, or would remove in a dry run."""

    checkpoints: int = 0
    writes: int = 0
    blobs: int = 0

    def __add__(self, other: Removed) -> Removed:
        return Removed(
            self.checkpoints + other.checkpoints, self.writes + other.writes, self.blobs + other.blobs
        )


class Pruner(Protocol):
    """One saver's checkpoint storage, as pruning reads and changes it."""

    #: Whether the saver keeps channel values apart from checkpoints (Postgres, memory; not sqlite).
    keeps_blobs: bool

    async def threads(self, after: str | None, limit: int) -> list[str]:
        """Up to ``limit`` thread ids after ``after``, in order."""
        ...

    async def views(self, thread_ids: list[str], keep: int) -> list[ThreadView]:
        """Each thread's namespaces, ``oldest_kept`` set where one holds more than ``keep``."""
        ...

    async def trim(self, thread_id: str, namespace: str, below: str | None, dry_run: bool) -> Removed:
        """Remove the namespace's checkpoints older than ``below`` (all when ``None``)."""
        ...

    async def expire(self, thread_id: str, cutoff: str, dry_run: bool) -> Removed | None:
        """Remove the whole thread, unless it has a checkpoint from ``cutoff`` on.

        That, and on sqlite and Postgres (where the request store shares the database) a paused or
        running request of the thread, is checked again in each transaction that removes part of
        it; ``None`` when the thread came back to life meanwhile.
        """
        ...

    async def remove_run(self, thread_id: str, run_id: str) -> Removed:
        """Remove the checkpoints one run saved (their metadata's ``run_id``), in every namespace.

        What a rollback does: the thread is left as it was before the run, with the writes and
        (where kept apart) the channel values only those checkpoints had.
        """
        ...

    async def size(self) -> int | None:
        """Bytes the checkpoints take (``None`` when that means nothing here)."""
        ...

    async def compact(self) -> None:
        """Give the space removed rows left back (sqlite: VACUUM; Postgres: plain VACUUM)."""
        ...


def thread_id_of(thread_key: str) -> str:
    """The client's thread id inside a request store key (``project/thread``; old keys are the id)."""
    return thread_key.rsplit("/", 1)[-1]
