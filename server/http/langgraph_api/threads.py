"""LangGraph API: server info, assistants (one per protocol), threads, their state and history."""

from typing import Annotated, Any
from uuid import uuid4

from fastapi import APIRouter, Depends, Request, Response
from langgraph.types import StateSnapshot
from pydantic import TypeAdapter

from phasegraph.nodes.errors import ConflictError, NotFoundError
from phasegraph.server.http.langgraph_api import views
from phasegraph.server.http.langgraph_api.bodies import (
    AssistantSearchBody,
    CheckpointBody,
    HistoryBody,
    ThreadCreateBody,
)
from phasegraph.server.http.langgraph_api.common import existing, forget, graph_of, status_of, threads_of
from phasegraph.server.http.langgraph_api.starting import protocol_of
from phasegraph.server.http.langgraph_api.thread_bodies import StateAtBody, ThreadQueryBody
from phasegraph.server.http.responses import errors
from phasegraph.server.runs.manager import manager_of
from phasegraph.server.storage.checkpoints import snapshot_at, thread_config
from phasegraph.server.storage.history import history_page
from phasegraph.server.storage.threads import ThreadExists

VERSION = "phasegraph"


def thread_routes(project: Any) -> APIRouter:
    """Info, assistants and threads, in the caller's project."""
    router = APIRouter(tags=["LangGraph Server API"])
    Project = Annotated[str, Depends(project)]

    @router.get("/ok")
    async def ok() -> dict[str, bool]:
        return {"ok": True}

    @router.get("/info")
    async def info() -> dict[str, Any]:
        return {
            "version": VERSION,
            "flags": {"assistants": True, "crons": False},
            "host": {"kind": "phasegraph"},
        }

    @router.post("/assistants/search", responses=errors(400, 403))
    async def search_assistants(body: AssistantSearchBody, project_id: Project) -> list[dict[str, Any]]:
        found = [
            a for a in views.assistants()
            if body.graph_id in (None, a["graph_id"]) and body.name in (None, a["name"])
            and all(a["metadata"].get(k) == v for k, v in body.metadata.items())
        ]  # fmt: skip
        return found[body.offset : body.offset + body.limit]

    @router.get("/assistants/{assistant_id}", responses=errors(403, 404))
    async def get_assistant(assistant_id: str, request: Request, project_id: Project) -> dict[str, Any]:
        return views.assistant(protocol_of(manager_of(request), assistant_id).spec)

    @router.get("/assistants/{assistant_id}/graph", responses=errors(403, 404))
    async def get_graph(
        assistant_id: str, request: Request, project_id: Project, xray: bool | int = False
    ) -> dict[str, Any]:
        graph = protocol_of(manager_of(request), assistant_id).graph
        drawn: dict[str, Any] = graph.get_graph(xray=xray).to_json()
        return drawn

    @router.get("/assistants/{assistant_id}/schemas", responses=errors(403, 404))
    async def get_schemas(assistant_id: str, request: Request, project_id: Project) -> dict[str, Any]:
        served = protocol_of(manager_of(request), assistant_id)
        return {"graph_id": served.spec.id, **_schemas(served.graph)}

    @router.get("/assistants/{assistant_id}/subgraphs", responses=errors(403, 404))
    async def get_subgraphs(
        assistant_id: str, request: Request, project_id: Project, recurse: bool = False
    ) -> dict[str, Any]:
        """Each subgraph's schemas by its namespace (the node it runs in; ``a|b`` for nested ones)."""
        return await _subgraphs(protocol_of(manager_of(request), assistant_id).graph, None, recurse)

    @router.get("/assistants/{assistant_id}/subgraphs/{namespace}", responses=errors(403, 404))
    async def get_subgraphs_in(
        assistant_id: str, namespace: str, request: Request, project_id: Project, recurse: bool = False
    ) -> dict[str, Any]:
        """The subgraph of that namespace (and with ``recurse`` the ones inside it); ``{}`` for none."""
        graph = protocol_of(manager_of(request), assistant_id).graph
        return {
            ns: _schemas(sub) async for ns, sub in graph.aget_subgraphs(namespace=namespace, recurse=recurse)
        }

    @router.post("/threads", responses=errors(400, 403, 409))
    async def create_thread(body: ThreadCreateBody, request: Request, project_id: Project) -> dict[str, Any]:
        threads, thread_id = threads_of(request), body.thread_id or str(uuid4())
        thread = await threads.get(project_id, thread_id)
        if thread is not None and body.if_exists == "raise":
            raise ConflictError(f"thread {thread_id!r} already exists")
        if thread is None:
            try:
                thread = await threads.create(project_id, thread_id, body.metadata)
            except ThreadExists:  # another create of this id came first
                if body.if_exists == "raise":
                    raise
                if (thread := await threads.get(project_id, thread_id)) is None:
                    raise ConflictError(f"thread {thread_id!r} was removed meanwhile; try again") from None
        status, snapshot = await status_of(manager_of(request), threads, thread)
        return views.thread(thread, status, snapshot)

    @router.get("/threads/{thread_id}", responses=errors(403, 404))
    async def get_thread(thread_id: str, request: Request, project_id: Project) -> dict[str, Any]:
        threads = threads_of(request)
        thread = await existing(threads, project_id, thread_id)
        status, snapshot = await status_of(manager_of(request), threads, thread)
        return views.thread(thread, status, snapshot)

    @router.post("/threads/search", responses=errors(400, 403))
    async def search_threads(
        body: ThreadQueryBody, request: Request, project_id: Project
    ) -> list[dict[str, Any]]:
        threads, manager = threads_of(request), manager_of(request)
        found: list[dict[str, Any]] = []
        for thread in await threads.search(frozenset({project_id}), body.metadata, body.ids):
            status, snapshot = await status_of(manager, threads, thread)
            if body.status in (None, status):
                found.append(views.thread(thread, status, snapshot))
        found.sort(key=views.sort_key(body.sort_by), reverse=body.sort_order == "desc")
        return [views.selected(t, body.select) for t in found[body.offset : body.offset + body.limit]]

    @router.delete("/threads/{thread_id}", status_code=204, responses=errors(403, 404, 409))
    async def delete_thread(thread_id: str, request: Request, project_id: Project) -> Response:
        threads, manager = threads_of(request), manager_of(request)
        thread = await existing(threads, project_id, thread_id)
        if await manager.store.thread_busy(thread.thread_key):
            raise ConflictError(f"thread {thread_id!r} has a run in progress; cancel it first")
        await forget(manager, threads, thread.thread_key)
        return Response(status_code=204)

    @router.get("/threads/{thread_id}/state", responses=errors(403, 404))
    async def get_state(thread_id: str, request: Request, project_id: Project) -> dict[str, Any]:
        threads = threads_of(request)
        thread = await existing(threads, project_id, thread_id)
        _, snapshot = await status_of(manager_of(request), threads, thread)
        return views.state(thread_id, snapshot)

    @router.get("/threads/{thread_id}/state/{checkpoint_id}", responses=errors(403, 404))
    async def get_state_at(
        thread_id: str, checkpoint_id: str, request: Request, project_id: Project
    ) -> dict[str, Any]:
        graph, thread = await _graph_of(request, project_id, thread_id)
        return views.state(thread_id, await _checkpoint(graph, thread, thread_id, checkpoint_id))

    @router.post("/threads/{thread_id}/state/checkpoint", responses=errors(400, 403, 404))
    async def get_state_at_checkpoint(
        thread_id: str, body: StateAtBody, request: Request, project_id: Project
    ) -> dict[str, Any]:
        """The state at ``checkpoint`` (the JS SDK's ``getState`` with a checkpoint), or the latest."""
        if body.checkpoint is None:
            return await get_state(thread_id, request, project_id)
        if body.checkpoint.thread_id not in (None, thread_id):  # another thread's checkpoint: not this one's
            raise NotFoundError(f"thread {thread_id!r} has no checkpoint {body.checkpoint.checkpoint_id!r}")
        return await get_state_at(thread_id, body.checkpoint.checkpoint_id, request, project_id)

    @router.post("/threads/{thread_id}/history", responses=errors(400, 403, 404))
    async def history(
        thread_id: str, body: HistoryBody, request: Request, project_id: Project
    ) -> list[dict[str, Any]]:
        graph, thread_key = await _graph_of(request, project_id, thread_id)
        before = body.before.checkpoint_id if isinstance(body.before, CheckpointBody) else body.before
        for named in (before, body.checkpoint.checkpoint_id if body.checkpoint else None):
            if named:  # a page around a checkpoint the thread does not have is 404, not another page
                await _checkpoint(graph, thread_key, thread_id, named)
        if graph is None:
            return []
        config = thread_config(thread_key, body.checkpoint.checkpoint_id if body.checkpoint else None)
        older = thread_config(thread_key, before) if before else None
        page = await history_page(graph, config, limit=body.limit, before=older, metadata=body.metadata)
        return [views.state(thread_id, snapshot) for snapshot in page]

    return router


async def _graph_of(request: Request, project_id: str, thread_id: str) -> tuple[Any | None, str]:
    """The graph of the thread's protocol (``None`` while it has none) and the thread's key."""
    threads = threads_of(request)
    thread = await existing(threads, project_id, thread_id)
    graph = graph_of(manager_of(request), thread, await threads.requests(thread.thread_key))
    return graph, thread.thread_key


async def _checkpoint(
    graph: Any | None, thread_key: str, thread_id: str, checkpoint_id: str
) -> StateSnapshot:
    """A checkpoint of the thread (``graph``: its protocol's, ``None`` before its first run), or 404."""
    if graph is None:
        raise NotFoundError(f"thread {thread_id!r} has no checkpoint {checkpoint_id!r}")
    return await snapshot_at(graph, thread_key, checkpoint_id, shown_as=thread_id)


async def _subgraphs(graph: Any, namespace: str | None, recurse: bool) -> dict[str, Any]:
    """The schemas of the graph's subgraphs (only ``namespace``'s when given), by namespace."""
    return {ns: _schemas(sub) async for ns, sub in graph.aget_subgraphs(namespace=namespace, recurse=recurse)}


def _schemas(graph: Any) -> dict[str, Any]:
    """A graph's input, output, state, config and context schemas, as the reference names them."""
    return {
        "input_schema": graph.get_input_jsonschema(),
        "output_schema": graph.get_output_jsonschema(),
        "state_schema": _state_schema(graph.builder.state_schema),
        "config_schema": graph.get_config_jsonschema(),
        "context_schema": graph.get_context_jsonschema(),
    }


def _state_schema(schema: Any) -> dict[str, Any] | None:
    """The state's JSON schema, when its types have one."""
    try:
        found: dict[str, Any] = TypeAdapter(schema).json_schema()
    except Exception:  # a channel type with no JSON schema: the API allows none
        return None
    return found
