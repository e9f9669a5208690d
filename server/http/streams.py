"""The streaming routes that start runs, and the protocol list.

One route per protocol (``/api/runs/{protocol}/stream``), the chat fallback route, the two-stage
route and its resume. Runs start in dependencies, so bad input gets a proper status before the stream
begins.
"""

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request, Response
from fastapi import Path as PathParam
from fastapi.responses import StreamingResponse
from fastapi.sse import EventSourceResponse

from phasegraph.graphs.registry import PROTOCOLS
from phasegraph.nodes.errors import NotFoundError
from phasegraph.nodes.settings import ServerSettings
from phasegraph.server.http.auth import Access, Caller
from phasegraph.server.http.bodies import ChatRequest, ResumeRequest, RunRequest
from phasegraph.server.http.requests import resume_visible
from phasegraph.server.http.responses import STARTS, ProtocolInfo, errors
from phasegraph.server.http.sse import sse_answers, stream_events
from phasegraph.server.runs.manager import manager_of
from phasegraph.server.runs.stops import checked_stops
from phasegraph.server.storage.records import RequestRecord

FALLBACK_ROUTE = "/api/chat/messages"


def stream_routes(caller: Caller) -> APIRouter:
    """The streaming routes that start runs, and the protocol list."""
    router = APIRouter()

    async def start_run(protocol: str, body: ChatRequest, request: Request, access: Access) -> RequestRecord:
        access.require(body.project_id)
        manager = manager_of(request)
        manager.check_message_size(body.message)
        served = manager.protocol(protocol)
        stops = {
            "interrupt_before": checked_stops(served.spec, "interruptBefore", body.interrupt_before),
            "interrupt_after": checked_stops(served.spec, "interruptAfter", body.interrupt_after),
        }
        return await manager.start(
            served, body.message, project_id=body.project_id, request_id=body.request_id,
            thread_id=body.thread_id, model=body.model, show_tool_outputs=body.show_tool_outputs,
            settings=body.settings if isinstance(body, RunRequest) else None,
            options={key: value for key, value in stops.items() if value},
        )  # fmt: skip

    def starter(protocol: str, *, two_stage: bool = False) -> Any:
        async def started(
            body: ChatRequest, request: Request, access: Annotated[Access, Depends(caller)]
        ) -> RequestRecord:
            if two_stage:
                _require_two_stage(request)
            return await start_run(protocol, body, request, access)

        return started

    async def by_path(
        protocol: Annotated[str, PathParam(json_schema_extra={"enum": list(PROTOCOLS)})],
        body: RunRequest,
        request: Request,
        access: Annotated[Access, Depends(caller)],
    ) -> RequestRecord:
        if protocol not in PROTOCOLS:
            raise NotFoundError(f"unknown protocol {protocol!r}; known protocols: {', '.join(PROTOCOLS)}")
        return await start_run(protocol, body, request, access)

    async def resumed(
        body: ResumeRequest, request: Request, access: Annotated[Access, Depends(caller)]
    ) -> RequestRecord:
        _require_two_stage(request)
        return await resume_visible(
            manager_of(request), body.request_id, body.resume_from_phase_index, access, body.answer
        )

    @router.get("/api/protocols", response_model=list[ProtocolInfo])
    async def protocols(access: Annotated[Access, Depends(caller)]) -> list[dict[str, str]]:
        return [
            {"id": s.id, "seed": s.seed, "summary": s.summary, "route": f"/api/runs/{s.id}/stream"}
            for s in PROTOCOLS.values()
        ]

    @router.post("/api/runs/{protocol}/stream", response_class=StreamingResponse, responses=SSE_STARTS)
    async def run_stream(
        body: RunRequest, request: Request, response: Response,
        record: Annotated[RequestRecord, Depends(by_path)],
    ) -> EventSourceResponse:  # fmt: skip
        return stream_events(manager_of(request), record, 0, body.on_disconnect, response.headers)

    @router.post(FALLBACK_ROUTE, response_class=StreamingResponse, responses=SSE_STARTS)
    async def chat_messages(
        body: ChatRequest, request: Request, response: Response,
        record: Annotated[RequestRecord, Depends(starter("unified"))],
    ) -> EventSourceResponse:  # fmt: skip
        return stream_events(manager_of(request), record, 0, body.on_disconnect, response.headers)

    @router.post("/api/chat/messages_two_stage", response_class=StreamingResponse, responses=SSE_STARTS)
    async def chat_two_stage(
        body: ChatRequest, request: Request, response: Response,
        record: Annotated[RequestRecord, Depends(starter("triggered_phase", two_stage=True))],
    ) -> EventSourceResponse:  # fmt: skip
        return stream_events(manager_of(request), record, 0, body.on_disconnect, response.headers)

    @router.post(
        "/api/chat/messages_two_stage/resume",
        response_class=StreamingResponse,
        responses=sse_answers(errors(400, 404, 409, 413)),
    )
    async def resume(
        request: Request, response: Response, record: Annotated[RequestRecord, Depends(resumed)]
    ) -> EventSourceResponse:
        return stream_events(manager_of(request), record, record.last_seq, "stop", response.headers)

    return router


SSE_STARTS = sse_answers(errors(*STARTS))


def _require_two_stage(request: Request) -> None:
    settings: ServerSettings = request.app.state.settings
    if not settings.two_stage_enabled:
        raise TwoStageDisabled()


class TwoStageDisabled(NotFoundError):
    """The two-stage route is switched off; the answer names the route to use instead."""

    def __init__(self) -> None:
        super().__init__(
            f"the two-stage route is disabled (PHASEGRAPH_TWO_STAGE_ENABLED=false); use {FALLBACK_ROUTE}"
        )
