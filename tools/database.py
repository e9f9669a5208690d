"""The SQLAlchemy engine of the database a checkpointer spec names (memory, sqlite:PATH, postgresql://...).

The server keeps its request log there, and published agent networks live beside them, so one
setting (``PHASEGRAPH_CHECKPOINTER``) places everything.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sqlalchemy import make_url
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine
from sqlalchemy.pool import StaticPool

#: The in-memory SQLite URL: one database per engine, alive as long as the engine.
MEMORY_URL = "sqlite+aiosqlite://"


def engine_url(checkpointer: str) -> str:
    """The SQLAlchemy URL of the database a checkpointer spec names."""
    if checkpointer == "memory":
        return MEMORY_URL
    if checkpointer.startswith("sqlite:"):
        return f"sqlite+aiosqlite:///{checkpointer.removeprefix('sqlite:')}"
    if checkpointer.startswith(("postgresql://", "postgres://")):
        return "postgresql+psycopg://" + checkpointer.split("://", 1)[1]
    raise ValueError(f"unknown checkpointer {checkpointer!r}: use memory, sqlite:PATH or postgresql://...")


def open_engine(checkpointer: str) -> AsyncEngine:
    """An async engine on that database (for ``memory``: a new in-memory SQLite on one shared connection)."""
    url = engine_url(checkpointer)
    if url.startswith("sqlite"):
        kwargs: dict[str, Any] = {"connect_args": {"timeout": 30}}
        if url == MEMORY_URL:
            return create_async_engine(url, poolclass=StaticPool, **kwargs)
        # like the checkpointer, the file's folder is made on first use (sqlite makes only the file)
        Path(checkpointer.removeprefix("sqlite:")).parent.mkdir(parents=True, exist_ok=True)
        return create_async_engine(url, **kwargs)
    return create_async_engine(url, pool_pre_ping=True)


def public_database(checkpointer: str) -> str:
    """A database spec fit for messages: a Postgres password is masked."""
    if checkpointer.startswith(("postgresql://", "postgres://")):
        return make_url(checkpointer).render_as_string(hide_password=True)
    return checkpointer
