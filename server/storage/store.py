"""Request records, event logs and traces, kept in the same database as the checkpoints.

A restarted server, or another replica on the same database, sees every request, can replay its
events and read its trace.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncEngine

from phasegraph.nodes.events import Event, parse_event
from phasegraph.nodes.redact import redactor
from phasegraph.nodes.trace import TraceEntry
from phasegraph.server.storage.migrate import upgrade_schema
from phasegraph.server.storage.records import (
    CONTROL_CHANNEL,
    EVENTS_CHANNEL,
    RequestExists,
    RequestRecord,
    Status,
    ThreadBusy,
    events_table,
    requests_table,
    traces_table,
)
from phasegraph.tools.database import MEMORY_URL, open_engine

#: Postgres refuses NOTIFY payloads of 8000 bytes or more.
MAX_PAYLOAD = 7800


@dataclass
class Append:
    """What one request adds to the log in a batch: events, trace entries, maybe its new status."""

    request_key: str
    events: list[Event] = field(default_factory=list)
    traces: list[TraceEntry] = field(default_factory=list)
    status: Status | None = None  # set with these events, in the same transaction
    guarded: bool = False  # only while the writing replica still drives the request


def notify_payloads(owner: str | None, heads: dict[str, int]) -> list[str]:
    """JSON payloads naming the writer and each request's last seq, each under Postgres's limit."""
    payloads: list[str] = []
    chunk: dict[str, int] = {}
    for key, seq in heads.items():
        candidate = json.dumps({"owner": owner, "heads": {**chunk, key: seq}})
        if chunk and len(candidate.encode()) > MAX_PAYLOAD:
            payloads.append(json.dumps({"owner": owner, "heads": chunk}))
            chunk = {}
        chunk[key] = seq
    if chunk:
        payloads.append(json.dumps({"owner": owner, "heads": chunk}))
    return payloads


def _redacted(item: Event | TraceEntry) -> str:
    """The JSON the store keeps: no configured secret in it."""
    data = item.to_json() if hasattr(item, "to_json") else item.model_dump_json()
    if redactor().found(data):
        masked = redactor().model(item)
        return masked.to_json() if hasattr(masked, "to_json") else masked.model_dump_json()
    return data


def _advance(items: list[Append], guarded: set[str], owner: str | None, now: float) -> sa.Update:
    """One UPDATE for a batch: each request's new ``last_seq`` and status; guarded ones only if owned.

    It returns the keys it updated: a guarded request missing from them is driven elsewhere now.
    """
    table, key = requests_table, requests_table.c.request_key
    seqs = {i.request_key: i.events[-1].seq for i in items if i.events}
    statuses = {i.request_key: i.status for i in items if i.status is not None}
    values: dict[str, Any] = {"updated_at": now}
    if seqs:
        values["last_seq"] = sa.case(seqs, value=key, else_=table.c.last_seq)
    if statuses:
        values["status"] = sa.case(statuses, value=key, else_=table.c.status)
        values["pause_requested"] = sa.case(
            {k: False for k in statuses}, value=key, else_=table.c.pause_requested
        )
    if guarded:
        values["heartbeat_at"] = sa.case({k: now for k in guarded}, value=key, else_=table.c.heartbeat_at)
    keys = sorted({i.request_key for i in items})
    owned = sa.and_(table.c.owner == owner, table.c.status == "running")
    condition = owned if len(guarded) == len(keys) else sa.or_(key.not_in(sorted(guarded)), owned)
    return table.update().where(key.in_(keys), condition).values(values).returning(key)


class RequestStore:
    """Async access to request records, events and traces."""

    def __init__(self, engine: AsyncEngine, *, serialize: bool = False) -> None:
        self.engine = engine
        # One shared connection (in-memory SQLite) must not interleave transactions.
        self._guard: contextlib.AbstractAsyncContextManager[Any] = (
            asyncio.Lock() if serialize else contextlib.nullcontext()
        )
        #: Sends a message to the other processes on this database after a commit, where the database
        #: cannot (sqlite: ``SocketWakeups.announce``); ``None`` where it can (Postgres) or none share it.
        self.announce: Callable[[str, str], None] | None = None

    @property
    def guard(self) -> contextlib.AbstractAsyncContextManager[Any]:
        """Held around every use of the engine (one shared connection must not interleave)."""
        return self._guard

    @classmethod
    def for_checkpointer(cls, checkpointer: str) -> RequestStore:
        """A store on the same database as ``checkpointer`` (an in-memory SQLite for ``memory``)."""
        engine = open_engine(checkpointer)
        return cls(engine, serialize=str(engine.url) == MEMORY_URL)

    async def setup(self) -> None:
        """Bring the tables to the newest schema (creating them, or migrating older ones)."""
        async with self._guard, self.engine.begin() as conn:
            await conn.run_sync(upgrade_schema)

    async def close(self) -> None:
        """Release connections."""
        await self.engine.dispose()

    async def create(self, record: RequestRecord) -> None:
        """Insert a new request: :class:`RequestExists` or :class:`ThreadBusy` (its thread runs another).

        The insert is the check: of concurrent starts with one id or on one thread, the key and the index of
        running requests let one in (a read cannot decide it). The thread's paused ones go (``_supersede``).
        """
        try:
            async with self._guard, self.engine.begin() as conn:
                await conn.execute(requests_table.insert().values(**record.model_dump()))
                await conn.execute(_supersede(record))
        except sa.exc.IntegrityError:  # the primary key (project/request) or the running-thread index
            if await self.get(record.request_key) is not None:
                raise RequestExists(record.request_id) from None
            raise ThreadBusy(record.thread_id) from None

    async def get(self, request_key: str) -> RequestRecord | None:
        """The request, or ``None``."""
        query = requests_table.select().where(requests_table.c.request_key == request_key)
        return await self._one(query)

    async def find(self, request_id: str, projects: frozenset[str] | None) -> list[RequestRecord]:
        """The requests of that id in ``projects`` (every project when ``None``)."""
        query = requests_table.select().where(requests_table.c.request_id == request_id)
        if projects is not None:
            query = query.where(requests_table.c.project_id.in_(sorted(projects)))
        return await self._all(query)

    async def before_start(
        self, request_key: str, project_id: str, thread_id: str
    ) -> tuple[bool, RequestRecord | None]:
        """In one read: whether the request key is taken, and the first request of the project's thread."""
        table = requests_table
        query = table.select().where(
            sa.or_(
                table.c.request_key == request_key,
                sa.and_(table.c.project_id == project_id, table.c.thread_id == thread_id),
            )
        )
        found = await self._all(query)
        mine = (r for r in found if r.project_id == project_id and r.thread_id == thread_id)
        thread = sorted(mine, key=lambda r: r.created_at)
        return any(r.request_key == request_key for r in found), (thread[0] if thread else None)

    async def threads(self, thread_id: str, projects: frozenset[str] | None) -> list[RequestRecord]:
        """The first request of each project's thread of that id, in ``projects`` (all when ``None``)."""
        query = requests_table.select().where(requests_table.c.thread_id == thread_id)
        if projects is not None:
            query = query.where(requests_table.c.project_id.in_(sorted(projects)))
        first: dict[str, RequestRecord] = {}
        for record in sorted(await self._all(query), key=lambda r: r.created_at):
            first.setdefault(record.project_id, record)
        return list(first.values())

    async def _one(self, query: sa.Select[Any]) -> RequestRecord | None:
        async with self._guard, self.engine.connect() as conn:
            row = (await conn.execute(query)).first()
        return RequestRecord.model_validate(dict(row._mapping)) if row else None

    async def _all(self, query: sa.Select[Any]) -> list[RequestRecord]:
        async with self._guard, self.engine.connect() as conn:
            rows = (await conn.execute(query)).all()
        return [RequestRecord.model_validate(dict(row._mapping)) for row in rows]

    async def thread_busy(self, thread_key: str) -> bool:
        """True while a request of the thread is running."""
        running = sa.and_(requests_table.c.thread_key == thread_key, requests_table.c.status == "running")
        async with self._guard, self.engine.connect() as conn:
            return bool((await conn.execute(sa.select(sa.func.count()).where(running))).scalar())

    async def update(self, request_key: str, **fields: Any) -> None:
        """Change fields of a request."""
        fields["updated_at"] = time.time()
        async with self._guard, self.engine.begin() as conn:
            await conn.execute(
                requests_table.update().where(requests_table.c.request_key == request_key).values(**fields)
            )

    async def claim(self, record: RequestRecord, owner: str, allowed: tuple[Status, ...]) -> bool:
        """Make ``owner`` drive a request whose status is in ``allowed``; :class:`ThreadBusy`: thread busy."""
        table, key = requests_table, record.request_key
        try:
            async with self._guard, self.engine.begin() as conn:
                done = await conn.execute(
                    table.update().where(table.c.request_key == key, table.c.status.in_(allowed))
                    .values(status="running", owner=owner, pause_requested=False, heartbeat_at=time.time())
                )  # fmt: skip
        except sa.exc.IntegrityError:
            raise ThreadBusy(record.thread_id) from None
        return done.rowcount == 1

    async def take_over(self, record: RequestRecord, owner: str) -> bool:
        """Make ``owner`` the driver of an orphaned running request, unless anything moved meanwhile.

        The row must still show the owner and heartbeat ``record`` was read with, so of several
        replicas that spot the same orphan exactly one wins, and a driver that was only slow
        (it wrote a heartbeat since) keeps its run.
        """
        table = requests_table
        async with self._guard, self.engine.begin() as conn:
            done = await conn.execute(
                table.update()
                .where(
                    table.c.request_key == record.request_key,
                    table.c.status == "running",
                    table.c.owner == record.owner if record.owner is not None else table.c.owner.is_(None),
                    table.c.heartbeat_at == record.heartbeat_at
                    if record.heartbeat_at is not None
                    else table.c.heartbeat_at.is_(None),
                )
                .values(owner=owner, pause_requested=False, heartbeat_at=time.time(), updated_at=time.time())
            )
        return done.rowcount == 1

    async def maybe_orphaned(self, stale_before: float, gone: Callable[[str], bool]) -> list[RequestRecord]:
        """Running requests that may have lost their driver.

        Those without one, driven by an owner ``gone`` says is gone, or not heartbeaten since
        ``stale_before``: the distinct owners are read first, not every other owner's run each round.
        """
        table = requests_table
        running = table.c.status == "running"
        async with self._guard, self.engine.connect() as conn:
            owners = (await conn.execute(sa.select(table.c.owner).where(running).distinct())).scalars().all()
        dead = sorted(owner for owner in owners if owner is not None and gone(owner))
        lost = sa.or_(table.c.owner.is_(None), table.c.owner.in_(dead), table.c.heartbeat_at < stale_before)
        return await self._all(table.select().where(running, lost))

    async def write_batch(self, items: list[Append], owner: str | None = None) -> set[str]:
        """Write many requests' events, traces and statuses in one transaction (group commit).

        Items with ``guarded`` set are written only while ``owner`` still drives their request
        (status ``running``); the keys of those refused are returned and nothing of theirs is
        written. One statement checks ownership and advances every request's ``last_seq`` (and
        status, and the driver's heartbeat); one notification per batch tells other replicas which
        requests moved (Postgres delivers it at commit; on sqlite ``announce`` sends it after).
        """
        now = time.time()
        guarded = {i.request_key for i in items if i.guarded}
        async with self._guard, self.engine.begin() as conn:
            written = set((await conn.execute(_advance(items, guarded, owner, now))).scalars().all())
            kept = [i for i in items if i.request_key in written or not i.guarded]
            events = [
                {"request_key": i.request_key, "seq": e.seq, "data": _redacted(e)}
                for i in kept
                for e in i.events
            ]
            traces = [{"request_key": i.request_key, "data": _redacted(t)} for i in kept for t in i.traces]
            if events:
                await conn.execute(events_table.insert(), events)
            if traces:
                await conn.execute(traces_table.insert(), traces)
            heads = {i.request_key: i.events[-1].seq for i in kept if i.events}
            if conn.dialect.name == "postgresql" and heads:
                for payload in notify_payloads(owner, heads):
                    await conn.execute(sa.select(sa.func.pg_notify(EVENTS_CHANNEL, payload)))
        if self.announce is not None and heads:  # committed: other processes on the file may read it
            for payload in notify_payloads(owner, heads):
                self.announce(EVENTS_CHANNEL, payload)
        return guarded - written

    async def request_control(self, request_key: str, **flags: bool) -> None:
        """Set a pause or cancel flag for the replica that drives the request, and wake it."""
        async with self._guard, self.engine.begin() as conn:
            await conn.execute(
                requests_table.update()
                .where(requests_table.c.request_key == request_key)
                .values(**flags, updated_at=time.time())
            )
            if conn.dialect.name == "postgresql":
                await conn.execute(sa.select(sa.func.pg_notify(CONTROL_CHANNEL, request_key)))
        if self.announce is not None:
            self.announce(CONTROL_CHANNEL, request_key)

    async def heartbeat(self, request_keys: list[str], owner: str) -> list[RequestRecord]:
        """Refresh ``owner``'s heartbeat on those requests; return those its driver must act on.

        Those are the requests with a pause or cancel asked, cancelled, or driven elsewhere now: the
        rest need nothing, and reading and validating every running request's record each second
        was a measurable share of a loaded server's time.
        """
        if not request_keys:
            return []
        table = requests_table
        keys = table.c.request_key.in_(request_keys)
        act = sa.or_(table.c.pause_requested, table.c.cancel_requested, table.c.status == "cancelled",
                     table.c.owner.is_(None), table.c.owner != owner)  # fmt: skip
        async with self._guard, self.engine.begin() as conn:
            await conn.execute(
                table.update()
                .where(keys, table.c.owner == owner, table.c.status == "running")
                .values(heartbeat_at=time.time())
            )
            rows = (await conn.execute(table.select().where(keys, act))).all()
        return [RequestRecord.model_validate(dict(row._mapping)) for row in rows]

    async def events_after(self, request_key: str, seq: int) -> list[Event]:
        """Events of a request with ``seq`` greater than ``seq``, in order."""
        query = (
            sa.select(events_table.c.data)
            .where(events_table.c.request_key == request_key, events_table.c.seq > seq)
            .order_by(events_table.c.seq)
        )
        async with self._guard, self.engine.connect() as conn:
            rows = (await conn.execute(query)).scalars().all()
        return [parse_event(data) for data in rows]

    async def trace(self, request_key: str) -> list[TraceEntry]:
        """The full trace of a request, oldest first."""
        query = (
            sa.select(traces_table.c.data)
            .where(traces_table.c.request_key == request_key)
            .order_by(traces_table.c.id)
        )
        async with self._guard, self.engine.connect() as conn:
            rows = (await conn.execute(query)).scalars().all()
        return [TraceEntry.model_validate_json(data) for data in rows]


def _supersede(record: RequestRecord) -> sa.Update:
    """Mark the other paused requests of ``record``'s thread ``superseded``.

    ``record`` goes on from where they stopped (answering a question one of them asked, say), so resuming
    one of them would continue its work.
    """
    table = requests_table
    others = sa.and_(table.c.thread_key == record.thread_key, table.c.request_key != record.request_key)
    paused = sa.and_(others, table.c.status == "paused")
    return table.update().where(paused).values(status="superseded", updated_at=record.created_at)


async def forget(store: RequestStore, request_key: str) -> None:
    """Remove a request that stopped from ``store``: its row, events and trace (a rolled-back run)."""
    async with store.guard, store.engine.begin() as conn:
        for table in (events_table, traces_table, requests_table):
            await conn.execute(table.delete().where(table.c.request_key == request_key))
