"""Pruning ``AsyncSqliteSaver``'s tables: ``checkpoints`` (channel values inline) and ``writes``.

Every statement runs on the saver's own connection under its lock, so it never interleaves with a
run's checkpoint writes; each transaction starts IMMEDIATE (the write lock first), removes at most
``CHUNK`` checkpoints, and commits. Deleted rows leave free pages that sqlite reuses for new ones,
so a pruned file stops growing; only VACUUM (``compact``, what ``phasegraph prune`` runs) makes
it smaller.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import aiosqlite
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

from phasegraph.server.storage.pruning.base import (
    ACTIVE,
    CHUNK,
    INTERRUPT,
    NamespaceView,
    Removed,
    ThreadView,
    thread_id_of,
)
from phasegraph.server.storage.records import requests_table

#: Heads looked up per query (three bound values each; sqlite binds at most 32,766).
HEADS_PER_QUERY = 1000
_SLICE = "thread_id = ? AND checkpoint_ns = ?"
_VIEWS = """
SELECT thread_id, checkpoint_ns, checkpoint_id, rn, total FROM (
    SELECT thread_id, checkpoint_ns, checkpoint_id,
           row_number() OVER (PARTITION BY thread_id, checkpoint_ns ORDER BY checkpoint_id DESC) AS rn,
           count(*) OVER (PARTITION BY thread_id, checkpoint_ns) AS total
    FROM checkpoints WHERE thread_id IN ({marks})
) WHERE rn = 1 OR rn = ?
"""
_HEADS = "WITH heads(thread_id, checkpoint_ns, checkpoint_id) AS (VALUES {rows}) "
_INTERRUPTED = (
    _HEADS + "SELECT DISTINCT w.thread_id, w.checkpoint_ns FROM writes w "
    "JOIN heads h USING (thread_id, checkpoint_ns, checkpoint_id) WHERE w.channel = ?"
)
_ROOTS = (
    _HEADS + "SELECT c.thread_id, c.checkpoint_ns, c.metadata FROM checkpoints c "
    "JOIN heads h USING (thread_id, checkpoint_ns, checkpoint_id)"
)


def _bound(column: str, op: str, bound: str | None) -> tuple[str, tuple[str, ...]]:
    """A condition ``column op bound`` to append, and its parameter (nothing when ``bound`` is None)."""
    return ("", ()) if bound is None else (f" AND {column} {op} ?", (bound,))


class _Revived(Exception):
    """An expiring thread got a new checkpoint or an active request: stop removing it."""


class SqlitePruner:
    """Prunes one ``AsyncSqliteSaver``'s database."""

    keeps_blobs = False

    def __init__(self, saver: AsyncSqliteSaver, *, requests: bool) -> None:
        self.conn, self.lock = saver.conn, saver.lock
        self.requests = requests  # the server's request table lives in the same file

    async def threads(self, after: str | None, limit: int) -> list[str]:
        """Thread ids in order, ``limit`` at a time."""
        since, params = _bound("thread_id", ">", after)
        sql = f"SELECT DISTINCT thread_id FROM checkpoints WHERE 1 = 1{since} ORDER BY thread_id LIMIT ?"
        return [row[0] for row in await self._read(sql, (*params, limit))]

    async def views(self, thread_ids: list[str], keep: int) -> list[ThreadView]:
        """Each namespace's newest id, its ``keep``-th newest id, count, call root and interrupt."""
        marks = ",".join("?" * len(thread_ids))
        found: dict[str, ThreadView] = {}
        for thread_id, ns, checkpoint_id, rn, total in await self._read(
            _VIEWS.format(marks=marks), (*thread_ids, keep)
        ):
            view = found.setdefault(thread_id, ThreadView(thread_id))
            if rn == 1:
                view.namespaces[ns] = NamespaceView(ns, total, checkpoint_id)
            if rn == keep and total > keep:
                view.namespaces[ns].oldest_kept = checkpoint_id
        heads = [(t, ns.name, ns.newest) for t, v in found.items() for ns in v.namespaces.values()]
        for thread_id, ns in await self._heads(_INTERRUPTED, heads, (INTERRUPT,)):
            found[thread_id].namespaces[ns].interrupted = True
        calls = [head for head in heads if ":" in head[1]]
        for thread_id, ns, metadata in await self._heads(_ROOTS, calls, ()):
            parents = json.loads(metadata or "{}").get("parents", {})
            found[thread_id].namespaces[ns].root = parents.get("")
        return list(found.values())

    async def trim(self, thread_id: str, namespace: str, below: str | None, dry_run: bool) -> Removed:
        """Remove the namespace's checkpoints older than ``below`` (all when ``None``)."""
        if dry_run:
            return await self._count(thread_id, namespace, below)
        return await self._remove(thread_id, namespace, below, None)

    async def expire(self, thread_id: str, cutoff: str, dry_run: bool) -> Removed | None:
        """Remove the whole thread unless it has come back to life (see ``Pruner.expire``)."""
        rows = await self._read(
            "SELECT DISTINCT checkpoint_ns FROM checkpoints WHERE thread_id = ?", (thread_id,)
        )
        removed = Removed()
        try:
            if dry_run:
                async with self.lock:
                    await self._check_idle(thread_id, cutoff)
            for (namespace,) in rows:
                if dry_run:
                    removed += await self._count(thread_id, namespace, None)
                else:
                    removed += await self._remove(thread_id, namespace, None, cutoff)
            if not dry_run:  # writes whose checkpoint never got saved
                async with self._transaction() as conn:
                    await self._check_idle(thread_id, cutoff)
                    cursor = await conn.execute("DELETE FROM writes WHERE thread_id = ?", (thread_id,))
                    removed.writes += cursor.rowcount
        except _Revived:
            return None
        return removed

    async def remove_run(self, thread_id: str, run_id: str) -> Removed:
        """Remove the checkpoints ``run_id`` saved, with their writes, in one transaction."""
        run = "thread_id = ? AND json_extract(CAST(metadata AS TEXT), '$.run_id') = ?"
        async with self._transaction() as conn:
            deleted = await conn.execute(
                "DELETE FROM writes WHERE (thread_id, checkpoint_ns, checkpoint_id) IN "
                f"(SELECT thread_id, checkpoint_ns, checkpoint_id FROM checkpoints WHERE {run})",
                (thread_id, run_id),
            )
            writes = deleted.rowcount
            deleted = await conn.execute(f"DELETE FROM checkpoints WHERE {run}", (thread_id, run_id))
            return Removed(deleted.rowcount, writes)

    async def size(self) -> int | None:
        """The database file's bytes, with its write-ahead log."""
        rows = await self._read("PRAGMA database_list", ())
        path = next((row[2] for row in rows if row[1] == "main"), "")
        if not path:
            return None  # an in-memory database
        files = [Path(path), Path(f"{path}-wal")]
        return sum(f.stat().st_size for f in files if f.exists())

    async def compact(self) -> None:
        """VACUUM the file (it is rewritten without its free pages), then fold the log back in."""
        async with self.lock:
            await self.conn.execute("VACUUM")
            await self.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")

    async def _remove(self, thread_id: str, ns: str, below: str | None, cutoff: str | None) -> Removed:
        """Delete oldest first, ``CHUNK`` checkpoints per transaction, with their writes."""
        removed = Removed()
        while True:
            async with self._transaction() as conn:
                if cutoff is not None:
                    await self._check_idle(thread_id, cutoff)
                older, bound = _bound("checkpoint_id", "<", below)
                cursor = await conn.execute(
                    f"SELECT checkpoint_id FROM checkpoints WHERE {_SLICE}{older} "
                    "ORDER BY checkpoint_id LIMIT ?",
                    (thread_id, ns, *bound, CHUNK),
                )
                ids = [row[0] for row in await cursor.fetchall()]
                last = len(ids) < CHUNK
                upto, op = (below, "<") if last else (ids[-1], "<=")
                older, bound = _bound("checkpoint_id", op, upto)
                params = (thread_id, ns, *bound)
                deleted = await conn.execute(f"DELETE FROM checkpoints WHERE {_SLICE}{older}", params)
                removed.checkpoints += deleted.rowcount
                deleted = await conn.execute(f"DELETE FROM writes WHERE {_SLICE}{older}", params)
                removed.writes += deleted.rowcount
                # A kept checkpoint whose parent is gone has none, as LangGraph's own prune leaves it.
                orphaned, _ = _bound("parent_checkpoint_id", op, upto)
                await conn.execute(
                    f"UPDATE checkpoints SET parent_checkpoint_id = NULL WHERE {_SLICE}{orphaned}", params
                )
            if last:
                return removed

    async def _count(self, thread_id: str, ns: str, below: str | None) -> Removed:
        older, bound = _bound("checkpoint_id", "<", below)
        params = (thread_id, ns, *bound)
        checkpoints = await self._read(f"SELECT count(*) FROM checkpoints WHERE {_SLICE}{older}", params)
        writes = await self._read(f"SELECT count(*) FROM writes WHERE {_SLICE}{older}", params)
        return Removed(checkpoints[0][0], writes[0][0])

    async def _check_idle(self, thread_id: str, cutoff: str) -> None:
        """Raise ``_Revived`` when the thread has a checkpoint from ``cutoff`` on, or an active request."""
        cursor = await self.conn.execute(
            "SELECT 1 FROM checkpoints WHERE thread_id = ? AND checkpoint_id >= ? LIMIT 1",
            (thread_id, cutoff),
        )
        revived = await cursor.fetchone() is not None
        if self.requests and not revived:
            marks = ",".join("?" * len(ACTIVE))
            cursor = await self.conn.execute(
                f"SELECT 1 FROM {requests_table.name} WHERE thread_id = ? AND thread_key = ? "
                f"AND status IN ({marks}) LIMIT 1",
                (thread_id_of(thread_id), thread_id, *ACTIVE),
            )
            revived = await cursor.fetchone() is not None
        if revived:
            raise _Revived(thread_id)

    async def _heads(
        self, sql: str, heads: list[tuple[str, str, str]], params: tuple[Any, ...]
    ) -> list[Sequence[Any]]:
        """``sql`` over the given (thread, namespace, checkpoint) heads, in groups sqlite can bind."""
        found: list[Sequence[Any]] = []
        for start in range(0, len(heads), HEADS_PER_QUERY):
            group = heads[start : start + HEADS_PER_QUERY]
            rows = ",".join(["(?, ?, ?)"] * len(group))
            found += await self._read(sql.format(rows=rows), (*(v for head in group for v in head), *params))
        return found

    async def _read(self, sql: str, params: tuple[Any, ...]) -> list[Sequence[Any]]:
        async with self.lock:
            cursor = await self.conn.execute(sql, params)
            return list(await cursor.fetchall())

    @asynccontextmanager
    async def _transaction(self) -> AsyncIterator[aiosqlite.Connection]:
        """One write transaction under the saver's lock: IMMEDIATE, so no other writer slips in."""
        async with self.lock:
            await self.conn.execute("BEGIN IMMEDIATE")
            try:
                yield self.conn
            except BaseException:
                await self.conn.rollback()
                raise
            await self.conn.commit()
