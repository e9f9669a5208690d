"""What an expired thread left in the request store: its requests, their events and traces, its row.

Checkpoints are most of a thread's weight, but not all of it: every request run on it keeps a status
row, its whole event log and its trace, and a thread made by ``POST /threads`` keeps a row of its
own. Under a ``ttl`` these go with the thread's checkpoints: a thread is forgotten once its
checkpoints are gone (or it never had any) and nothing in the store changed since the cutoff.
Each batch is removed in one transaction whose conditions are checked again there, so a thread that
a new run came back to in the meantime keeps everything.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

import sqlalchemy as sa

from phasegraph.server.storage.pruning.base import ACTIVE
from phasegraph.server.storage.records import events_table, requests_table, threads_table, traces_table
from phasegraph.server.storage.store import RequestStore

#: Keys bound per statement (sqlite binds at most 32,766 values).
KEYS_PER_STATEMENT = 1000


@dataclass
class Forgotten:
    """Rows of the request store one pass removed (or, in a dry run, would remove)."""

    threads: int = 0  # thread rows (``POST /threads``)
    requests: int = 0
    events: int = 0
    traces: int = 0

    def __add__(self, other: Forgotten) -> Forgotten:
        return Forgotten(
            self.threads + other.threads,
            self.requests + other.requests,
            self.events + other.events,
            self.traces + other.traces,
        )


def _idle(key: sa.ColumnElement[str], before: float) -> sa.ColumnElement[bool]:
    """Nothing of the thread ``key`` names is active or changed since ``before``."""
    # Aliases: ``key`` may be a column of these very tables, in the statement around this condition.
    requests, threads = requests_table.alias("busy_requests"), threads_table.alias("touched_threads")
    busy = sa.or_(requests.c.status.in_(ACTIVE), requests.c.updated_at >= before)
    return sa.and_(
        ~sa.exists().where(requests.c.thread_key == key, busy),
        ~sa.exists().where(threads.c.thread_key == key, threads.c.updated_at >= before),
    )


async def idle_threads(store: RequestStore, before: float, after: str | None, limit: int) -> list[str]:
    """Up to ``limit`` thread keys after ``after``, in order, that the store holds and that are idle."""
    keys = sa.union(sa.select(requests_table.c.thread_key), sa.select(threads_table.c.thread_key)).subquery()
    query = sa.select(keys.c.thread_key).where(_idle(keys.c.thread_key, before))
    if after is not None:
        query = query.where(keys.c.thread_key > after)
    query = query.order_by(keys.c.thread_key).limit(limit)
    async with store.guard, store.engine.connect() as conn:
        return [row[0] for row in await conn.execute(query)]


async def forget(
    store: RequestStore, thread_keys: Collection[str], before: float, dry_run: bool
) -> Forgotten:
    """Remove what the store keeps of these threads (those still idle), in one transaction.

    The requests and thread rows to remove are chosen once, locked where the database can (Postgres:
    ``FOR UPDATE``; sqlite's write transaction holds the whole file), and removed by key: a request
    committed meanwhile is never half removed (its events gone, its row kept).
    """
    if not thread_keys:
        return Forgotten()
    requests, threads, keys = requests_table, threads_table, sorted(thread_keys)
    async with store.guard, store.engine.begin() as conn:
        chosen = sa.select(requests.c.request_key).where(
            requests.c.thread_key.in_(keys), _idle(requests.c.thread_key, before)
        )
        request_keys = list((await conn.execute(chosen.with_for_update())).scalars())
        rows = sa.select(threads.c.thread_key).where(
            threads.c.thread_key.in_(keys), _idle(threads.c.thread_key, before)
        )
        row_keys = list((await conn.execute(rows.with_for_update())).scalars())
        counts: dict[str, int] = {}
        for table, column, chosen_keys in (
            (events_table, events_table.c.request_key, request_keys),
            (traces_table, traces_table.c.request_key, request_keys),
            (requests, requests.c.request_key, request_keys),
            (threads, threads.c.thread_key, row_keys),
        ):
            counts[table.name] = 0
            for start in range(0, len(chosen_keys), KEYS_PER_STATEMENT):
                condition = column.in_(chosen_keys[start : start + KEYS_PER_STATEMENT])
                if dry_run:
                    count = sa.select(sa.func.count()).select_from(table).where(condition)
                    counts[table.name] += (await conn.execute(count)).scalar_one()
                else:
                    counts[table.name] += (await conn.execute(table.delete().where(condition))).rowcount
    return Forgotten(
        threads=counts[threads.name],
        requests=counts[requests.name],
        events=counts[events_table.name],
        traces=counts[traces_table.name],
    )
