"""FastAPI app: streaming routes for every protocol, request control, traces and checkpoints."""

import json
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Annotated, Any, Literal

from fastapi import Depends, FastAPI, Header, Query, Request
from fastapi import Path as PathParam
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, HTMLResponse, JSONResponse, Response
from fastapi.routing import APIRoute
from fastapi.sse import EventSourceResponse, ServerSentEvent
from fastapi.staticfiles import StaticFiles
from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field
from pydantic.alias_generators import to_camel
from starlette.exceptions import HTTPException
from starlette.routing import Match, Route
from starlette.types import ASGIApp

from phasegraph.graphs.registry import PROTOCOLS, get_protocol
from phasegraph.nodes.errors import (
    ConfigurationError,
    ConflictError,
    InvalidInputError,
    NotFoundError,
    PhasegraphError,
    ScriptError,
    TooLargeError,
)
from phasegraph.nodes.models import public_spec
from phasegraph.nodes.settings import ServerSettings
from phasegraph.server.ag_ui import ag_ui_routes
from phasegraph.server.auth import Access, access_for, parse_tokens
from phasegraph.server.checkpoints import DEFAULT_PAGE, MAX_PAGE, checkpoint_values, timeline
from phasegraph.server.langgraph_api import langgraph_routes
from phasegraph.server.networks import InvalidNetwork, network_routes
from phasegraph.server.persistence import open_checkpointer
from phasegraph.server.planner import planner_routes
from phasegraph.server.responses import (
    ID_PATTERN,
    NOT_BLANK,
    STARTS,
    ControlAnswer,
    DeclaredTooLarge,
    ProtocolInfo,
    RequestStatus,
    document_settings,
    errors,
    http_kind,
    whole,
)
from phasegraph.server.retention import Retention, parse_retention
from phasegraph.server.runs import RunManager, manager_of
from phasegraph.server.sse import follow_sse
from phasegraph.server.store import RequestRecord, RequestStore, only_one
from phasegraph.tools.networks import open_network_store
from phasegraph.tools.planning import open_planning

STATIC = Path(__file__).parent / "static"
FALLBACK_ROUTE = "/api/chat/messages"
_STATUS = {
    ConfigurationError: 400,
    ScriptError: 400,
    NotFoundError: 404,
    ConflictError: 409,
    TooLargeError: 413,
    InvalidInputError: 422,
}


class _Body(BaseModel):
    # strict: 0 is not false and "3" is not 3, as the schema says.
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid", strict=True)


def _addressable(value: str) -> str:
    if value in (".", ".."):
        raise ValueError("'.' and '..' cannot be used as ids: they cannot be addressed in a URL")
    return value


NEXT_PAGE_HEADER = {
    "description": 'The next, older page: `</api/threads/...?before=ID&limit=N>; rel="next"`',
    "schema": {"type": "string"},
}
NAME_IT = "add ?projectId="
PROJECT_PARAM = (
    "Only this project (the token must cover it): names the project when the caller's projects "
    "each have a request or thread of the id."
)
#: Ids appear in URL paths, so they are kept to URL-safe characters that a URL can address.
Identifier = Annotated[str, Field(pattern=ID_PATTERN), AfterValidator(_addressable)]
#: The same ids in a path: one that no body could have created is refused with 422.
PathId = Annotated[str, PathParam(pattern=ID_PATTERN), AfterValidator(_addressable)]


#: A phase number (from 1): a JSON integer, written with or without a zero fraction.
PhaseIndex = Annotated[int, Field(ge=1), BeforeValidator(whole)]


class ChatRequest(_Body):
    """Body of every streaming route."""

    message: str = Field(min_length=1, pattern=NOT_BLANK, description="What the agent should do (not blank).")
    project_id: Identifier = "default"
    request_id: Identifier | None = None
    thread_id: Identifier | None = None
    model: str | None = None
    show_tool_outputs: bool = False
    on_disconnect: Literal["stop", "continue"] = "stop"


class RunRequest(ChatRequest):
    """Body of the generic streaming route: a chat request plus the protocol's client settings."""

    settings: dict[str, Any] = Field(
        default_factory=dict,
        description="Run settings the protocol lets clients choose (agent_network: network, "
        "network_version, agent_key, max_steps, max_tool_errors, system_params; xml_contract: max_steps); "
        "a setting of another protocol is refused with 400.",
    )


class ResumeFrom(_Body):
    """Body of the generic resume route: where to continue (the latest point when omitted)."""

    resume_from_phase_index: PhaseIndex | None = None


class ResumeRequest(ResumeFrom):
    """Body of the two-stage resume route."""

    request_id: Identifier


class ForkRequest(_Body):
    """Body of the fork route (optional)."""

    on_disconnect: Literal["stop", "continue"] = "stop"


def create_app(settings: ServerSettings | None = None) -> FastAPI:
    """Build the app; the checkpointer and request store open and close with it."""
    settings = settings or ServerSettings()
    tokens = parse_tokens(settings.api_tokens.get_secret_value()) if settings.api_tokens else {}

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        if not Path(settings.workspace).is_dir():  # an operator's mistake: refuse to start, not per request
            raise ConfigurationError(f"PHASEGRAPH_WORKSPACE {settings.workspace!r} is not a folder")
        retention = parse_retention(settings.retention)  # a malformed policy refuses to start, too
        async with open_checkpointer(settings.checkpointer) as saver:
            store = RequestStore.for_checkpointer(settings.checkpointer)
            await store.setup()
            manager = RunManager(settings, store, saver)
            app.state.manager = manager
            app.state.networks = open_network_store(settings.checkpointer)
            app.state.planning = open_planning(settings.checkpointer)
            await app.state.planning.ensure_schema()
            await manager.open()
            pruning = Retention(retention, settings.retention_interval_seconds, saver, store).start()
            try:
                yield
            finally:
                await pruning.stop()
                await manager.close()
                await app.state.networks.close()
                await app.state.planning.close()
                await store.close()

    # FastAPI refuses a larger body with 413 while it streams in, before anything parses it.
    app = _App(title="phasegraph", lifespan=lifespan, max_body_size=settings.max_body_bytes)
    app.state.settings = settings

    @app.exception_handler(PhasegraphError)
    async def _phasegraph_error(request: Request, exc: PhasegraphError) -> JSONResponse:
        status = next((code for kind, code in _STATUS.items() if isinstance(exc, kind)), 500)
        body: dict[str, Any] = {"error": exc.kind, "message": str(exc)}
        if isinstance(exc, _TwoStageDisabled):
            body["fallback"] = FALLBACK_ROUTE  # the one switch: clients move to this route
        if isinstance(exc, InvalidNetwork):
            body["problems"] = exc.problems
        return JSONResponse(body, status_code=status)

    @app.exception_handler(HTTPException)
    async def _http_error(request: Request, exc: HTTPException) -> JSONResponse:
        # FastAPI's and Starlette's own refusals (401, 403, 405, unparseable body, ...) in the same shape.
        body = {"error": http_kind(exc.status_code), "message": str(exc.detail)}
        headers = exc.headers
        if (
            exc.status_code == 405
        ):  # Starlette names the first route of the path only; a path may have several
            headers = {**(headers or {}), "Allow": ", ".join(_methods(request))}
        return JSONResponse(body, status_code=exc.status_code, headers=headers)

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError) -> Response:
        # The errors echo the input, which may hold lone surrogates: ASCII-escaped JSON carries them.
        body = json.dumps({"detail": jsonable_encoder(exc.errors())}, ensure_ascii=True)
        return Response(body, status_code=422, media_type="application/json")

    def caller(
        request: Request,
        project_id: Annotated[
            str | None, Query(alias="projectId", pattern=ID_PATTERN, description=PROJECT_PARAM)
        ] = None,
    ) -> Access:
        access = access_for(request, tokens)
        if project_id is None:
            return access
        access.require(project_id)
        return Access(projects=frozenset({project_id}))

    _add_stream_routes(app, settings, caller)
    _add_request_routes(app, caller)
    _add_checkpoint_routes(app, caller)
    app.include_router(network_routes(caller))
    app.include_router(planner_routes(caller))
    app.include_router(ag_ui_routes(caller))
    app.include_router(langgraph_routes(caller))

    @app.get("/healthz")
    async def healthz() -> dict[str, str]:
        return {"status": "ok"}

    @app.get("/", response_class=HTMLResponse)
    async def index() -> FileResponse:
        return FileResponse(STATIC / "index.html")

    app.mount("/static", StaticFiles(directory=STATIC), name="static")
    return app


def _methods(request: Request) -> list[str]:
    """Every method some route of the request's path answers."""
    methods: set[str] = set()
    for route in request.app.routes:
        match, _ = route.matches({**request.scope, "method": "GET"})
        if match != Match.NONE and isinstance(route, APIRoute | Route):
            methods |= route.methods or set()
    return sorted(methods)


class _App(FastAPI):
    """FastAPI whose schema states this server's settings, and whose oversized bodies get JSON 413s."""

    def openapi(self) -> dict[str, Any]:
        """The schema, with what the settings decide (tokens, models, message size) written in."""
        if self.openapi_schema is None:
            self.openapi_schema = document_settings(super().openapi(), self.state.settings)
        return self.openapi_schema

    def build_middleware_stack(self) -> ASGIApp:
        """Starlette's stack, behind the JSON answer to a declared oversized body."""
        return DeclaredTooLarge(super().build_middleware_stack(), self.state.settings.max_body_bytes)


Caller = Any  # a dependency callable returning Access


async def _resume(
    manager: RunManager, request_id: str, phase_index: int | None, access: Access
) -> RequestRecord:
    """Start continuing a visible request; its stream follows from the record's last seq."""
    record = await _visible(manager, request_id, access)
    # An orphan is first paused as crashed: the stream starts after that, at the resume.
    return await manager.resume(record, phase_index)


async def _visible(manager: RunManager, request_id: str, access: Access) -> RequestRecord:
    """The caller's request of that id: 404 when none of the caller's projects has one.

    Ids are per project, so another project's request of the same id is neither found nor
    revealed; a caller who sees several projects that each have one names the project.
    """
    return only_one(await manager.store.find(request_id, access.projects), f"request {request_id!r}", NAME_IT)


def _add_stream_routes(app: FastAPI, settings: ServerSettings, caller: Caller) -> None:
    # Runs start in dependencies, so bad input gets a proper status before the stream begins.
    async def start_run(protocol: str, body: ChatRequest, request: Request, access: Access) -> RequestRecord:
        access.require(body.project_id)
        manager = manager_of(request)
        manager.check_message_size(body.message)
        return await manager.start(
            protocol, body.message, project_id=body.project_id, request_id=body.request_id,
            thread_id=body.thread_id, model=body.model, show_tool_outputs=body.show_tool_outputs,
            settings=body.settings if isinstance(body, RunRequest) else None,
        )  # fmt: skip

    def starter(protocol: str, *, two_stage: bool = False) -> Any:
        async def started(
            body: ChatRequest, request: Request, access: Annotated[Access, Depends(caller)]
        ) -> RequestRecord:
            if two_stage:
                _require_two_stage(settings)
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
        _require_two_stage(settings)
        return await _resume(manager_of(request), body.request_id, body.resume_from_phase_index, access)

    @app.get("/api/protocols", response_model=list[ProtocolInfo])
    async def protocols(access: Annotated[Access, Depends(caller)]) -> list[dict[str, str]]:
        return [
            {"id": s.id, "seed": s.seed, "summary": s.summary, "route": f"/api/runs/{s.id}/stream"}
            for s in PROTOCOLS.values()
        ]

    @app.post("/api/runs/{protocol}/stream", response_class=EventSourceResponse, responses=errors(*STARTS))
    async def run_stream(
        body: RunRequest, request: Request, record: Annotated[RequestRecord, Depends(by_path)]
    ) -> AsyncIterator[ServerSentEvent]:
        async for item in follow_sse(manager_of(request), record, 0, body.on_disconnect):
            yield item

    @app.post(FALLBACK_ROUTE, response_class=EventSourceResponse, responses=errors(*STARTS))
    async def chat_messages(
        body: ChatRequest, request: Request, record: Annotated[RequestRecord, Depends(starter("unified"))]
    ) -> AsyncIterator[ServerSentEvent]:
        async for item in follow_sse(manager_of(request), record, 0, body.on_disconnect):
            yield item

    @app.post("/api/chat/messages_two_stage", response_class=EventSourceResponse, responses=errors(*STARTS))
    async def chat_two_stage(
        body: ChatRequest,
        request: Request,
        record: Annotated[RequestRecord, Depends(starter("triggered_phase", two_stage=True))],
    ) -> AsyncIterator[ServerSentEvent]:
        async for item in follow_sse(manager_of(request), record, 0, body.on_disconnect):
            yield item

    @app.post(
        "/api/chat/messages_two_stage/resume",
        response_class=EventSourceResponse,
        responses=errors(400, 404, 409, 413),
    )
    async def resume(
        request: Request, record: Annotated[RequestRecord, Depends(resumed)]
    ) -> AsyncIterator[ServerSentEvent]:
        async for item in follow_sse(manager_of(request), record, record.last_seq, "stop"):
            yield item


def _require_two_stage(settings: ServerSettings) -> None:
    if not settings.two_stage_enabled:
        raise _TwoStageDisabled()


class _TwoStageDisabled(NotFoundError):
    def __init__(self) -> None:
        super().__init__(
            f"the two-stage route is disabled (PHASEGRAPH_TWO_STAGE_ENABLED=false); use {FALLBACK_ROUTE}"
        )


def _add_request_routes(app: FastAPI, caller: Caller) -> None:
    @app.get("/api/requests/{request_id}", response_model=RequestStatus, responses=errors(404, 409))
    async def get_request(
        request_id: PathId, request: Request, access: Annotated[Access, Depends(caller)]
    ) -> dict[str, Any]:
        record = await _visible(manager_of(request), request_id, access)
        return _describe(record)

    @app.get("/api/requests/{request_id}/trace", responses=errors(404, 409))
    async def get_trace(
        request_id: PathId, request: Request, access: Annotated[Access, Depends(caller)]
    ) -> list[dict[str, Any]]:
        manager = manager_of(request)
        record = await _visible(manager, request_id, access)
        return [
            entry.model_dump(mode="json", by_alias=True)
            for entry in await manager.store.trace(record.request_key)
        ]

    async def followed(
        request_id: PathId, request: Request, access: Annotated[Access, Depends(caller)],
        last_event_id: Annotated[str, Header(json_schema_extra={"pattern": LAST_EVENT_ID})] = "",
    ) -> tuple[RequestRecord, int]:  # fmt: skip
        record = await _visible(manager_of(request), request_id, access)
        return record, _last_event_id(last_event_id, record)

    @app.get(
        "/api/requests/{request_id}/stream",
        response_class=EventSourceResponse,
        responses=errors(404, 409, invalid_input="Last-Event-ID is past the request's last event"),
    )
    async def follow(
        request: Request, followed: Annotated[tuple[RequestRecord, int], Depends(followed)]
    ) -> AsyncIterator[ServerSentEvent]:
        record, after = followed
        async for item in follow_sse(manager_of(request), record, after, "continue"):
            yield item

    async def resumed(
        request_id: PathId,
        request: Request,
        access: Annotated[Access, Depends(caller)],
        body: ResumeFrom | None = None,
    ) -> RequestRecord:
        phase_index = body.resume_from_phase_index if body else None
        return await _resume(manager_of(request), request_id, phase_index, access)

    @app.post(
        "/api/requests/{request_id}/resume",
        response_class=EventSourceResponse,
        responses=errors(400, 404, 409, 413),
    )
    async def resume(
        request: Request, record: Annotated[RequestRecord, Depends(resumed)]
    ) -> AsyncIterator[ServerSentEvent]:
        async for item in follow_sse(manager_of(request), record, record.last_seq, "stop"):
            yield item

    @app.post(
        "/api/requests/{request_id}/pause",
        status_code=202,
        response_model=ControlAnswer,
        responses=errors(404, 409),
    )
    async def pause(
        request_id: PathId, request: Request, access: Annotated[Access, Depends(caller)]
    ) -> dict[str, Any]:
        manager = manager_of(request)
        await manager.pause(await _visible(manager, request_id, access))
        return {"requestId": request_id, "status": "pausing"}

    @app.post("/api/requests/{request_id}/cancel", response_model=ControlAnswer, responses=errors(404, 409))
    async def cancel(
        request_id: PathId, request: Request, access: Annotated[Access, Depends(caller)]
    ) -> dict[str, Any]:
        manager = manager_of(request)
        await manager.cancel(await _visible(manager, request_id, access))
        return {"requestId": request_id, "status": "cancelled"}


def _add_checkpoint_routes(app: FastAPI, caller: Caller) -> None:
    async def owner_of(request: Request, thread_id: str, access: Access) -> RequestRecord:
        """The first request of the caller's thread of that id (see ``_visible``)."""
        found = await manager_of(request).store.threads(thread_id, access.projects)
        return only_one(found, f"thread {thread_id!r}", NAME_IT)

    @app.get(
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
        spec = get_protocol(record.protocol)
        infos, next_before = await timeline(
            spec, manager_of(request).graph(spec), record.thread_key, limit=limit, before=before
        )
        if next_before is not None:
            older = request.url.include_query_params(before=next_before, limit=limit)
            response.headers["Link"] = f'<{older.path}?{older.query}>; rel="next"'
        return [i.model_dump(by_alias=True) for i in infos]

    @app.get("/api/threads/{thread_id}/checkpoints/{checkpoint_id}", responses=errors(404, 409))
    async def checkpoint(
        thread_id: PathId, checkpoint_id: PathId, request: Request, access: Annotated[Access, Depends(caller)]
    ) -> dict[str, Any]:
        record = await owner_of(request, thread_id, access)
        graph = manager_of(request).graph(get_protocol(record.protocol))
        return await checkpoint_values(graph, record.thread_key, checkpoint_id)

    async def forked(
        thread_id: PathId, checkpoint_id: PathId, request: Request, access: Annotated[Access, Depends(caller)]
    ) -> RequestRecord:
        owner = await owner_of(request, thread_id, access)
        return await manager_of(request).fork(owner, checkpoint_id)

    @app.post(
        "/api/threads/{thread_id}/checkpoints/{checkpoint_id}/fork",
        response_class=EventSourceResponse,
        responses=errors(400, 404, 409, 413),
    )
    async def fork(
        request: Request, record: Annotated[RequestRecord, Depends(forked)], body: ForkRequest | None = None
    ) -> AsyncIterator[ServerSentEvent]:
        async for item in follow_sse(manager_of(request), record, 0, (body or ForkRequest()).on_disconnect):
            yield item


#: A ``Last-Event-ID`` is an event's seq: up to 12 ASCII digits (empty: from the start).
LAST_EVENT_ID = r"^[0-9]{0,12}$"


def _last_event_id(header: str, record: RequestRecord) -> int:
    """The seq a reconnecting client saw last: 0 without the header, 422 unless it is a seq of the log."""
    value = header.strip()
    if not value:
        return 0
    if not re.fullmatch(LAST_EVENT_ID, value) or int(value) > record.last_seq:
        raise InvalidInputError(
            f"Last-Event-ID must be the id of an event of this request (0 to {record.last_seq}), "
            f"got {value[:20]!r}"
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


app = create_app()
