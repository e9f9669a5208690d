"""A thread's checkpoint history, read a page at a time: no walk loads the whole thread.

LangGraph's ``aget_state_history`` reads and deserializes every checkpoint it is asked for before it
yields the first, so a walk without a ``limit`` loads the whole thread however early it stops. Here
the saver is only ever asked for one page.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import AsyncGenerator
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import StateSnapshot

Graph = CompiledStateGraph[Any, Any, Any, Any]

#: Checkpoints a walk reads from the saver at once, unless it asks for another page size.
WALK_PAGE = 50
#: Metadata keys every saver filters on alike: sqlite reads a dotted key as a path, Postgres does not.
_PLAIN_KEY = re.compile(r"^[A-Za-z0-9_-]+$")


async def walk(
    graph: Graph,
    config: RunnableConfig,
    *,
    before: RunnableConfig | None = None,
    page: int = WALK_PAGE,
    saver_filter: dict[str, Any] | None = None,
) -> AsyncGenerator[StateSnapshot, None]:
    """The thread's checkpoints, newest first (older than ``before``), read ``page`` at a time.

    A walk that stops early has loaded at most the page it stopped in. ``saver_filter`` is passed
    to the saver (see :func:`saver_filter`).
    """
    while True:
        found = [
            snapshot
            async for snapshot in graph.aget_state_history(
                config, filter=saver_filter or None, before=before, limit=page
            )
        ]
        for snapshot in found:
            yield snapshot
        if len(found) < page:
            return
        before = found[-1].config


def saver_filter(metadata: dict[str, Any]) -> dict[str, Any]:
    """The pairs of a metadata filter that every saver matches as plain equality, so it can apply them.

    Those are plain keys with a string or number value; anything else (``None``, true/false, lists
    and objects, dotted keys) means something different to sqlite, Postgres and the in-memory saver,
    so it is checked on the snapshots the saver returns.
    """
    return {
        key: value
        for key, value in metadata.items()
        if _PLAIN_KEY.match(key) and isinstance(value, str | int | float) and not isinstance(value, bool)
    }


async def history_page(
    graph: Graph,
    config: RunnableConfig,
    *,
    limit: int,
    before: RunnableConfig | None = None,
    metadata: dict[str, Any] | None = None,
) -> list[StateSnapshot]:
    """At most ``limit`` checkpoints, newest first, older than ``before``, whose metadata holds ``metadata``.

    The saver filters what it can (:func:`saver_filter`) and is read ``limit`` at a time, so a page
    costs ``limit`` checkpoints however long the thread (more only for a filter it cannot apply).
    """
    wanted = metadata or {}
    found: list[StateSnapshot] = []
    snapshots = walk(graph, config, before=before, page=limit, saver_filter=saver_filter(wanted))
    async with contextlib.aclosing(snapshots) as walking:
        async for snapshot in walking:
            if all((snapshot.metadata or {}).get(key) == value for key, value in wanted.items()):
                found.append(snapshot)
                if len(found) == limit:
                    break
    return found
