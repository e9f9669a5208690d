"""The AG-UI route: start or continue a request, then stream it translated (see the package's docstring)."""

import contextlib
import logging
from collections.abc import AsyncGenerator, AsyncIterator
from dataclasses import dataclass
from typing import Annotated, Any, cast

from ag_ui.core import PROTOCOL_VERSION, BaseEvent, ResumeEntry, RunErrorEvent, RunStartedEvent, TextPart
from ag_ui.encoder import EventEncoder
from fastapi import APIRouter, Depends, Query, Request
from fastapi import Path as PathParam
from fastapi.responses import StreamingResponse
from fastapi.sse import ServerSentEvent
from langgraph.types import Command, StateSnapshot

from phasegraph.graphs.registry import PROTOCOLS
from phasegraph.nodes.approval import waits_for
from phasegraph.nodes.errors import ConflictError, InvalidInputError, NotFoundError
from phasegraph.nodes.events import TextChunk, parse_event
from phasegraph.server.http.ag_ui.approvals import approval_answer, is_approval, waiting_approvals
from phasegraph.server.http.ag_ui.inputs import AgUiInput, TextUserMessage
from phasegraph.server.http.ag_ui.messages import message_id
from phasegraph.server.http.ag_ui.state import StateStream, check_client_state
from phasegraph.server.http.ag_ui.translation import PAUSE_PREFIX, Translation, millis, now
from phasegraph.server.http.auth import Access
from phasegraph.server.http.responses import ID_PATTERN, STARTS, errors
from phasegraph.server.http.sse import STREAM_HEADERS, follow_sse
from phasegraph.server.runs.manager import STOPS, RunManager, manager_of
from phasegraph.server.runs.protocols import Served
from phasegraph.server.runs.starting import TURN
from phasegraph.server.storage.checkpoints import thread_config
from phasegraph.server.storage.records import RequestRecord, scoped_key
from phasegraph.server.storage.threads import ThreadStore

logger = logging.getLogger(__name__)

INTERNAL = "the server failed while streaming this run (see its log); GET /api/requests/{id} shows its state"
INCOMPLETE = "the run's stream ended without an outcome; GET /api/requests/{id} shows its state"
STREAM_DOC = {
    "description": "AG-UI events, one JSON object (``ag_ui.core.Event``) per ``data:`` line",
    "content": {
        "text/event-stream": {
            "itemSchema": {
                "type": "object",
                "required": ["data"],
                "properties": {"data": {"type": "string", "contentMediaType": "application/json"}},
            }
        }
    },
}


@dataclass(frozen=True)
class _Run:
    """A started (or continued) request, its protocol and the seq its stream follows from."""

    record: RequestRecord
    served: Served
    after: int


def ag_ui_routes(caller: Any) -> APIRouter:
    """The AG-UI route, with the app's caller dependency (tokens and projects)."""
    router = APIRouter()

    async def begun(
        protocol: Annotated[str, PathParam(json_schema_extra={"enum": list(PROTOCOLS)})],
        body: AgUiInput,
        request: Request,
        access: Annotated[Access, Depends(caller)],
        project_id: Annotated[str, Query(alias="projectId", pattern=ID_PATTERN)] = "default",
    ) -> _Run:
        if protocol not in PROTOCOLS:
            raise NotFoundError(f"unknown protocol {protocol!r}; known protocols: {', '.join(PROTOCOLS)}")
        access.require(project_id)
        manager = manager_of(request)
        manager.starter.check_message_count(len(body.messages))
        served = manager.protocol(protocol)  # resolved once: everything below is given it
        thread = await _thread(manager, served, body.thread_id, project_id)
        await check_client_state(body.state or {}, served.graph, thread.first, thread.current)
        if body.resume:
            return await _answer(manager, served, body, project_id, body.resume[0], thread)
        _no_open_approval(body, thread)
        return _Run(await _start(manager, served, body, project_id, _turn(body, thread)), served, 0)

    @router.post(
        "/ag-ui/{protocol}",
        response_class=StreamingResponse,
        responses={200: STREAM_DOC, **errors(*STARTS, invalid_input="a resume that cannot be taken")},
    )
    async def ag_ui(
        body: AgUiInput, request: Request, run: Annotated[_Run, Depends(begun)]
    ) -> StreamingResponse:
        encoder = EventEncoder(accept=request.headers.get("accept", ""))
        events = _stream(manager_of(request), run, body.parent_run_id)
        return StreamingResponse(
            (encoder.encode(event) async for event in events),
            media_type=encoder.get_content_type(),
            headers=STREAM_HEADERS,
        )

    return router


async def _start(
    manager: RunManager,
    served: Served,
    body: AgUiInput,
    project_id: str,
    message: str,
    graph_input: Any = TURN,
) -> RequestRecord:
    """A new request on the thread with ``message`` (a thread waiting on a question refuses it: 409).

    ``graph_input`` (the answer to a question, a ``Command(resume=...)``) replaces the message as the
    run's input.
    """
    manager.check_message_size(message)
    return await manager.start(
        served, message, project_id=project_id, request_id=body.run_id, thread_id=body.thread_id,
        model=None, show_tool_outputs=False, settings=body.forwarded_props or {}, graph_input=graph_input,
    )  # fmt: skip


@dataclass(frozen=True)
class _Thread:
    """The thread a run goes on: its first request and its checkpoint now (both ``None``: a new thread)."""

    first: RequestRecord | None
    current: StateSnapshot | None

    def message_ids(self) -> set[str]:
        """The ids of the messages the thread holds, as its ``MESSAGES_SNAPSHOT`` names them."""
        if self.first is None or self.current is None:
            return set()
        held = (self.current.values or {}).get("messages") or []
        return {message_id(message, self.first.thread_id, n) for n, message in enumerate(held)}


async def _thread(manager: RunManager, served: Served, thread_id: str, project_id: str) -> _Thread:
    """The project's thread of that id, read once for every check of the run's input."""
    found = await manager.store.threads(thread_id, frozenset({project_id}))
    if not found:
        return _Thread(None, None)
    if found[0].protocol != served.id:
        raise ConflictError(f"thread {thread_id!r} belongs to protocol {found[0].protocol!r}")
    return _Thread(found[0], await served.graph.aget_state(thread_config(found[0].thread_key)))


def _new_user_messages(body: AgUiInput, thread: _Thread) -> list[TextUserMessage]:
    """The user messages ending ``messages`` that the thread does not hold yet (the client's new turn)."""
    held, new = thread.message_ids(), []
    for message in reversed(body.messages):
        if not isinstance(message, TextUserMessage) or message.id in held:
            break
        new.append(message)
    return new[::-1]


def _text(messages: list[TextUserMessage]) -> str:
    """The user's words: each message's text (text parts joined by newlines), a blank line between."""
    return "\n\n".join(m.content if isinstance(m.content, str) else _joined(m.content) for m in messages)


def _joined(parts: list[TextPart]) -> str:
    return "\n".join(part.text for part in parts)


def _turn(body: AgUiInput, thread: _Thread) -> str:
    """The text of the turn a run answers: the new user messages at the end of ``messages``."""
    new = _new_user_messages(body, thread)
    if not new:
        last = body.messages[-1]
        # about the thread as it stands (which messages it holds), so a conflict, not a malformed body
        raise ConflictError(
            f"messages ends with {last.role} message {last.id!r}, not with a user message thread "
            f"{body.thread_id!r} does not hold yet: a run answers the new user messages at the end of "
            "messages (the ones before them are the client's copy of the thread)"
        )
    return _text(new)


async def _answer(
    manager: RunManager, served: Served, body: AgUiInput, project_id: str, entry: ResumeEntry, thread: _Thread
) -> _Run:
    """Continue from the interrupt ``entry`` answers: a paused request, or a question on the thread."""
    if entry.interrupt_id.startswith(PAUSE_PREFIX):
        return await _continue_paused(manager, served, body, project_id, entry)
    waiting = thread.current.interrupts if thread.current is not None else ()
    pending = [i.id for i in waiting]
    if entry.interrupt_id not in pending:
        waits = f" (it waits on {', '.join(map(repr, pending))})" if pending else ""
        raise NotFoundError(f"thread {body.thread_id!r} has no open interrupt {entry.interrupt_id!r}{waits}")
    if unanswered := [i for i in pending if i != entry.interrupt_id]:
        raise InvalidInputError(f"a resume answers every open interrupt; unanswered: {', '.join(unanswered)}")
    [answered] = [i for i in waiting if i.id == entry.interrupt_id]
    if is_approval(answered):
        return await _approve(manager, served, body, project_id, thread, approval_answer(answered, entry))
    if entry.status == "cancelled":
        raise InvalidInputError(
            f"interrupt {entry.interrupt_id!r} is a question the thread waits on: it can be answered, not "
            "cancelled (status 'resolved', the answer as payload or as a new user message)"
        )
    new = _new_user_messages(body, thread)
    if entry.payload is None and not new:
        raise InvalidInputError(
            f"interrupt {entry.interrupt_id!r} waits for an answer: give it as payload (a string) or as a "
            "new user message at the end of messages"
        )
    answer = _text(new) if entry.payload is None else entry.payload
    if not isinstance(answer, str):
        raise InvalidInputError(f"interrupt {entry.interrupt_id!r} takes words: its payload must be a string")
    return _Run(await _start(manager, served, body, project_id, answer, Command(resume=answer)), served, 0)


async def _approve(
    manager: RunManager,
    served: Served,
    body: AgUiInput,
    project_id: str,
    thread: _Thread,
    answer: Command[Any],
) -> _Run:
    """The request paused at the approval goes on with the answer (same request, as the native resume).

    A thread whose waiting request is gone (cancelled: its interrupt stays on the thread) takes the
    answer on a new request, the run's ``runId``.
    """
    runs = await ThreadStore(manager.store).requests(thread.first.thread_key) if thread.first else []
    waiting = runs[-1] if runs and runs[-1].status == "paused" else None
    if waiting is None:
        return _Run(await _start(manager, served, body, project_id, "", answer), served, 0)
    _same_settings(served, body, waiting)
    await manager.resume(waiting, None, answer.resume)
    return _Run(waiting, served, waiting.last_seq)


def _same_settings(served: Served, body: AgUiInput, record: RequestRecord) -> None:
    """A paused request keeps the settings it started with: ``forwardedProps`` that differ are refused."""
    chosen = served.spec.client_settings(body.forwarded_props or {})
    if any(record.settings.get(key) != value for key, value in chosen.items()):
        raise InvalidInputError(
            f"request {record.request_id!r} keeps its own settings: forwardedProps differ"
        )


def _no_open_approval(body: AgUiInput, thread: _Thread) -> None:
    """Refuse a new turn while the thread waits for an approval (409): only a resume answers one."""
    waiting = waiting_approvals(thread.current.interrupts) if thread.current is not None else []
    if waiting:
        raise ConflictError(
            f"thread {body.thread_id!r} waits for the approval of a tool call (interrupt {waiting[0]!r}): "
            "answer it with resume [{interruptId, status: 'resolved', payload: 'approve' | 'reject' | "
            "{decision: 'edit', args}}] before the next message"
        )


async def _continue_paused(
    manager: RunManager, served: Served, body: AgUiInput, project_id: str, entry: ResumeEntry
) -> _Run:
    """Resume (``resolved``) or cancel (``cancelled``) the paused request the interrupt names."""
    request_id = entry.interrupt_id.removeprefix(PAUSE_PREFIX)
    record = await manager.store.get(scoped_key(project_id, request_id))
    if record is None or record.thread_id != body.thread_id or record.protocol != served.id:
        raise NotFoundError(f"thread {body.thread_id!r} has no open interrupt {entry.interrupt_id!r}")
    if record.status == "superseded":
        raise ConflictError(await _superseded(served, record))
    if record.status != "paused":
        raise ConflictError(f"request {request_id!r} is {record.status}, not paused: nothing to resume")
    if entry.payload is not None:
        raise InvalidInputError(f"a paused run takes no answer: resume {entry.interrupt_id!r} without one")
    _same_settings(served, body, record)
    if entry.status == "cancelled":
        await manager.cancel(record)
    else:
        await manager.resume(record, None)
    return _Run(record, served, record.last_seq)


async def _superseded(served: Served, record: RequestRecord) -> str:
    """Why a superseded request is not resumed, and what its thread waits for now, if anything."""
    said = f"request {record.request_id!r} was superseded: a later run on thread {record.thread_id!r} went on"
    interrupts = (await served.graph.aget_state(thread_config(record.thread_key))).interrupts
    if interrupts:
        said += f"; the thread {waits_for(interrupts[0].value)} (interrupt {interrupts[0].id!r}): answer that"
    return said


async def _stream(manager: RunManager, run: _Run, parent_run_id: str | None) -> AsyncIterator[BaseEvent]:
    """The run as AG-UI events: RUN_STARTED, its events translated, then how it ended."""
    record, translation = run.record, Translation(run.record)
    states = StateStream(run.served.graph, record)
    yield RunStartedEvent(
        thread_id=record.thread_id, run_id=record.request_id, parent_run_id=parent_run_id,
        protocol_version=PROTOCOL_VERSION, timestamp=now(),
    )  # fmt: skip
    try:
        yield await states.snapshot(now())
        # The shared follower: a dropped connection pauses the run like on every other stream.
        follower = cast(AsyncGenerator[ServerSentEvent, None], follow_sse(manager, record, run.after, "stop"))
        async with contextlib.aclosing(follower) as followed:
            async for item in followed:
                event = parse_event(item.raw_data or "")
                if isinstance(event, STOPS):
                    for ending in await translation.ending(event, states):
                        yield ending
                    return
                for translated in translation.of(event):
                    yield translated
                if not isinstance(event, TextChunk):  # anything but model text may follow a state change
                    _, values = await states.read()
                    for delta in states.delta(values, millis(event)):
                        yield delta
        message, code = INCOMPLETE, "incomplete"
    except Exception:  # the machinery failed, not the run: the stream still ends as AG-UI requires
        logger.exception("request %s: its AG-UI stream failed", record.request_id)
        message, code = INTERNAL, "internal"
    ts = now()
    for closed in translation.closing(ts):
        yield closed
    yield RunErrorEvent(message=message.format(id=record.request_id), code=code, timestamp=ts)
