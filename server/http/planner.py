"""The planner's routes: ``POST /api/agent/stream`` (seed 002's route) and the usage and error ledgers.

The stream is an ordinary request of the ``planner`` protocol on the shared SSE machinery (pause,
resume, replay and inspection all work); its body adds the seed's ``contextType`` and ``entityId``.
``GET /api/usage`` and ``GET /api/errors`` read the rows every planner session writes, limited to
the caller's projects, with totals and per-group sums computed over every matching row.
"""

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import StreamingResponse
from fastapi.sse import EventSourceResponse
from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from phasegraph.nodes.planner.guidance import ContextType, ProfileName
from phasegraph.server.http.auth import Access
from phasegraph.server.http.responses import ID_PATTERN, STARTS, errors
from phasegraph.server.http.sse import sse_answers, stream_events
from phasegraph.server.runs.manager import manager_of
from phasegraph.server.storage.records import RequestRecord
from phasegraph.tools.planning import LedgerFilter, PlanningStore

PROTOCOL = "planner"
UsageGroup = Literal[
    "operation", "context", "model", "profile", "execution_mode", "session", "request", "status"
]
ErrorGroup = Literal["component", "stage", "tool", "context", "kind"]


class AgentStreamRequest(BaseModel):
    """Body of ``POST /api/agent/stream``. A blank message is answered with a clarifying question."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid", strict=True)

    message: str = Field(description="The user's message (blank: the planner asks what they want).")
    context_type: ContextType = Field(default="general", description="What the conversation is about.")
    entity_id: str = Field(default="", max_length=200, description="The project in scope, if any.")
    user_id: str = Field(default="anonymous", pattern=ID_PATTERN, description="Who asks (usage rows).")
    profile: ProfileName | None = Field(default=None, description="Profile override (the context type's).")
    project_id: str = Field(default="default", pattern=ID_PATTERN)
    request_id: str | None = Field(default=None, pattern=ID_PATTERN)
    thread_id: str | None = Field(default=None, pattern=ID_PATTERN, description="The session's thread.")
    model: str | None = None
    show_tool_outputs: bool = False
    on_disconnect: Literal["stop", "continue"] = "stop"


class UsageReportBody(BaseModel):
    """Usage rows (newest first, at most ``limit``), totals over every matching row, and group sums."""

    rows: list[dict[str, Any]]
    totals: dict[str, Any]
    groups: list[dict[str, Any]]


class ErrorReportBody(BaseModel):
    """Error rows (newest first, at most ``limit``), their total count, and counts per group."""

    rows: list[dict[str, Any]]
    total: int
    groups: list[dict[str, Any]]


def planner_routes(caller: Any) -> APIRouter:
    """The routes, with the app's caller dependency (tokens and projects)."""
    router = APIRouter()
    Caller = Annotated[Access, Depends(caller)]

    async def started(body: AgentStreamRequest, request: Request, access: Caller) -> RequestRecord:
        access.require(body.project_id)
        manager = manager_of(request)
        manager.check_message_size(body.message)
        settings: dict[str, Any] = {
            "context_type": body.context_type,
            "entity_id": body.entity_id,
            "user_id": body.user_id,
        }
        if body.profile is not None:
            settings["profile"] = body.profile
        return await manager.start(
            manager.protocol(PROTOCOL),
            body.message,
            project_id=body.project_id,
            request_id=body.request_id,
            thread_id=body.thread_id,
            model=body.model,
            show_tool_outputs=body.show_tool_outputs,
            settings=settings,
        )

    @router.post(
        "/api/agent/stream", response_class=StreamingResponse, responses=sse_answers(errors(*STARTS))
    )
    async def agent_stream(
        body: AgentStreamRequest, request: Request, record: Annotated[RequestRecord, Depends(started)]
    ) -> EventSourceResponse:
        return stream_events(manager_of(request), record, 0, body.on_disconnect)

    @router.get("/api/usage", response_model=UsageReportBody, responses=errors(400, 403))
    async def usage(
        request: Request,
        access: Caller,
        session_id: Annotated[str | None, Query(alias="sessionId", max_length=200)] = None,
        request_id: Annotated[str | None, Query(alias="requestId", max_length=200)] = None,
        context_type: Annotated[str | None, Query(alias="contextType", max_length=50)] = None,
        operation_type: Annotated[str | None, Query(alias="operationType", max_length=50)] = None,
        model: Annotated[str | None, Query(max_length=200)] = None,
        profile: Annotated[str | None, Query(max_length=20)] = None,
        since: Annotated[float | None, Query(description="Rows at or after this epoch second.")] = None,
        until: Annotated[float | None, Query(description="Rows before this epoch second.")] = None,
        by: Annotated[UsageGroup | None, Query(description="Sum per operation, context, model, ...")] = None,
        limit: Annotated[int, Query(ge=1, le=1000)] = 200,
    ) -> UsageReportBody:
        filters = LedgerFilter(
            scopes=access.projects,
            session_id=session_id,
            request_id=request_id,
            context_type=context_type,
            operation_type=operation_type,
            model=model,
            profile=profile,
            since=since,
            until=until,
        )
        report = await _planning(request).ledger.usage(filters, by=by, limit=limit)
        return UsageReportBody.model_validate(report.model_dump(mode="json"))

    @router.get("/api/errors", response_model=ErrorReportBody, responses=errors(400, 403))
    async def error_rows(
        request: Request,
        access: Caller,
        session_id: Annotated[str | None, Query(alias="sessionId", max_length=200)] = None,
        request_id: Annotated[str | None, Query(alias="requestId", max_length=200)] = None,
        context_type: Annotated[str | None, Query(alias="contextType", max_length=50)] = None,
        component: Annotated[str | None, Query(max_length=100)] = None,
        stage: Annotated[str | None, Query(max_length=100)] = None,
        tool_name: Annotated[str | None, Query(alias="toolName", max_length=200)] = None,
        since: Annotated[float | None, Query()] = None,
        until: Annotated[float | None, Query()] = None,
        by: Annotated[ErrorGroup | None, Query(description="Count per component, stage, tool, ...")] = None,
        limit: Annotated[int, Query(ge=1, le=1000)] = 200,
    ) -> ErrorReportBody:
        filters = LedgerFilter(
            scopes=access.projects,
            session_id=session_id,
            request_id=request_id,
            context_type=context_type,
            component=component,
            stage=stage,
            tool_name=tool_name,
            since=since,
            until=until,
        )
        report = await _planning(request).ledger.errors(filters, by=by, limit=limit)
        return ErrorReportBody.model_validate(report.model_dump(mode="json"))

    return router


def _planning(request: Request) -> PlanningStore:
    store: PlanningStore = request.app.state.planning
    return store
