"""Request records, event logs and traces, kept in the same database as the checkpoints.

A restarted server, or another replica on the same database, sees every request, can replay its
events and read its trace.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import Any, Literal

import sqlalchemy as sa
from pydantic import BaseModel, Field
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine
from sqlalchemy.pool import StaticPool

from nodes.events import Event, parse_event
from nodes.redact import redactor
from nodes.trace import TraceEntry

Status = Literal["running", "paused", "cancelled", "completed", "failed"]

metadata = sa.MetaData()
requests_table = sa.Table(
    "phasegraph_requests",
    metadata,
    sa.Column("request_id", sa.String(200), primary_key=True),
    sa.Column("project_id", sa.String(200), nullable=False, index=True),
    sa.Column("protocol", sa.String(100), nullable=False),
    sa.Column("thread_id", sa.String(200), nullable=False, index=True),
    sa.Column("status", sa.String(20), nullable=False),
    sa.Column("settings", sa.JSON, nullable=False),
    sa.Column("last_seq", sa.Integer, nullable=False, default=0),
    sa.Column("pause_requested", sa.Boolean, nullable=False, default=False),
    sa.Column("cancel_requested", sa.Boolean, nullable=False, default=False),
    sa.Column("owner", sa.String(100), nullable=True),
    sa.Column("heartbeat_at", sa.Float, nullable=True),
    sa.Column("created_at", sa.Float, nullable=False),
    sa.Column("updated_at", sa.Float, nullable=False),
)
events_table = sa.Table(
    "phasegraph_events",
    metadata,
    sa.Column("request_id", sa.String(200), primary_key=True),
    sa.Column("seq", sa.Integer, primary_key=True),
    sa.Column("data", sa.Text, nullable=False),
)
traces_table = sa.Table(
    "phasegraph_traces",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("request_id", sa.String(200), nullable=False, index=True),
    sa.Column("data", sa.Text, nullable=False),
)


class RequestRecord(BaseModel):
    """One request as the server knows it."""

    request_id: str
    project_id: str
    protocol: str
    thread_id: str
    status: Status
    settings: dict[str, Any] = Field(default_factory=dict)  # Context fields to rebuild the run anywhere
    last_seq: int = 0
    pause_requested: bool = False
    cancel_requested: bool = False  # set by a replica that does not drive the run; the driver stops it
    owner: str | None = None
    heartbeat_at: float | None = None
    created_at: float = Field(default_factory=time.time)
    updated_at: float = Field(default_factory=time.time)


def engine_url(checkpointer: str) -> str:
    """The SQLAlchemy URL of the database a checkpointer spec names."""
    if checkpointer == "memory":
        return "sqlite+aiosqlite://"
    if checkpointer.startswith("sqlite:"):
        return f"sqlite+aiosqlite:///{checkpointer.removeprefix('sqlite:')}"
    if checkpointer.startswith(("postgresql://", "postgres://")):
        return "postgresql+psycopg://" + checkpointer.split("://", 1)[1]
    raise ValueError(f"unknown checkpointer {checkpointer!r}: use memory, sqlite:PATH or postgresql://...")


class RequestStore:
    """Async access to request records, events and traces."""

    def __init__(self, engine: AsyncEngine, *, serialize: bool = False) -> None:
        self.engine = engine
        # One shared connection (in-memory SQLite) must not interleave transactions.
        self._guard: contextlib.AbstractAsyncContextManager[Any] = (
            asyncio.Lock() if serialize else contextlib.nullcontext()
        )

    @classmethod
    def for_checkpointer(cls, checkpointer: str) -> RequestStore:
        """A store on the same database as ``checkpointer`` (an in-memory SQLite for ``memory``)."""
        url = engine_url(checkpointer)
        if url.startswith("sqlite"):
            kwargs: dict[str, Any] = {"connect_args": {"timeout": 30}}
            if url == "sqlite+aiosqlite://":
                return cls(create_async_engine(url, poolclass=StaticPool, **kwargs), serialize=True)
            return cls(create_async_engine(url, **kwargs))
        return cls(create_async_engine(url, pool_pre_ping=True))

    async def setup(self) -> None:
        """Create the tables when missing."""
        async with self._guard, self.engine.begin() as conn:
            await conn.run_sync(metadata.create_all)

    async def close(self) -> None:
        """Release connections."""
        await self.engine.dispose()

    async def create(self, record: RequestRecord) -> None:
        """Insert a new request."""
        async with self._guard, self.engine.begin() as conn:
            await conn.execute(requests_table.insert().values(**record.model_dump()))

    async def get(self, request_id: str) -> RequestRecord | None:
        """The request, or ``None``."""
        async with self._guard, self.engine.connect() as conn:
            row = (
                await conn.execute(requests_table.select().where(requests_table.c.request_id == request_id))
            ).first()
        return RequestRecord.model_validate(dict(row._mapping)) if row else None

    async def for_thread(self, thread_id: str) -> RequestRecord | None:
        """The first request of a thread (it fixes the thread's protocol and project)."""
        query = (
            requests_table.select()
            .where(requests_table.c.thread_id == thread_id)
            .order_by(requests_table.c.created_at)
            .limit(1)
        )
        async with self._guard, self.engine.connect() as conn:
            row = (await conn.execute(query)).first()
        return RequestRecord.model_validate(dict(row._mapping)) if row else None

    async def thread_busy(self, thread_id: str) -> bool:
        """True while a request of the thread is running."""
        query = sa.select(sa.func.count()).where(
            requests_table.c.thread_id == thread_id, requests_table.c.status == "running"
        )
        async with self._guard, self.engine.connect() as conn:
            return bool((await conn.execute(query)).scalar())

    async def update(self, request_id: str, **fields: Any) -> None:
        """Change fields of a request."""
        fields["updated_at"] = time.time()
        async with self._guard, self.engine.begin() as conn:
            await conn.execute(
                requests_table.update().where(requests_table.c.request_id == request_id).values(**fields)
            )

    async def claim(self, request_id: str, owner: str, allowed: tuple[Status, ...]) -> bool:
        """Atomically mark a request running for ``owner`` if its status is one of ``allowed``."""
        async with self._guard, self.engine.begin() as conn:
            done = await conn.execute(
                requests_table.update()
                .where(requests_table.c.request_id == request_id, requests_table.c.status.in_(allowed))
                .values(status="running", owner=owner, pause_requested=False, heartbeat_at=time.time())
            )
        return done.rowcount == 1

    async def record(self, request_id: str, event: Event, traces: list[TraceEntry]) -> None:
        """Append one event (and the trace entries that came with it) and advance ``last_seq``."""
        event, traces = redactor().model(event), [redactor().model(t) for t in traces]
        async with self._guard, self.engine.begin() as conn:
            if traces:
                await conn.execute(
                    traces_table.insert(),
                    [{"request_id": request_id, "data": t.model_dump_json()} for t in traces],
                )
            await conn.execute(
                events_table.insert().values(request_id=request_id, seq=event.seq, data=event.to_json())
            )
            await conn.execute(
                requests_table.update()
                .where(requests_table.c.request_id == request_id)
                .values(last_seq=event.seq, updated_at=time.time())
            )

    async def append_traces(self, request_id: str, traces: list[TraceEntry]) -> None:
        """Append trace entries that came after the last event of a run segment."""
        if not traces:
            return
        traces = [redactor().model(t) for t in traces]
        async with self._guard, self.engine.begin() as conn:
            await conn.execute(
                traces_table.insert(),
                [{"request_id": request_id, "data": t.model_dump_json()} for t in traces],
            )

    async def events_after(self, request_id: str, seq: int) -> list[Event]:
        """Events of a request with ``seq`` greater than ``seq``, in order."""
        query = (
            sa.select(events_table.c.data)
            .where(events_table.c.request_id == request_id, events_table.c.seq > seq)
            .order_by(events_table.c.seq)
        )
        async with self._guard, self.engine.connect() as conn:
            rows = (await conn.execute(query)).scalars().all()
        return [parse_event(data) for data in rows]

    async def trace(self, request_id: str) -> list[TraceEntry]:
        """The full trace of a request, oldest first."""
        query = (
            sa.select(traces_table.c.data)
            .where(traces_table.c.request_id == request_id)
            .order_by(traces_table.c.id)
        )
        async with self._guard, self.engine.connect() as conn:
            rows = (await conn.execute(query)).scalars().all()
        return [TraceEntry.model_validate_json(data) for data in rows]
