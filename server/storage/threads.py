"""Threads as the LangGraph Server API sees them: created before any run, with metadata, deletable.

A thread is a project's thread id (its LangGraph thread is ``project/id``, like every request's).
``POST /threads`` records one here; a thread that phasegraph's own routes started (a request named
its ``threadId``) exists too, through its requests.
"""

from __future__ import annotations

import time
from typing import Any

import sqlalchemy as sa
from pydantic import BaseModel, Field

from phasegraph.nodes.errors import ConflictError
from phasegraph.server.storage.records import (
    RequestRecord,
    events_table,
    requests_table,
    scoped_key,
    threads_table,
    traces_table,
)
from phasegraph.server.storage.store import RequestStore


class ThreadRecord(BaseModel):
    """One thread: its ids, the client's metadata and when it was made and last touched."""

    thread_key: str
    thread_id: str
    project_id: str
    metadata: dict[str, Any] = Field(default_factory=dict)
    created_at: float = Field(default_factory=time.time)
    updated_at: float = Field(default_factory=time.time)


class ThreadExists(ConflictError):
    """A thread of that id already exists in the project."""

    def __init__(self, thread_id: str) -> None:
        super().__init__(f"thread {thread_id!r} already exists")


class ThreadStore:
    """Thread rows and the requests run on each thread, in the request store's database."""

    def __init__(self, store: RequestStore) -> None:
        self.store = store

    async def create(self, project_id: str, thread_id: str, metadata: dict[str, Any]) -> ThreadRecord:
        """Record a new thread; :class:`ThreadExists` when its id is taken.

        The insert is the check: of concurrent creates with one id, the table's key lets exactly one in.
        """
        record = ThreadRecord(
            thread_key=scoped_key(project_id, thread_id), thread_id=thread_id, project_id=project_id,
            metadata=metadata,
        )  # fmt: skip
        try:
            async with self.store.guard, self.store.engine.begin() as conn:
                await conn.execute(threads_table.insert().values(**record.model_dump()))
        except sa.exc.IntegrityError:  # the primary key (project/thread) is the table's only constraint
            raise ThreadExists(thread_id) from None
        return record

    async def get(self, project_id: str, thread_id: str) -> ThreadRecord | None:
        """The thread, from its row or else from the first request run on it; ``None`` when neither."""
        key = scoped_key(project_id, thread_id)
        async with self.store.guard, self.store.engine.connect() as conn:
            row = (
                await conn.execute(threads_table.select().where(threads_table.c.thread_key == key))
            ).first()
        if row is not None:
            return ThreadRecord.model_validate(dict(row._mapping))
        runs = await self.requests(key)
        if not runs:
            return None
        return ThreadRecord(thread_key=key, thread_id=thread_id, project_id=project_id,
                            created_at=runs[0].created_at, updated_at=runs[-1].updated_at)  # fmt: skip

    async def touch(self, thread: ThreadRecord, metadata: dict[str, Any] | None = None) -> None:
        """Note that the thread changed (a run started on it), merging ``metadata`` into its own."""
        merged = {**thread.metadata, **(metadata or {})}
        values = {"updated_at": time.time(), "metadata": merged}
        update = threads_table.update().where(threads_table.c.thread_key == thread.thread_key).values(values)
        try:
            async with self.store.guard, self.store.engine.begin() as conn:
                if (await conn.execute(update)).rowcount == 0:  # known only by its requests: a row now
                    row = thread.model_copy(update=values).model_dump()
                    await conn.execute(threads_table.insert().values(**row))
        except sa.exc.IntegrityError:  # another start made the row between the two statements
            async with self.store.guard, self.store.engine.begin() as conn:
                await conn.execute(update)

    async def merge_metadata(self, thread: ThreadRecord, metadata: dict[str, Any]) -> ThreadRecord:
        """Merge ``metadata`` into the thread's, as it is stored now; the thread as it is then.

        The read and the write are one transaction (the row locked where the database can), so two
        merges at once both land. A thread known only by its requests gets its row.
        """
        key = threads_table.c.thread_key == thread.thread_key
        try:
            async with self.store.guard, self.store.engine.begin() as conn:
                row = (await conn.execute(threads_table.select().where(key).with_for_update())).first()
                current = thread if row is None else ThreadRecord.model_validate(dict(row._mapping))
                merged = current.model_copy(
                    update={"metadata": {**current.metadata, **metadata}, "updated_at": time.time()}
                )
                if row is None:
                    await conn.execute(threads_table.insert().values(**merged.model_dump()))
                else:
                    values = {"metadata": merged.metadata, "updated_at": merged.updated_at}
                    await conn.execute(threads_table.update().where(key).values(values))
        except sa.exc.IntegrityError:  # a run's start made the row meanwhile: merge into that one
            return await self.merge_metadata(thread, metadata)
        return merged

    async def search(
        self, projects: frozenset[str] | None, metadata: dict[str, Any], ids: list[str] | None
    ) -> list[ThreadRecord]:
        """The recorded threads of ``projects`` whose metadata holds every pair of ``metadata``."""
        query = threads_table.select().order_by(threads_table.c.created_at.desc())
        if projects is not None:
            query = query.where(threads_table.c.project_id.in_(sorted(projects)))
        if ids is not None:
            query = query.where(threads_table.c.thread_id.in_(ids))
        async with self.store.guard, self.store.engine.connect() as conn:
            rows = (await conn.execute(query)).all()
        found = [ThreadRecord.model_validate(dict(row._mapping)) for row in rows]
        return [t for t in found if all(t.metadata.get(k) == v for k, v in metadata.items())]

    async def requests(self, thread_key: str) -> list[RequestRecord]:
        """The requests run on the thread, oldest first."""
        query = (
            requests_table.select()
            .where(requests_table.c.thread_key == thread_key)
            .order_by(requests_table.c.created_at)
        )
        async with self.store.guard, self.store.engine.connect() as conn:
            rows = (await conn.execute(query)).all()
        return [RequestRecord.model_validate(dict(row._mapping)) for row in rows]

    async def delete(self, thread_key: str) -> None:
        """Forget the thread: its row, and its requests with their events and traces."""
        keys = sa.select(requests_table.c.request_key).where(requests_table.c.thread_key == thread_key)
        async with self.store.guard, self.store.engine.begin() as conn:
            await conn.execute(events_table.delete().where(events_table.c.request_key.in_(keys)))
            await conn.execute(traces_table.delete().where(traces_table.c.request_key.in_(keys)))
            await conn.execute(requests_table.delete().where(requests_table.c.thread_key == thread_key))
            await conn.execute(threads_table.delete().where(threads_table.c.thread_key == thread_key))
