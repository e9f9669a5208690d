"""LangGraph API: server info, assistants (one per protocol), threads, their state and history."""

from typing import Annotated, Any
from uuid import uuid4

from fastapi import APIRouter, Depends, Request, Response
from pydantic import TypeAdapter

from phasegraph.nodes.errors import ConflictError, NotFoundError
from phasegraph.server.http.langgraph_api import views
from phasegraph.server.http.langgraph_api.bodies import (
    AssistantSearchBody,
    CheckpointBody,
    HistoryBody,
    ThreadCreateBody,
    ThreadSearchBody,
)
from phasegraph.server.http.langgraph_api.common import existing, forget, status_of, threads_of
from phasegraph.server.http.langgraph_api.starting import protocol_of
from phasegraph.server.http.responses import errors
from phasegraph.server.runs.manager import manager_of
from phasegraph.server.storage.checkpoints import thread_config

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
        spec, graph = served.spec, served.graph
        return {
            "graph_id": spec.id,
            "input_schema": graph.get_input_jsonschema(),
            "output_schema": graph.get_output_jsonschema(),
            "state_schema": _state_schema(graph.builder.state_schema),
            "config_schema": graph.get_config_jsonschema(),
            "context_schema": graph.get_context_jsonschema(),
        }

    @router.post("/threads", responses=errors(400, 403, 409))
    async def create_thread(body: ThreadCreateBody, request: Request, project_id: Project) -> dict[str, Any]:
        threads, thread_id = threads_of(request), body.thread_id or str(uuid4())
        thread = await threads.get(project_id, thread_id)
        if thread is not None and body.if_exists == "raise":
            raise ConflictError(f"thread {thread_id!r} already exists")
        thread = thread or await threads.create(project_id, thread_id, body.metadata)
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
        body: ThreadSearchBody, request: Request, project_id: Project
    ) -> list[dict[str, Any]]:
        threads, manager = threads_of(request), manager_of(request)
        found: list[dict[str, Any]] = []
        for thread in await threads.search(frozenset({project_id}), body.metadata, body.ids):
            status, snapshot = await status_of(manager, threads, thread)
            if body.status in (None, status):
                found.append(views.thread(thread, status, snapshot))
        return found[body.offset : body.offset + body.limit]

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
        snapshot = await graph.aget_state(thread_config(thread, checkpoint_id)) if graph else None
        if snapshot is None or not snapshot.config:
            raise NotFoundError(f"checkpoint {checkpoint_id!r} not found on thread {thread_id!r}")
        return views.state(thread_id, snapshot)

    @router.post("/threads/{thread_id}/history", responses=errors(400, 403, 404))
    async def history(
        thread_id: str, body: HistoryBody, request: Request, project_id: Project
    ) -> list[dict[str, Any]]:
        graph, thread_key = await _graph_of(request, project_id, thread_id)
        if graph is None:
            return []
        before = body.before.checkpoint_id if isinstance(body.before, CheckpointBody) else body.before
        config = thread_config(thread_key, body.checkpoint.checkpoint_id if body.checkpoint else None)
        older = thread_config(thread_key, before) if before else None
        found: list[dict[str, Any]] = []
        # The metadata filter is applied here, not by the saver: its keys may be any string.
        async for snapshot in graph.aget_state_history(config, before=older):
            if all((snapshot.metadata or {}).get(k) == v for k, v in (body.metadata or {}).items()):
                found.append(views.state(thread_id, snapshot))
                if len(found) == body.limit:
                    break
        return found

    return router


async def _graph_of(request: Request, project_id: str, thread_id: str) -> tuple[Any | None, str]:
    """The graph of the thread's protocol (``None`` before its first run) and the thread's key."""
    threads = threads_of(request)
    thread = await existing(threads, project_id, thread_id)
    runs = await threads.requests(thread.thread_key)
    graph = manager_of(request).protocol(runs[0].protocol).graph if runs else None
    return graph, thread.thread_key


def _state_schema(schema: Any) -> dict[str, Any] | None:
    """The state's JSON schema, when its types have one."""
    try:
        found: dict[str, Any] = TypeAdapter(schema).json_schema()
    except Exception:  # a channel type with no JSON schema: the API allows none
        return None
    return found
