"""Requests: ``/api/requests/{id}`` and its trace, stream, resume, pause and cancel."""

import re
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Header, Request
from fastapi.responses import StreamingResponse
from fastapi.sse import EventSourceResponse

from phasegraph.nodes.errors import ConflictError, InvalidInputError
from phasegraph.nodes.models import public_spec
from phasegraph.server.http.auth import Access, Caller
from phasegraph.server.http.bodies import NAME_IT, PathId, ResumeFrom, refuse_wide_integers
from phasegraph.server.http.responses import ControlAnswer, RequestStatus, errors
from phasegraph.server.http.sse import sse_answers, stream_events
from phasegraph.server.runs.manager import RunManager, manager_of
from phasegraph.server.storage.records import RequestRecord, only_one


async def resume_visible(
    manager: RunManager, request_id: str, phase_index: int | None, access: Access, answer: Any = None
) -> RequestRecord:
    """Start continuing a visible request; its stream follows from the record's last seq.

    ``answer`` answers the question the run waits on (an approval): the run goes on with it.
    """
    record = await visible(manager, request_id, access)
    # An orphan is first paused as crashed: the stream starts after that, at the resume.
    return await manager.resume(record, phase_index, answer)


async def visible(manager: RunManager, request_id: str, access: Access) -> RequestRecord:
    """The caller's request of that id: 404 when none of the caller's projects has one.

    Ids are per project, so another project's request of the same id is neither found nor
    revealed; a caller who sees several projects that each have one names the project.
    """
    return only_one(await manager.store.find(request_id, access.projects), f"request {request_id!r}", NAME_IT)


def request_routes(caller: Caller) -> APIRouter:
    """Request status, trace, stream, resume, pause and cancel."""
    router = APIRouter()

    @router.get("/api/requests/{request_id}", response_model=RequestStatus, responses=errors(404, 409))
    async def get_request(
        request_id: PathId, request: Request, access: Annotated[Access, Depends(caller)]
    ) -> dict[str, Any]:
        record = await visible(manager_of(request), request_id, access)
        return _describe(record)

    @router.get("/api/requests/{request_id}/trace", responses=errors(404, 409))
    async def get_trace(
        request_id: PathId, request: Request, access: Annotated[Access, Depends(caller)]
    ) -> list[dict[str, Any]]:
        manager = manager_of(request)
        record = await visible(manager, request_id, access)
        return [
            entry.model_dump(mode="json", by_alias=True)
            for entry in await manager.store.trace(record.request_key)
        ]

    async def followed(
        request_id: PathId, request: Request, access: Annotated[Access, Depends(caller)],
        last_event_id: Annotated[str, Header(json_schema_extra={"pattern": LAST_EVENT_ID})] = "",
    ) -> tuple[RequestRecord, int]:  # fmt: skip
        record = await visible(manager_of(request), request_id, access)
        return record, _last_event_id(last_event_id, record)

    @router.get(
        "/api/requests/{request_id}/stream",
        response_class=StreamingResponse,
        responses=sse_answers(
            errors(404, 409, invalid_input="Last-Event-ID is not the id (seq) of an event")
        ),
    )
    async def follow(
        request: Request, followed: Annotated[tuple[RequestRecord, int], Depends(followed)]
    ) -> EventSourceResponse:
        record, after = followed
        return stream_events(manager_of(request), record, after, "continue")

    async def resumed(
        request_id: PathId,
        request: Request,
        access: Annotated[Access, Depends(caller)],
        body: ResumeFrom | None = None,
    ) -> RequestRecord:
        phase_index = body.resume_from_phase_index if body else None
        answer = body.answer if body else None
        refuse_wide_integers(answer, "answer")  # what a checkpoint cannot save fails here, not mid-run
        return await resume_visible(manager_of(request), request_id, phase_index, access, answer)

    @router.post(
        "/api/requests/{request_id}/resume",
        response_class=StreamingResponse,
        responses=sse_answers(errors(400, 404, 409, 413)),
    )
    async def resume(
        request: Request, record: Annotated[RequestRecord, Depends(resumed)]
    ) -> EventSourceResponse:
        return stream_events(manager_of(request), record, record.last_seq, "stop")

    @router.post(
        "/api/requests/{request_id}/pause",
        status_code=202,
        response_model=ControlAnswer,
        responses=errors(404, 409),
    )
    async def pause(
        request_id: PathId, request: Request, access: Annotated[Access, Depends(caller)]
    ) -> dict[str, Any]:
        manager = manager_of(request)
        await manager.pause(await visible(manager, request_id, access))
        return {"requestId": request_id, "status": "pausing"}

    @router.post(
        "/api/requests/{request_id}/cancel", response_model=ControlAnswer, responses=errors(404, 409)
    )
    async def cancel(
        request_id: PathId, request: Request, access: Annotated[Access, Depends(caller)]
    ) -> dict[str, Any]:
        manager = manager_of(request)
        await manager.cancel(await visible(manager, request_id, access))
        return {"requestId": request_id, "status": "cancelled"}

    return router


#: A ``Last-Event-ID`` is an event's seq: up to 12 ASCII digits (empty: from the start).
LAST_EVENT_ID = r"^[0-9]{0,12}$"


def _last_event_id(header: str, record: RequestRecord) -> int:
    """The seq a reconnecting client saw last: 0 without the header, 422 when malformed, 409 past the log."""
    value = header.strip()
    if not value:
        return 0
    if not re.fullmatch(LAST_EVENT_ID, value):
        raise InvalidInputError(f"Last-Event-ID must be the id (seq) of an event, got {value[:20]!r}")
    if int(value) > record.last_seq:  # well formed, but the log has not (or not yet) come that far
        raise ConflictError(
            f"Last-Event-ID {value} is past this request's last event ({record.last_seq}): its ids are "
            f"0 to {record.last_seq}"
        )
    return int(value)


def _describe(record: RequestRecord) -> dict[str, Any]:
    return {
        "requestId": record.request_id,
        "projectId": record.project_id,
        "protocol": record.protocol,
        "threadId": record.thread_id,
        "status": record.status,
        "lastSeq": record.last_seq,
        "model": public_spec(record.settings.get("model", "")),
        "createdAt": record.created_at,
        "updatedAt": record.updated_at,
    }
