"""What the LangGraph API routes share: the caller's project, the thread store and thread status."""

from collections.abc import Callable
from typing import Annotated, Any

from fastapi import Depends, Header, Request
from langchain_core.messages import BaseMessage, convert_to_messages
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import StateSnapshot

from phasegraph.nodes.errors import ConfigurationError, InvalidInputError, NotFoundError
from phasegraph.server.http.auth import Access
from phasegraph.server.http.responses import ID_PATTERN
from phasegraph.server.runs.manager import RunManager, manager_of
from phasegraph.server.runs.protocols import Served
from phasegraph.server.storage.checkpoints import can_go_on, thread_config
from phasegraph.server.storage.records import RequestRecord
from phasegraph.server.storage.threads import ThreadRecord, ThreadStore

PROJECT_HEADER = "X-Phasegraph-Project"
Graph = CompiledStateGraph[Any, Any, Any, Any]


def project_dependency(caller: Callable[..., Access]) -> Callable[..., Any]:
    """The project a LangGraph API call acts in (403 when the caller's token does not cover it).

    It is the ``X-Phasegraph-Project`` header, the ``projectId`` query parameter, the token's only
    project, or ``default``.
    """

    def project(
        access: Annotated[Access, Depends(caller)],
        x_phasegraph_project: Annotated[str | None, Header(pattern=ID_PATTERN)] = None,
    ) -> str:
        only = (
            next(iter(access.projects)) if access.projects is not None and len(access.projects) == 1 else None
        )
        project_id = x_phasegraph_project or only or "default"
        access.require(project_id)
        return project_id

    return project


def threads_of(request: Request) -> ThreadStore:
    """The app's thread store (on the run manager's request store)."""
    return ThreadStore(manager_of(request).store)


async def existing(threads: ThreadStore, project_id: str, thread_id: str) -> ThreadRecord:
    """The thread, or 404."""
    thread = await threads.get(project_id, thread_id)
    if thread is None:
        raise NotFoundError(f"thread {thread_id!r} not found")
    return thread


async def forget(manager: RunManager, threads: ThreadStore, thread_key: str) -> None:
    """Delete a thread for good: its checkpoints, then its row, requests, events and traces."""
    await manager.checkpointer.adelete_thread(thread_key)
    await threads.delete(thread_key)


def served_of(manager: RunManager, thread: ThreadRecord, runs: list[RequestRecord]) -> Served | None:
    """The thread's protocol as served here; ``None`` while the thread has none.

    It is the protocol of the thread's first run or, before any, the one its metadata names as
    ``graph_id`` (a copy of a thread, or a thread made for a graph, as the reference reads it).
    """
    name = runs[0].protocol if runs else thread.metadata.get("graph_id")
    if not isinstance(name, str):
        return None
    try:
        return manager.protocol(name)
    except ConfigurationError:  # metadata naming no protocol served here: a thread with no graph yet
        return None


def graph_of(manager: RunManager, thread: ThreadRecord, runs: list[RequestRecord]) -> Graph | None:
    """The graph of the thread's protocol (see :func:`served_of`); ``None`` while it has none."""
    served = served_of(manager, thread, runs)
    return served.graph if served is not None else None


async def status_of(
    manager: RunManager, threads: ThreadStore, thread: ThreadRecord
) -> tuple[str, StateSnapshot | None]:
    """The thread's status (idle, busy, interrupted, error) and its current state (``None``: none yet)."""
    runs = await threads.requests(thread.thread_key)
    graph = graph_of(manager, thread, runs)
    if graph is None:
        return "idle", None
    snapshot = await graph.aget_state(thread_config(thread.thread_key))
    if not runs and snapshot.created_at is None:
        return "idle", None
    if any(r.status == "running" for r in runs):
        return "busy", snapshot
    if can_go_on(snapshot) or snapshot.interrupts:
        return "interrupted", snapshot
    return ("error" if runs and runs[-1].status == "failed" else "idle"), snapshot


def client_messages(messages: Any, where: str) -> list[BaseMessage]:
    """A client's messages (dicts, tuples or strings) as LangChain messages; 422 naming ``where`` if not.

    ``convert_to_messages`` raises ``NotImplementedError`` for a message type it does not know.
    """
    try:
        return convert_to_messages(messages)
    except (ValueError, TypeError, NotImplementedError) as exc:
        raise InvalidInputError(f"{where}: {exc}") from None
