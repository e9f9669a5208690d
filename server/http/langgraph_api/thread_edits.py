"""LangGraph API: changing a thread — its metadata, its state (as Studio edits it) and copies of it."""

from typing import Annotated, Any
from uuid import uuid4

from fastapi import APIRouter, Depends, Header, Request, Response

from phasegraph.nodes.errors import ConflictError
from phasegraph.server.http.langgraph_api import views
from phasegraph.server.http.langgraph_api.common import existing, forget, served_of, status_of, threads_of
from phasegraph.server.http.langgraph_api.thread_bodies import StateUpdateBody, ThreadPatchBody
from phasegraph.server.http.langgraph_api.thread_state import write_state
from phasegraph.server.http.responses import errors
from phasegraph.server.runs.manager import manager_of
from phasegraph.server.storage.checkpoints import copy_checkpoints

MINIMAL = "return=minimal"
#: ``Prefer: return=minimal`` (the SDKs' ``return_minimal``): 204, no thread in the answer.
PREFER = Header(description=f"{MINIMAL}: answer 204 without the thread.")
UPDATED = {**errors(400, 403, 404), 204: {"description": f"Updated, answered without a body ({MINIMAL})."}}
WRITTEN = errors(400, 403, 404, 409, invalid_input="a value or node the thread's protocol does not have")


def edit_routes(project: Any) -> APIRouter:
    """``PATCH /threads/{id}``, ``POST /threads/{id}/state`` and ``POST /threads/{id}/copy``."""
    router = APIRouter(tags=["LangGraph Server API"])
    Project = Annotated[str, Depends(project)]

    @router.patch("/threads/{thread_id}", response_model=dict[str, Any], responses=UPDATED)
    async def update_thread(
        thread_id: str,
        body: ThreadPatchBody,
        request: Request,
        project_id: Project,
        prefer: Annotated[str | None, PREFER] = None,
    ) -> Any:
        threads = threads_of(request)
        thread = await threads.merge_metadata(await existing(threads, project_id, thread_id), body.metadata)
        if prefer is not None and MINIMAL in prefer:
            return Response(status_code=204)
        status, snapshot = await status_of(manager_of(request), threads, thread)
        return views.thread(thread, status, snapshot)

    @router.post("/threads/{thread_id}/state", responses=WRITTEN)
    async def update_state(
        thread_id: str, body: StateUpdateBody, request: Request, project_id: Project
    ) -> dict[str, Any]:
        """A new checkpoint with ``values`` written as ``as_node`` would have (Studio's state edit)."""
        manager, threads = manager_of(request), threads_of(request)
        thread = await existing(threads, project_id, thread_id)
        runs = await threads.requests(thread.thread_key)
        served = served_of(manager, thread, runs)
        if served is None:
            raise ConflictError(
                f"thread {thread_id!r} has no graph yet: run it once, or create it with metadata graph_id"
            )
        last_run = next((r for r in reversed(runs) if r.protocol == served.id), None)
        checkpoint = await write_state(served, thread, body, last_run, manager.store.thread_busy)
        await threads.merge_metadata(thread, {})  # updated now
        # as the reference answers it: the SDKs read ``checkpoint`` (Python) or ``configurable`` (JS)
        return {
            "checkpoint": checkpoint,
            "configurable": checkpoint,
            "checkpoint_id": checkpoint["checkpoint_id"],
        }

    @router.post("/threads/{thread_id}/copy", responses=errors(403, 404))
    async def copy_thread(thread_id: str, request: Request, project_id: Project) -> dict[str, Any]:
        """A new thread in the project with the same checkpoints (history, forks, interrupts) and metadata."""
        manager, threads = manager_of(request), threads_of(request)
        thread = await existing(threads, project_id, thread_id)
        served = served_of(manager, thread, await threads.requests(thread.thread_key))
        metadata = dict(thread.metadata)
        if served is not None:  # a copy has no runs of its own: its metadata says whose state it holds
            metadata.setdefault("graph_id", served.id)
        copy = await threads.create(project_id, str(uuid4()), metadata)
        try:
            await copy_checkpoints(manager.checkpointer, thread.thread_key, copy.thread_key)
        except BaseException:  # half a copy is no copy: nothing of it stays
            await forget(manager, threads, copy.thread_key)
            raise
        status, snapshot = await status_of(manager, threads, copy)
        return views.thread(copy, status, snapshot)

    return router
