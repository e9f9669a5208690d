"""LangGraph's own savers for each PHASEGRAPH_CHECKPOINTER spec, opened for the app's lifetime."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.memory import InMemorySaver

from phasegraph.nodes.errors import ConfigurationError


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
        from psycopg.errors import UniqueViolation
        from psycopg.rows import dict_row
        from psycopg_pool import AsyncConnectionPool

        kwargs = {"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row}
        async with AsyncConnectionPool(spec, kwargs=kwargs, min_size=1, max_size=10, open=False) as pool:
            postgres = AsyncPostgresSaver(pool)  # type: ignore[arg-type]
            try:
                await postgres.setup()
            except UniqueViolation:  # a replica starting at the same moment recorded the same migration
                await postgres.setup()  # now it finds them recorded and has nothing left to do
            yield postgres
    else:
        raise ConfigurationError(
            f"unknown checkpointer {spec!r}: use memory, sqlite:PATH or postgresql://..."
        )
