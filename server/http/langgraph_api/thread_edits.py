"""LangGraph API: changing a thread — its metadata, its state (as Studio edits it) and copies of it."""

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Header, Request, Response

from phasegraph.server.http.langgraph_api import views
from phasegraph.server.http.langgraph_api.common import existing, status_of, threads_of
from phasegraph.server.http.langgraph_api.thread_bodies import ThreadPatchBody
from phasegraph.server.http.responses import errors
from phasegraph.server.runs.manager import manager_of

MINIMAL = "return=minimal"
#: ``Prefer: return=minimal`` (the SDKs' ``return_minimal``): 204, no thread in the answer.
PREFER = Header(description=f"{MINIMAL}: answer 204 without the thread.")
UPDATED = {**errors(403, 404), 204: {"description": f"Updated, answered without a body ({MINIMAL})."}}


def edit_routes(project: Any) -> APIRouter:
    """``PATCH /threads/{id}``, ``POST /threads/{id}/state`` and ``POST /threads/{id}/copy``."""
    router = APIRouter(tags=["LangGraph Server API"])
    Project = Annotated[str, Depends(project)]

    @router.patch(
        "/threads/{thread_id}",
        response_model=dict[str, Any],
        responses=UPDATED,
    )
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

    return router
