"""Replicas starting together on an empty Postgres database all open it: LangGraph's migrations race."""

from __future__ import annotations

import asyncio

from phasegraph.server.storage.persistence import open_checkpointer


async def _open(url: str) -> None:
    async with open_checkpointer(url) as saver:
        assert [c async for c in saver.alist(None, limit=1)] == []


async def test_replicas_opening_an_empty_database_at_once_all_start(fresh_postgres: str):
    await asyncio.gather(*(_open(fresh_postgres) for _ in range(4)))
