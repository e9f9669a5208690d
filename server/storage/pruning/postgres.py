"""Pruning ``AsyncPostgresSaver``'s tables: ``checkpoints``, ``checkpoint_writes``, ``checkpoint_blobs``.

A checkpoint names a version of each channel; the value of that version is one blob row, shared by
every checkpoint that saw the channel unchanged. So blobs go only once no remaining checkpoint
names them: the versions the deleted checkpoints named, less those the kept ones name. A run
saving a new checkpoint meanwhile writes new versions (never among the deleted ones') and reuses
only versions its parent, a kept checkpoint, names. Each transaction removes at most ``CHUNK``
checkpoints (or ``BLOB_CHUNK`` blobs). Plain DELETEs leave dead rows that autovacuum makes
reusable; ``compact`` runs a plain VACUUM (never VACUUM FULL, which locks the tables).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager
from typing import Any

from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
from psycopg import AsyncConnection, AsyncCursor
from psycopg.rows import DictRow, dict_row
from psycopg_pool import AsyncConnectionPool

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

#: Blobs removed per transaction.
BLOB_CHUNK = 5000
TABLES = ("checkpoints", "checkpoint_blobs", "checkpoint_writes")
_SLICE = "thread_id = %s AND checkpoint_ns = %s"
_VIEWS = """
SELECT thread_id, checkpoint_ns, checkpoint_id, rn, total FROM (
    SELECT thread_id, checkpoint_ns, checkpoint_id,
           row_number() OVER (PARTITION BY thread_id, checkpoint_ns ORDER BY checkpoint_id DESC) AS rn,
           count(*) OVER (PARTITION BY thread_id, checkpoint_ns) AS total
    FROM checkpoints WHERE thread_id = ANY(%s)
) AS ranked WHERE rn = 1 OR rn = %s
"""
_HEADS = (
    "JOIN unnest(%s::text[], %s::text[], %s::text[]) AS h(thread_id, checkpoint_ns, checkpoint_id) "
    "ON {t}.thread_id = h.thread_id AND {t}.checkpoint_ns = h.checkpoint_ns "
    "AND {t}.checkpoint_id = h.checkpoint_id"
)
_INTERRUPTED = (
    "SELECT DISTINCT w.thread_id, w.checkpoint_ns FROM checkpoint_writes w "
    + _HEADS.format(t="w")
    + " WHERE w.channel = %s"
)
_ROOTS = "SELECT c.thread_id, c.checkpoint_ns, c.metadata -> 'parents' ->> '' AS root FROM checkpoints c " + (
    _HEADS.format(t="c")
)
_VERSIONS = (
    "SELECT DISTINCT v.key AS channel, v.value AS version FROM checkpoints c "
    "CROSS JOIN LATERAL jsonb_each_text(c.checkpoint -> 'channel_versions') AS v "
    "WHERE c.thread_id = %s AND c.checkpoint_ns = %s"
)
_GARBAGE_COUNT = f"""
WITH freed AS ({_VERSIONS} AND c.checkpoint_id < %s), kept AS ({_VERSIONS} AND c.checkpoint_id >= %s)
SELECT count(*) AS n FROM checkpoint_blobs b JOIN freed f ON b.channel = f.channel AND b.version = f.version
WHERE b.thread_id = %s AND b.checkpoint_ns = %s
AND NOT EXISTS (SELECT 1 FROM kept k WHERE k.channel = b.channel AND k.version = b.version)
"""


def _bound(column: str, op: str, bound: str | None) -> tuple[str, tuple[str, ...]]:
    """A condition ``column op bound`` to append, and its parameter (nothing when ``bound`` is None)."""
    return ("", ()) if bound is None else (f" AND {column} {op} %s", (bound,))


def _columns(heads: list[tuple[str, str, str]]) -> tuple[list[str], list[str], list[str]]:
    return [h[0] for h in heads], [h[1] for h in heads], [h[2] for h in heads]


class _Revived(Exception):
    """An expiring thread got a new checkpoint or an active request: stop removing it."""


class PostgresPruner:
    """Prunes one ``AsyncPostgresSaver``'s tables."""

    keeps_blobs = True

    def __init__(self, saver: AsyncPostgresSaver, *, requests: bool) -> None:
        self.conn: AsyncConnection[Any] | AsyncConnectionPool[Any] = saver.conn
        self.lock = saver.lock
        self.requests = requests  # the server's request table lives in the same database

    async def threads(self, after: str | None, limit: int) -> list[str]:
        """Thread ids in order, ``limit`` at a time."""
        since, params = _bound("thread_id", ">", after)
        sql = f"SELECT DISTINCT thread_id FROM checkpoints WHERE true{since} ORDER BY thread_id LIMIT %s"
        return [row["thread_id"] for row in await self._read(sql, (*params, limit))]

    async def views(self, thread_ids: list[str], keep: int) -> list[ThreadView]:
        """Each namespace's newest id, its ``keep``-th newest id, count, call root and interrupt."""
        found: dict[str, ThreadView] = {}
        for row in await self._read(_VIEWS, (thread_ids, keep)):
            view = found.setdefault(row["thread_id"], ThreadView(row["thread_id"]))
            ns = row["checkpoint_ns"]
            if row["rn"] == 1:
                view.namespaces[ns] = NamespaceView(ns, row["total"], row["checkpoint_id"])
            if row["rn"] == keep and row["total"] > keep:
                view.namespaces[ns].oldest_kept = row["checkpoint_id"]
        heads = [(t, ns.name, ns.newest) for t, v in found.items() for ns in v.namespaces.values()]
        for row in await self._read(_INTERRUPTED, (*_columns(heads), INTERRUPT)):
            found[row["thread_id"]].namespaces[row["checkpoint_ns"]].interrupted = True
        calls = [head for head in heads if ":" in head[1]]
        for row in await self._read(_ROOTS, _columns(calls)):
            found[row["thread_id"]].namespaces[row["checkpoint_ns"]].root = row["root"]
        return list(found.values())

    async def trim(self, thread_id: str, namespace: str, below: str | None, dry_run: bool) -> Removed:
        """Remove the namespace's checkpoints older than ``below`` (all when ``None``)."""
        if dry_run:
            return await self._count(thread_id, namespace, below)
        return await self._remove(thread_id, namespace, below, None)

    async def expire(self, thread_id: str, cutoff: str, dry_run: bool) -> Removed | None:
        """Remove the whole thread unless it has come back to life (see ``Pruner.expire``)."""
        sql = "SELECT DISTINCT checkpoint_ns FROM checkpoints WHERE thread_id = %s"
        namespaces = [row["checkpoint_ns"] for row in await self._read(sql, (thread_id,))]
        removed = Removed()
        try:
            if dry_run:
                async with self._transaction() as cur:
                    await self._check_idle(cur, thread_id, cutoff)
            for namespace in namespaces:
                if dry_run:
                    removed += await self._count(thread_id, namespace, None)
                else:
                    removed += await self._remove(thread_id, namespace, None, cutoff)
            if not dry_run:  # writes and blobs of checkpoints that never got saved
                async with self._transaction() as cur:
                    await self._check_idle(cur, thread_id, cutoff)
                    await cur.execute("DELETE FROM checkpoint_writes WHERE thread_id = %s", (thread_id,))
                    removed.writes += cur.rowcount
                    await cur.execute("DELETE FROM checkpoint_blobs WHERE thread_id = %s", (thread_id,))
                    removed.blobs += cur.rowcount
        except _Revived:
            return None
        return removed

    async def remove_run(self, thread_id: str, run_id: str) -> Removed:
        """Remove the checkpoints ``run_id`` saved with their writes, then the blobs only they named."""
        removed, freed = Removed(), dict[str, set[tuple[str, str]]]()
        async with self._transaction() as cur:
            await cur.execute(
                "DELETE FROM checkpoints WHERE thread_id = %s AND metadata ->> 'run_id' = %s "
                "RETURNING checkpoint_ns, checkpoint_id, checkpoint -> 'channel_versions' AS versions",
                (thread_id, run_id),
            )
            rows = await cur.fetchall()
            removed.checkpoints = len(rows)
            for row in rows:
                freed.setdefault(row["checkpoint_ns"], set()).update(_versions([row["versions"]]))
            await cur.execute(
                "DELETE FROM checkpoint_writes AS w USING unnest(%s::text[], %s::text[]) AS g(ns, id) "
                "WHERE w.thread_id = %s AND w.checkpoint_ns = g.ns AND w.checkpoint_id = g.id",
                ([r["checkpoint_ns"] for r in rows], [r["checkpoint_id"] for r in rows], thread_id),
            )
            removed.writes = cur.rowcount
        for ns, versions in freed.items():
            removed.blobs += await self._remove_blobs(thread_id, ns, versions, whole=False, cutoff=None)
        return removed

    async def size(self) -> int | None:
        """Bytes of the three checkpoint tables with their indexes and TOAST (pg_total_relation_size)."""
        sizes = " + ".join(f"pg_total_relation_size('{table}')" for table in TABLES)
        rows = await self._read(f"SELECT {sizes} AS size", ())
        return int(rows[0]["size"])

    async def compact(self) -> None:
        """Plain VACUUM: dead rows become reusable space now, and empty pages at a table's end go."""
        async with self._connection() as conn:
            await conn.execute(f"VACUUM (ANALYZE) {', '.join(TABLES)}")

    async def _remove(self, thread_id: str, ns: str, below: str | None, cutoff: str | None) -> Removed:
        """Delete oldest first, ``CHUNK`` checkpoints per transaction, then the blobs they freed."""
        removed, freed = Removed(), set[tuple[str, str]]()
        last = False
        while not last:
            async with self._transaction() as cur:
                if cutoff is not None:
                    await self._check_idle(cur, thread_id, cutoff)
                older, bound = _bound("checkpoint_id", "<", below)
                await cur.execute(
                    f"SELECT checkpoint_id FROM checkpoints WHERE {_SLICE}{older} "
                    "ORDER BY checkpoint_id LIMIT %s",
                    (thread_id, ns, *bound, CHUNK),
                )
                ids = [row["checkpoint_id"] for row in await cur.fetchall()]
                last = len(ids) < CHUNK
                upto, op = (below, "<") if last else (ids[-1], "<=")
                older, bound = _bound("checkpoint_id", op, upto)
                params = (thread_id, ns, *bound)
                await cur.execute(f"DELETE FROM checkpoint_writes WHERE {_SLICE}{older}", params)
                removed.writes += cur.rowcount
                await cur.execute(
                    f"DELETE FROM checkpoints WHERE {_SLICE}{older} "
                    "RETURNING checkpoint -> 'channel_versions' AS versions",
                    params,
                )
                rows = await cur.fetchall()
                removed.checkpoints += len(rows)
                freed.update(_versions(row["versions"] for row in rows))
                # A kept checkpoint whose parent is gone has none, as LangGraph's own prune leaves it.
                orphaned, _ = _bound("parent_checkpoint_id", op, upto)
                await cur.execute(
                    f"UPDATE checkpoints SET parent_checkpoint_id = NULL WHERE {_SLICE}{orphaned}", params
                )
        removed.blobs += await self._remove_blobs(thread_id, ns, freed, whole=below is None, cutoff=cutoff)
        return removed

    async def _remove_blobs(
        self, thread_id: str, ns: str, freed: set[tuple[str, str]], *, whole: bool, cutoff: str | None
    ) -> int:
        """The blobs of ``freed`` versions no remaining checkpoint names (every blob when ``whole``)."""
        if whole:
            removed = BLOB_CHUNK
            total = 0
            while removed == BLOB_CHUNK:
                async with self._transaction() as cur:
                    if cutoff is not None:
                        await self._check_idle(cur, thread_id, cutoff)
                    await cur.execute(
                        "DELETE FROM checkpoint_blobs WHERE ctid = ANY(ARRAY("
                        f"SELECT ctid FROM checkpoint_blobs WHERE {_SLICE} LIMIT %s))",
                        (thread_id, ns, BLOB_CHUNK),
                    )
                    removed = cur.rowcount
                    total += removed
            return total
        referenced = {(r["channel"], r["version"]) for r in await self._read(_VERSIONS, (thread_id, ns))}
        garbage = sorted(freed - referenced)
        total = 0
        for start in range(0, len(garbage), BLOB_CHUNK):
            part = garbage[start : start + BLOB_CHUNK]
            async with self._transaction() as cur:
                await cur.execute(
                    "DELETE FROM checkpoint_blobs AS b "
                    "USING unnest(%s::text[], %s::text[]) AS g(channel, version) "
                    "WHERE b.thread_id = %s AND b.checkpoint_ns = %s "
                    "AND b.channel = g.channel AND b.version = g.version",
                    ([c for c, _ in part], [v for _, v in part], thread_id, ns),
                )
                total += cur.rowcount
        return total

    async def _count(self, thread_id: str, ns: str, below: str | None) -> Removed:
        older, bound = _bound("checkpoint_id", "<", below)
        params = (thread_id, ns, *bound)
        checkpoints = await self._read(f"SELECT count(*) AS n FROM checkpoints WHERE {_SLICE}{older}", params)
        writes = await self._read(
            f"SELECT count(*) AS n FROM checkpoint_writes WHERE {_SLICE}{older}", params
        )
        if below is None:
            blobs = await self._read(
                f"SELECT count(*) AS n FROM checkpoint_blobs WHERE {_SLICE}", (thread_id, ns)
            )
        else:
            blobs = await self._read(
                _GARBAGE_COUNT, (thread_id, ns, below, thread_id, ns, below, thread_id, ns)
            )
        return Removed(checkpoints[0]["n"], writes[0]["n"], blobs[0]["n"])

    async def _check_idle(self, cur: AsyncCursor[DictRow], thread_id: str, cutoff: str) -> None:
        """Raise ``_Revived`` when the thread has a checkpoint from ``cutoff`` on, or an active request."""
        sql = "SELECT EXISTS (SELECT 1 FROM checkpoints WHERE thread_id = %s AND checkpoint_id >= %s)"
        params: tuple[Any, ...] = (thread_id, cutoff)
        if self.requests:
            sql += (
                f" OR EXISTS (SELECT 1 FROM {requests_table.name} WHERE thread_id = %s AND thread_key = %s "
                "AND status = ANY(%s))"
            )
            params += (thread_id_of(thread_id), thread_id, list(ACTIVE))
        await cur.execute(sql + " AS revived", params)
        row = await cur.fetchone()
        if row is not None and row["revived"]:
            raise _Revived(thread_id)

    async def _read(self, sql: str, params: tuple[Any, ...]) -> list[DictRow]:
        async with self._connection() as conn, conn.cursor(row_factory=dict_row) as cur:
            await cur.execute(sql, params, prepare=False)
            return await cur.fetchall()

    @asynccontextmanager
    async def _connection(self) -> AsyncIterator[AsyncConnection[Any]]:
        if isinstance(self.conn, AsyncConnectionPool):
            async with self.conn.connection() as conn:
                yield conn
        else:  # one connection shared with the saver: take turns
            async with self.lock:
                yield self.conn

    @asynccontextmanager
    async def _transaction(self) -> AsyncIterator[AsyncCursor[DictRow]]:
        async with (
            self._connection() as conn,
            conn.transaction(),
            conn.cursor(row_factory=dict_row) as cur,
        ):
            yield cur


def _versions(rows: Iterable[dict[str, Any] | None]) -> set[tuple[str, str]]:
    """(channel, version) pairs of deleted checkpoints' ``channel_versions``, versions as Postgres text."""
    return {(channel, str(version)) for versions in rows for channel, version in (versions or {}).items()}
