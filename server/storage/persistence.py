"""LangGraph's own savers for each PHASEGRAPH_CHECKPOINTER spec, opened for the app's lifetime."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.memory import InMemorySaver

from phasegraph.nodes.errors import ConfigurationError

logger = logging.getLogger(__name__)


@asynccontextmanager
async def open_checkpointer(spec: str) -> AsyncIterator[BaseCheckpointSaver[str]]:
    """Open the saver ``spec`` names: ``memory``, ``sqlite:PATH`` or ``postgresql://...``."""
    if spec == "memory":
        yield InMemorySaver()
    elif spec.startswith("sqlite:"):
        from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

        path = Path(spec.removeprefix("sqlite:"))
        path.parent.mkdir(parents=True, exist_ok=True)
        async with AsyncSqliteSaver.from_conn_string(str(path)) as saver:
            await saver.conn.execute("PRAGMA journal_mode=WAL")
            # No fsync at each commit (one per graph step): a killed process loses nothing committed,
            # a power cut may lose the last commits but never corrupts the file (Postgres for that).
            await saver.conn.execute("PRAGMA synchronous=NORMAL")
            await saver.setup()
            yield saver
    elif spec.startswith(("postgresql://", "postgres://")):
        from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
        from psycopg.errors import DeadlockDetected, UniqueViolation
        from psycopg.rows import dict_row
        from psycopg_pool import AsyncConnectionPool

        kwargs = {"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row}
        async with AsyncConnectionPool(spec, kwargs=kwargs, min_size=1, max_size=10, open=False) as pool:
            postgres = AsyncPostgresSaver(pool)  # type: ignore[arg-type]
            async with _setup_lock(pool):
                try:
                    await postgres.setup()
                except (UniqueViolation, DeadlockDetected):  # a process without our lock migrated meanwhile
                    await postgres.setup()  # now it finds them recorded and has nothing left to do
            yield postgres
    else:
        raise ConfigurationError(
            f"unknown checkpointer {spec!r}: use memory, sqlite:PATH or postgresql://..."
        )


#: Any fixed number: the Postgres advisory lock replicas take while LangGraph's saver creates its tables.
SETUP_LOCK = 7_349_120_312
#: Seconds between attempts to take it, and after which waiting for it is logged.
SETUP_LOCK_POLL, SETUP_LOCK_WARN = 0.05, 30.0


@asynccontextmanager
async def _setup_lock(pool: Any) -> AsyncIterator[None]:
    """Hold the setup lock: replicas starting together migrate one after the other.

    It is tried, not waited for: a session blocked on the lock would hold a snapshot that the
    holder's ``CREATE INDEX CONCURRENTLY`` waits for, a deadlock Postgres would have to break.
    """
    import psycopg

    async with pool.connection() as conn:
        waited, warned = 0.0, False
        while True:
            taken = await conn.execute("SELECT pg_try_advisory_lock(%s) AS got", (SETUP_LOCK,))
            if (await taken.fetchone())["got"]:
                break
            if waited >= SETUP_LOCK_WARN and not warned:
                logger.warning("still waiting after %.0f s for another replica's database set-up", waited)
                warned = True
            await asyncio.sleep(SETUP_LOCK_POLL)
            waited += SETUP_LOCK_POLL
        try:
            yield
        finally:  # a broken connection must not hide set-up's own error; its end frees the lock anyway
            with contextlib.suppress(psycopg.Error):
                await conn.execute("SELECT pg_advisory_unlock(%s)", (SETUP_LOCK,))
