"""The run's resource repository as nodes get it: loaded off the event loop, kept across resumes."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from phasegraph.nodes.goal_pursuit.context import GoalPursuitContext
from phasegraph.tools.resources import ResourceRepository


async def open_repository(context: GoalPursuitContext, state: Mapping[str, Any]) -> ResourceRepository:
    """The repository, with the changes this run already made when it lives in memory only.

    Loading reads files and builds an SQLite index, so it runs in a thread (``langgraph dev``
    refuses blocking calls on the event loop). A resumed run gets a fresh Context, and with it a
    fresh copy of an in-memory repository: the changes the run's tools made, kept in its state, are
    made again. A writable repository has them in its files already.
    """
    loaded = context.resource_repository
    repository = loaded if loaded is not None else await asyncio.to_thread(context.repository)
    made = state.get("resource_changes") or []
    if not repository.writable and len(repository.changes) < len(made):
        await asyncio.to_thread(repository.replay, made[len(repository.changes) :])
    return repository
