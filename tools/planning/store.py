"""One database's project domain, plans and ledgers, opened from a checkpointer spec."""

from __future__ import annotations

import atexit
import os
import tempfile
from functools import lru_cache

import sqlalchemy as sa
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncEngine

from phasegraph.tools.database import open_engine
from phasegraph.tools.planning.domain import ProjectDomain
from phasegraph.tools.planning.ledger import UsageLedger
from phasegraph.tools.planning.plans import PlanStore
from phasegraph.tools.planning.tables import planning_metadata

#: How often ``ensure_schema`` looks again after another process created a table under it.
SCHEMA_ATTEMPTS = 3


class PlanningStore:
    """The domain, the plans and the usage/error ledgers of one database (one engine)."""

    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine
        self.domain = ProjectDomain(engine)
        self.plans = PlanStore(engine)
        self.ledger = UsageLedger(engine)

    async def ensure_schema(self) -> None:
        """Create the tables a database lacks, and the columns added since a table was made.

        The server's migrations made them where it ran; a database only CLI runs used gets them here.
        Cheap when they exist (one look at the table names and columns). Two processes may create
        them at once: the one that loses a race looks again, and finds them.
        """
        for attempt in range(SCHEMA_ATTEMPTS):
            try:
                async with self.engine.begin() as conn:
                    await conn.run_sync(_create_missing)
                return
            except DBAPIError as exc:
                if attempt == SCHEMA_ATTEMPTS - 1 or not _created_meanwhile(exc):
                    raise

    async def close(self) -> None:
        """Release connections."""
        await self.engine.dispose()


def _create_missing(connection: sa.Connection) -> None:
    inspector = sa.inspect(connection)
    existing = set(inspector.get_table_names())
    if set(planning_metadata.tables) - existing:
        planning_metadata.create_all(connection, checkfirst=True)
    for name in existing & set(planning_metadata.tables):
        table = planning_metadata.tables[name]
        have = {column["name"] for column in inspector.get_columns(name)}
        for column in table.columns:
            if column.name not in have:  # a later column: nullable, or with a default for the old rows
                added = sa.schema.CreateColumn(column).compile(dialect=connection.dialect)
                connection.execute(sa.text(f"ALTER TABLE {table.name} ADD COLUMN {added}"))


def _created_meanwhile(exc: DBAPIError) -> bool:
    """Whether creating a table or column failed because another process had just created it.

    SQLite and Postgres say "already exists" (SQLite says "duplicate column" of a column); Postgres
    may instead trip over the row type the other transaction is adding to its catalogue
    (``pg_type_typname_nsp_index``).
    """
    text = str(exc.orig)
    return any(s in text for s in ("already exists", "duplicate column", "pg_type_typname_nsp_index"))


def open_planning(database: str) -> PlanningStore:
    """The store of a database spec; ``memory`` is one temporary file per process, gone when it ends.

    Each call opens its own engine (an engine belongs to the event loop it first ran in), so
    ``memory`` is a file every engine of the process can open, rather than an in-memory database.
    """
    return PlanningStore(open_engine(f"sqlite:{_memory_file()}" if database == "memory" else database))


@lru_cache(maxsize=1)
def _memory_file() -> str:
    handle, path = tempfile.mkstemp(prefix="phasegraph-planning-", suffix=".db")
    os.close(handle)
    atexit.register(_remove, path)
    return path


def _remove(path: str) -> None:
    if os.path.exists(path):
        os.remove(path)
