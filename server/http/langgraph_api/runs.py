"""LangGraph API runs: start (on a thread or without one), stream, wait, join, look up, cancel.

Each run is an ordinary phasegraph request started on the app's one run manager, so it has a
trace, can be paused and inspected, and shows on the web page like any other.
"""

import asyncio
from collections.abc import AsyncIterator
from typing import Annotated, Any, Literal
from uuid import uuid4

from fastapi import APIRouter, Depends, Header, Query, Request, Response
from fastapi.responses import StreamingResponse
from fastapi.sse import ServerSentEvent

from phasegraph.nodes.errors import NotFoundError
from phasegraph.nodes.events import ErrorEvent, Event
from phasegraph.server.http.langgraph_api import views
from phasegraph.server.http.langgraph_api.bodies import QueryModes, RunBody, ThreadRunBody
from phasegraph.server.http.langgraph_api.common import existing, forget, threads_of
from phasegraph.server.http.langgraph_api.parts import RunParts, parse_part_id
from phasegraph.server.http.langgraph_api.starting import start_run, thread_for
from phasegraph.server.http.responses import STARTS, errors
from phasegraph.server.http.sse import SSE_DOC, settle_dropped, sse_response
from phasegraph.server.runs.manager import RunManager, manager_of
from phasegraph.server.storage.checkpoints import thread_config
from phasegraph.server.storage.records import RequestRecord, scoped_key
from phasegraph.server.storage.threads import ThreadStore


def run_routes(project: Any) -> APIRouter:
    """The run routes, in the caller's project."""
    router = APIRouter(tags=["LangGraph Server API"])
    Project = Annotated[str, Depends(project)]
    endings: set[asyncio.Task[None]] = set()  # stateless runs whose thread goes when they end

    async def thread_run(
        thread_id: str, body: ThreadRunBody, request: Request, response: Response, project_id: Project
    ) -> RequestRecord:
        manager, threads = manager_of(request), threads_of(request)
        thread = await thread_for(threads, project_id, thread_id, body.if_not_exists)
        record = await start_run(manager, threads, body, project_id, thread)
        _locate(response, record)
        return record

    async def free_run(
        body: RunBody, request: Request, response: Response, project_id: Project
    ) -> RequestRecord:
        manager, threads = manager_of(request), threads_of(request)
        thread = await threads.create(project_id, str(uuid4()), {})
        record = await start_run(manager, threads, body, project_id, thread)
        _locate(response, record)
        return record

    def drop_when_done(request: Request, record: RequestRecord) -> None:
        """A stateless run's thread goes once the run stopped and its client has what it wanted."""
        task = asyncio.create_task(_delete_when_done(manager_of(request), threads_of(request), record))
        endings.add(task)
        task.add_done_callback(endings.discard)

    ThreadRun = Annotated[RequestRecord, Depends(thread_run)]
    FreeRun = Annotated[RequestRecord, Depends(free_run)]

    @router.post("/threads/{thread_id}/runs", responses=errors(*STARTS))
    async def create_run(body: ThreadRunBody, record: ThreadRun) -> dict[str, Any]:
        return views.run(record, "pending")

    @router.post("/threads/{thread_id}/runs/stream", response_class=StreamingResponse,
                 responses={200: SSE_DOC, **errors(*STARTS)})  # fmt: skip
    async def stream_thread_run(
        body: ThreadRunBody, request: Request, response: Response, record: ThreadRun
    ) -> StreamingResponse:
        cancel = body.on_disconnect == "cancel"
        return sse_response(
            _stream(manager_of(request), record, body.modes(), None, cancel), response.headers
        )

    @router.post(
        "/runs/stream", response_class=StreamingResponse, responses={200: SSE_DOC, **errors(*STARTS)}
    )
    async def stream_free_run(
        body: RunBody, request: Request, response: Response, record: FreeRun
    ) -> StreamingResponse:
        return sse_response(free_stream(body, request, record), response.headers)

    async def free_stream(
        body: RunBody, request: Request, record: RequestRecord
    ) -> AsyncIterator[ServerSentEvent]:
        """A stateless run's parts; its thread is gone before its ``end`` part is sent."""
        manager, dropped = manager_of(request), body.on_completion == "keep"
        try:
            async for item in _stream(manager, record, body.modes(), None, body.on_disconnect == "cancel"):
                if item.event == "end" and not dropped:  # the run stopped: nothing more comes to its thread
                    dropped = True
                    await forget(manager, threads_of(request), record.thread_key)
                yield item
        finally:
            if not dropped:  # the client left first: the thread goes when the run stops
                drop_when_done(request, record)

    @router.post("/threads/{thread_id}/runs/wait", responses=errors(*STARTS))
    async def wait_thread_run(request: Request, record: ThreadRun) -> dict[str, Any]:
        return await _result(manager_of(request), record)

    @router.post("/runs/wait", responses=errors(*STARTS))
    async def wait_free_run(body: RunBody, request: Request, record: FreeRun) -> dict[str, Any]:
        try:
            result = await _result(manager_of(request), record)
        except BaseException:
            if body.on_completion == "delete":  # the client left (or reading failed): drop it later
                drop_when_done(request, record)
            raise
        if body.on_completion == "delete":  # the run stopped: its thread is gone before the answer
            await forget(manager_of(request), threads_of(request), record.thread_key)
        return result

    @router.get("/threads/{thread_id}/runs", responses=errors(403, 404))
    async def list_runs(
        thread_id: str, request: Request, project_id: Project,
        limit: Annotated[int, Query(ge=1, le=1000)] = 10, offset: Annotated[int, Query(ge=0)] = 0,
    ) -> list[dict[str, Any]]:  # fmt: skip
        threads = threads_of(request)
        thread = await existing(threads, project_id, thread_id)
        runs = list(reversed(await threads.requests(thread.thread_key)))
        return [views.run(r) for r in runs[offset : offset + limit]]

    @router.get("/threads/{thread_id}/runs/{run_id}", responses=errors(403, 404))
    async def get_run(thread_id: str, run_id: str, request: Request, project_id: Project) -> dict[str, Any]:
        return views.run(await _run(request, project_id, thread_id, run_id))

    @router.get("/threads/{thread_id}/runs/{run_id}/join", responses=errors(403, 404))
    async def join_result(
        thread_id: str, run_id: str, request: Request, project_id: Project
    ) -> dict[str, Any]:
        return await _result(manager_of(request), await _run(request, project_id, thread_id, run_id))

    async def joined(
        thread_id: str, run_id: str, request: Request, project_id: Project,
        stream_mode: Annotated[QueryModes, Query(description=JOIN_MODES)] = None,
    ) -> tuple[RequestRecord, list[str]]:  # fmt: skip
        record = await _run(request, project_id, thread_id, run_id)
        asked: list[str] = [
            mode for mode in stream_mode or () if mode
        ]  # the SDK sends an empty one for "the run's"
        return record, asked or record.options.get("stream_mode") or ["values"]

    @router.get("/threads/{thread_id}/runs/{run_id}/stream", response_class=StreamingResponse,
                responses={200: SSE_DOC, **errors(403, 404)})  # fmt: skip
    async def join_run(
        request: Request, run: Annotated[tuple[RequestRecord, list[str]], Depends(joined)],
        cancel_on_disconnect: bool = False, last_event_id: Annotated[str | None, Header()] = None,
    ) -> StreamingResponse:  # fmt: skip
        record, modes = run
        after = parse_part_id(last_event_id)
        return sse_response(_stream(manager_of(request), record, modes, after, cancel_on_disconnect))

    @router.post(
        "/threads/{thread_id}/runs/{run_id}/cancel", status_code=202, responses=errors(403, 404, 409)
    )
    async def cancel_run(
        thread_id: str, run_id: str, request: Request, project_id: Project, wait: bool = False,
        action: Annotated[Literal["interrupt", "rollback"], Query(description=CANCEL_ACTION)] = "interrupt",
    ) -> dict[str, Any]:  # fmt: skip
        manager = manager_of(request)
        record = await _run(request, project_id, thread_id, run_id)
        if action == "rollback":  # gone once it stopped: the answer is the run as it was cancelled
            await manager.roll_back(record)
            return views.run(record, "interrupted")
        await manager.cancel(record)
        if wait:
            async for _ in manager.follow(record, 0):
                pass
        return views.run(await manager.engine.current(record))  # as it stands now: the cancel's answer

    return router


JOIN_MODES = (
    "The modes to stream (the run's own when none): repeated (stream_mode=values&stream_mode=custom) "
    'or as one JSON array (stream_mode=["values","custom"]).'
)
CANCEL_ACTION = (
    "interrupt: the run is cancelled and keeps its checkpoints; rollback: it is cancelled, then removed "
    "with the checkpoints it saved (the answer comes once it is gone)."
)


def _locate(response: Response, record: RequestRecord) -> None:
    """Where the run can be joined (the SDK reconnects there after a dropped stream)."""
    response.headers["Location"] = f"/threads/{record.thread_id}/runs/{record.request_id}/stream"
    response.headers["Content-Location"] = f"/threads/{record.thread_id}/runs/{record.request_id}"


async def _run(request: Request, project_id: str, thread_id: str, run_id: str) -> RequestRecord:
    record = await manager_of(request).store.get(scoped_key(project_id, run_id))
    if record is None or record.thread_id != thread_id:
        raise NotFoundError(f"run {run_id!r} not found on thread {thread_id!r}")
    return record


async def _stream(
    manager: RunManager, record: RequestRecord, modes: list[str], after: tuple[int, int] | None, cancel: bool
) -> AsyncIterator[ServerSentEvent]:
    """The run's parts; a client gone before the end cancels the run when it asked for that."""
    finished = False
    try:
        async for item in RunParts(manager, record, modes).stream(after):
            yield item
        finished = True
    finally:
        if not finished and cancel:
            await settle_dropped(manager, record, "cancel")


async def _last_event(manager: RunManager, record: RequestRecord) -> Event | None:
    last = None
    async for event in manager.follow(record, 0):
        last = event
    return last


async def _result(manager: RunManager, record: RequestRecord) -> dict[str, Any]:
    """The thread's output once the run stopped (``__error__``: it failed; ``__interrupt__``: it asks)."""
    last = await _last_event(manager, record)
    if isinstance(last, ErrorEvent):
        return {"__error__": {"error": last.kind, "message": last.message}}
    graph = manager.protocol(record.protocol).graph
    snapshot = await graph.aget_state(thread_config(record.thread_key))
    values = views.output(graph, snapshot.values)
    if snapshot.interrupts:
        values["__interrupt__"] = views.jsonable(snapshot.interrupts)
    return values


async def _delete_when_done(manager: RunManager, threads: ThreadStore, record: RequestRecord) -> None:
    """Drop a stateless run's thread (checkpoints, request, events) once the run stopped."""
    await _last_event(manager, record)
    await forget(manager, threads, record.thread_key)
