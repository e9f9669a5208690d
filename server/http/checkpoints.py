"""Checkpoints: a thread's timeline (paged), one checkpoint's values, and a fork from a checkpoint."""

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request, Response
from fastapi.responses import StreamingResponse
from fastapi.sse import EventSourceResponse

from phasegraph.server.http.auth import Access, Caller
from phasegraph.server.http.bodies import NAME_IT, NEXT_PAGE_HEADER, ForkRequest, PathId
from phasegraph.server.http.responses import ID_PATTERN, errors
from phasegraph.server.http.sse import sse_answers, stream_events
from phasegraph.server.runs.manager import manager_of
from phasegraph.server.storage.checkpoints import DEFAULT_PAGE, MAX_PAGE, checkpoint_values, timeline
from phasegraph.server.storage.records import RequestRecord, only_one


def checkpoint_routes(caller: Caller) -> APIRouter:
    """A thread's checkpoints, one checkpoint's values, and forks from one."""
    router = APIRouter()

    async def owner_of(request: Request, thread_id: str, access: Access) -> RequestRecord:
        """The first request of the caller's thread of that id (see ``_visible``)."""
        found = await manager_of(request).store.threads(thread_id, access.projects)
        return only_one(found, f"thread {thread_id!r}", NAME_IT)

    @router.get(
        "/api/threads/{thread_id}/checkpoints",
        responses={200: {"headers": {"Link": NEXT_PAGE_HEADER}}, **errors(404, 409)},
    )
    async def checkpoints(
        thread_id: PathId, request: Request, response: Response, access: Annotated[Access, Depends(caller)],
        limit: Annotated[int, Query(ge=1, le=MAX_PAGE, description="Checkpoints per page.")] = DEFAULT_PAGE,
        before: Annotated[
            str | None, Query(pattern=ID_PATTERN, description="Only checkpoints older than this one.")
        ] = None,
    ) -> list[dict[str, Any]]:  # fmt: skip
        record = await owner_of(request, thread_id, access)
        served = manager_of(request).protocol(record.protocol)
        infos, next_before = await timeline(
            served.spec, served.graph, record.thread_key, limit=limit, before=before
        )
        if next_before is not None:
            older = request.url.include_query_params(before=next_before, limit=limit)
            response.headers["Link"] = f'<{older.path}?{older.query}>; rel="next"'
        return [i.model_dump(by_alias=True) for i in infos]

    @router.get("/api/threads/{thread_id}/checkpoints/{checkpoint_id}", responses=errors(404, 409))
    async def checkpoint(
        thread_id: PathId, checkpoint_id: PathId, request: Request, access: Annotated[Access, Depends(caller)]
    ) -> dict[str, Any]:
        record = await owner_of(request, thread_id, access)
        graph = manager_of(request).protocol(record.protocol).graph
        return await checkpoint_values(graph, record.thread_key, checkpoint_id)

    async def forked(
        thread_id: PathId, checkpoint_id: PathId, request: Request, access: Annotated[Access, Depends(caller)]
    ) -> RequestRecord:
        owner = await owner_of(request, thread_id, access)
        return await manager_of(request).fork(owner, checkpoint_id)

    @router.post(
        "/api/threads/{thread_id}/checkpoints/{checkpoint_id}/fork",
        response_class=StreamingResponse,
        responses=sse_answers(errors(400, 404, 409, 413)),
    )
    async def fork(
        request: Request, record: Annotated[RequestRecord, Depends(forked)], body: ForkRequest | None = None
    ) -> EventSourceResponse:
        return stream_events(manager_of(request), record, 0, (body or ForkRequest()).on_disconnect)

    return router
