"""Checkpoint retention: the policy (``PHASEGRAPH_RETENTION``), one pruning pass, the background task.

LangGraph's savers keep every checkpoint of every thread forever. ``keep_latest=N`` keeps each
thread's newest N checkpoints per namespace and removes older ones, their pending writes and the
blobs no kept checkpoint names (a subgraph call's namespace goes whole once the root checkpoint its
call started from is removed); ``ttl`` removes threads whose newest checkpoint is older, and with
them what the request store keeps of them: their requests, events, traces and thread rows.

What a request needs to go on is never removed: a thread with a running request is left alone
(its driver is writing it), and a thread with a paused request or a pending LangGraph interrupt
keeps its newest checkpoints with their writes, and is never expired. Resuming from the latest
point therefore always works; resuming from an earlier phase whose checkpoint was removed is
refused like a phase the run never reached (404). Threads are read ``BATCH`` at a time and the
request store is asked about each batch just before it is pruned.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import time
from dataclasses import dataclass, field

import sqlalchemy as sa
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.memory import InMemorySaver

from phasegraph.nodes.errors import ConfigurationError
from phasegraph.server.storage.pruning.base import (
    ACTIVE,
    Pruner,
    Removed,
    ThreadView,
    id_at,
    is_dated,
    thread_id_of,
)
from phasegraph.server.storage.pruning.requests import Forgotten, forget, idle_threads
from phasegraph.server.storage.records import requests_table
from phasegraph.server.storage.store import RequestStore

logger = logging.getLogger(__name__)

#: Threads read (and asked about in the request store) per round trip.
BATCH = 200
UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
EXAMPLE = "keep_latest=20, ttl=30d, or both: keep_latest=20,ttl=30d"


@dataclass(frozen=True)
class RetentionPolicy:
    """What to keep: each namespace's newest ``keep_latest`` checkpoints, threads active within ``ttl``."""

    keep_latest: int | None = None
    ttl_seconds: int | None = None

    def __str__(self) -> str:
        parts = [f"keep_latest={self.keep_latest}"] if self.keep_latest else []
        if self.ttl_seconds:
            unit = next(u for u in ("d", "h", "m", "s") if self.ttl_seconds % UNITS[u] == 0)
            parts.append(f"ttl={self.ttl_seconds // UNITS[unit]}{unit}")
        return ",".join(parts)


def parse_ttl(text: str) -> int:
    """Seconds of a duration written as a whole number and a unit: 30d, 12h, 90m, 3600s."""
    found = re.fullmatch(r"\s*(\d+)\s*([smhd])\s*", text)
    if not found or int(found[1]) == 0:
        raise ConfigurationError(
            f"ttl {text!r} is not a duration: write a whole number above 0 and a unit, s, m, h or d "
            "(e.g. 30d, 12h)"
        )
    return int(found[1]) * UNITS[found[2]]


def parse_keep_latest(text: str) -> int:
    """A keep_latest count: a whole number of at least 1 (the newest checkpoint is always needed)."""
    if not re.fullmatch(r"\s*\d+\s*", text) or int(text) < 1:
        raise ConfigurationError(f"keep_latest {text!r} must be a whole number of at least 1")
    return int(text)


def parse_retention(text: str) -> RetentionPolicy | None:
    """The policy ``PHASEGRAPH_RETENTION`` states (``None``: empty, retention off)."""
    if not text.strip():
        return None
    fields: dict[str, str] = {}
    for item in text.split(","):
        key, sep, value = (part.strip() for part in item.partition("="))
        if not sep or key not in ("keep_latest", "ttl") or key in fields:
            problem = "names a setting twice" if key in fields else f"has {item.strip()!r}"
            raise ConfigurationError(f"PHASEGRAPH_RETENTION {text!r} {problem}; write {EXAMPLE}")
        fields[key] = value
    try:
        return RetentionPolicy(
            keep_latest=parse_keep_latest(fields["keep_latest"]) if "keep_latest" in fields else None,
            ttl_seconds=parse_ttl(fields["ttl"]) if "ttl" in fields else None,
        )
    except ConfigurationError as exc:
        raise ConfigurationError(f"PHASEGRAPH_RETENTION {text!r}: {exc}") from None


@dataclass
class PruneReport:
    """What one pass removed (or, in a dry run, would remove), and what it left alone."""

    dry_run: bool
    keeps_blobs: bool  # False where channel values live inside checkpoints (sqlite): no blob count
    threads: int = 0  # threads looked at
    expired: int = 0  # removed whole by ttl
    trimmed: int = 0  # lost older checkpoints to keep_latest
    busy: int = 0  # left alone: a request of theirs was running
    spared: int = 0  # past the ttl but kept: a paused request or a pending interrupt
    removed: Removed = field(default_factory=Removed)
    forgotten: Forgotten = field(default_factory=Forgotten)  # the request store's rows of expired threads
    expired_threads: set[str] = field(default_factory=set, repr=False)

    @property
    def changed(self) -> bool:
        """Whether the pass removed (or would remove) anything."""
        return any(vars(self.removed).values()) or any(vars(self.forgotten).values())

    def summary(self) -> str:
        """One line for the log."""
        blobs = f", {self.removed.blobs} blobs" if self.keeps_blobs else ""
        gone = self.forgotten
        return (
            f"{self.removed.checkpoints} checkpoints, {self.removed.writes} writes{blobs} from "
            f"{self.trimmed} trimmed and {self.expired} expired threads of {self.threads} "
            f"({self.busy} running left alone, {self.spared} past the ttl kept for a paused request "
            f"or an interrupt); {gone.requests} requests with {gone.events} events and {gone.traces} "
            f"trace entries, {gone.threads} thread rows"
        )


def pruner_for(saver: BaseCheckpointSaver[str], *, requests: bool) -> Pruner:
    """The pruner of a saver ``phasegraph.server.storage.persistence`` opened.

    ``requests``: the server's request store is in the same database (sqlite, Postgres), so an
    expiring thread is checked against it again inside each transaction that removes part of it.
    """
    if isinstance(saver, InMemorySaver):
        from phasegraph.server.storage.pruning.memory import MemoryPruner

        return MemoryPruner(saver)
    from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

    if isinstance(saver, AsyncSqliteSaver):
        from phasegraph.server.storage.pruning.sqlite import SqlitePruner

        return SqlitePruner(saver, requests=requests)
    from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver

    if isinstance(saver, AsyncPostgresSaver):
        from phasegraph.server.storage.pruning.postgres import PostgresPruner

        return PostgresPruner(saver, requests=requests)
    raise ConfigurationError(f"checkpoint retention cannot prune a {type(saver).__name__}")


async def prune(
    pruner: Pruner,
    policy: RetentionPolicy,
    *,
    store: RequestStore | None = None,
    dry_run: bool = False,
    moment: float | None = None,
) -> PruneReport:
    """One pass over every thread; ``moment`` is "now" for the ttl (the clock when omitted)."""
    report = PruneReport(dry_run=dry_run, keeps_blobs=pruner.keeps_blobs)
    now = time.time() if moment is None else moment
    cutoff = id_at(now - policy.ttl_seconds) if policy.ttl_seconds else None
    after: str | None = None
    while thread_ids := await pruner.threads(after, BATCH):
        after = thread_ids[-1]
        running, paused = await active_threads(store, thread_ids) if store else (set(), set())
        report.threads += len(thread_ids)
        report.busy += len(running)
        idle = [t for t in thread_ids if t not in running]
        for view in await pruner.views(idle, policy.keep_latest or 0) if idle else []:
            await _prune_thread(pruner, view, policy, cutoff, view.thread_id in paused, report)
    if policy.ttl_seconds and store is not None:
        await _forget_expired(pruner, store, now - policy.ttl_seconds, report)
    return report


async def _forget_expired(pruner: Pruner, store: RequestStore, before: float, report: PruneReport) -> None:
    """Remove the request store's rows of idle threads whose checkpoints are gone (or would be)."""
    after: str | None = None
    while thread_keys := await idle_threads(store, before, after, BATCH):
        after = thread_keys[-1]
        kept = {view.thread_id for view in await pruner.views(thread_keys, 0)} - report.expired_threads
        gone = [key for key in thread_keys if key not in kept]
        report.forgotten += await forget(store, gone, before, report.dry_run)


async def _prune_thread(
    pruner: Pruner, view: ThreadView, policy: RetentionPolicy, cutoff: str | None, paused: bool,
    report: PruneReport,
) -> None:  # fmt: skip
    if cutoff is not None and is_dated(view.newest) and view.newest < cutoff:
        if paused or view.interrupted:
            report.spared += 1
        elif (removed := await pruner.expire(view.thread_id, cutoff, report.dry_run)) is not None:
            report.expired += 1
            report.expired_threads.add(view.thread_id)
            report.removed += removed
            return
    if not policy.keep_latest:
        return
    root = view.namespaces.get("")
    root_kept_from = root.oldest_kept if root else None
    removed = Removed()
    for ns in view.namespaces.values():
        if ns.is_call and root_kept_from and ns.root and ns.root < root_kept_from:
            # The call that saved it started from a root checkpoint removed now: it ended long ago.
            removed += await pruner.trim(view.thread_id, ns.name, None, report.dry_run)
        elif ns.oldest_kept is not None:
            removed += await pruner.trim(view.thread_id, ns.name, ns.oldest_kept, report.dry_run)
    if removed.checkpoints:
        report.trimmed += 1
    report.removed += removed


async def active_threads(store: RequestStore, thread_ids: list[str]) -> tuple[set[str], set[str]]:
    """Which of these LangGraph threads have a running request, and which a paused one.

    Looked up by the store's indexed ``thread_id`` (a request's thread key is ``project/thread``).
    """
    table = requests_table
    query = sa.select(table.c.thread_key, table.c.status).where(
        table.c.thread_id.in_(sorted({thread_id_of(t) for t in thread_ids})), table.c.status.in_(ACTIVE)
    )
    wanted = set(thread_ids)
    # The store's guard: an in-memory store shares one connection that must not interleave.
    async with store.guard, store.engine.connect() as conn:
        rows = (await conn.execute(query)).all()
    running = {key for key, status in rows if key in wanted and status == "running"}
    return running, {key for key, status in rows if key in wanted and status == "paused"} - running


class Retention:
    """Applies the policy in the background: once at start, then every ``interval`` seconds.

    A failed round is logged and the next one tries again; it never takes the server down. On
    sqlite, removed rows leave free pages the file reuses (it stops growing); ``phasegraph prune``
    shrinks it with VACUUM, which the server does not run under live traffic.
    """

    def __init__(
        self,
        policy: RetentionPolicy | None,
        interval: float,
        saver: BaseCheckpointSaver[str],
        store: RequestStore,
    ) -> None:
        self.policy, self.interval, self.saver, self.store = policy, interval, saver, store
        self._task: asyncio.Task[None] | None = None

    def start(self) -> Retention:
        """Start the rounds (nothing when retention is off)."""
        if self.policy is not None:
            self._task = asyncio.create_task(self._rounds(self.policy), name="checkpoint-retention")
        return self

    async def stop(self) -> None:
        """End the rounds; a pass in progress stops, its open transaction rolled back."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def _rounds(self, policy: RetentionPolicy) -> None:
        while True:
            try:
                pruner = pruner_for(self.saver, requests=True)
                report = await prune(pruner, policy, store=self.store)
                if report.changed:
                    logger.info("checkpoint retention (%s) removed %s", policy, report.summary())
            except Exception:  # a database hiccup must not end retention; the next round retries
                logger.exception("checkpoint retention round failed; retrying in %.0f s", self.interval)
            await asyncio.sleep(self.interval)
