"""AG-UI: ``POST /ag-ui/{protocol}`` takes AG-UI's ``RunAgentInput`` and streams AG-UI 1.0 events.

One more surface on the run machinery: a run started here is an ordinary request of the protocol
(``runId`` is its request id, ``threadId`` its thread, ``?projectId=`` its project), so it shows in
``GET /api/requests``, has a trace, can be paused with the pause route and followed anywhere. The
request's own events are read through the same follower as every other stream (a dropped
connection pauses the run) and translated one by one:

* ``RUN_STARTED`` first; then, as the run goes, ``text`` → ``TEXT_MESSAGE_START/CONTENT/END`` (a
  message ends at the first event that is not text), ``tool_call`` →
  ``TOOL_CALL_START/ARGS/END``, ``tool_result`` → ``TOOL_CALL_RESULT`` (the output when shown,
  else its status), ``phase_start``/``phase_end`` and the planner's ``step_start``/``step_complete``
  → ``STEP_STARTED``/``STEP_FINISHED``, every other event → ``CUSTOM`` (name: its type, value: its
  JSON). Each AG-UI event made from one of ours carries that event's JSON as ``rawEvent``.
* At the end, whatever is open is closed (a run may stop mid-phase), the thread's checkpointed state
  goes out as ``STATE_SNAPSHOT``, and the last event is ``RUN_FINISHED`` or ``RUN_ERROR``: ``final``
  finishes as success (``result``: the final event; its answer becomes a text message unless it was
  just streamed), ``cancelled`` with the cancelled outcome, ``error`` as ``RUN_ERROR`` (code: its kind).
* A run that stops to wait finishes with the interrupt outcome: ``paused`` names the interrupt
  ``pause:<requestId>``; a ``final`` that leaves a LangGraph ``interrupt`` pending on the thread (the
  planner's question before a destructive call) names it by its LangGraph id. The next run answers it
  with ``resume``: ``resolved`` continues the paused request (same request, same ``runId``) or starts
  the thread's next turn with the answer (``payload``, a string, or else the last user message);
  ``cancelled`` cancels a paused request (a question can only be answered). A plain new user message
  on the thread answers a question too, as on every other route.

What the protocols cannot take is refused with a 4xx before the stream starts: client-side ``tools``,
``context`` and a client ``state`` (runs start from the thread's checkpoint), user content other than
text, unknown fields. ``forwardedProps`` are the protocol's client settings (the generic route's
``settings``); the model is the server's default and tool outputs are not shown (no AG-UI field
chooses them). The user's message is the last user message of ``messages``; the messages before it
are the client's copy of a conversation the thread's checkpoint already holds.
"""

import contextlib
import json
import logging
import time
from collections.abc import AsyncGenerator, AsyncIterator
from dataclasses import dataclass
from typing import Annotated, Any, Literal, cast

from ag_ui.core import (
    PROTOCOL_VERSION,
    BaseEvent,
    CustomEvent,
    Interrupt,
    ResumeEntry,
    RunAgentInput,
    RunErrorEvent,
    RunFinishedCancelledOutcome,
    RunFinishedEvent,
    RunFinishedInterruptOutcome,
    RunFinishedOutcome,
    RunFinishedSuccessOutcome,
    RunStartedEvent,
    StateSnapshotEvent,
    StepFinishedEvent,
    StepStartedEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
    TextPart,
    ToolCallArgsEvent,
    ToolCallEndEvent,
    ToolCallResultEvent,
    ToolCallStartEvent,
    UserMessage,
)
from ag_ui.core import Context as AgUiContext
from ag_ui.core import Tool as AgUiTool
from ag_ui.encoder import EventEncoder
from fastapi import APIRouter, Depends, Query, Request
from fastapi import Path as PathParam
from fastapi.responses import StreamingResponse
from fastapi.sse import ServerSentEvent
from langchain_core.load import dumpd
from langgraph.types import Interrupt as GraphInterrupt
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, field_validator
from pydantic.alias_generators import to_camel

from phasegraph.graphs.registry import PROTOCOLS, client_settings_schema, get_protocol
from phasegraph.nodes.errors import ConflictError, InvalidInputError, NotFoundError
from phasegraph.nodes.events import (
    Cancelled,
    ErrorEvent,
    Event,
    Final,
    Paused,
    PhaseEnd,
    PhaseStart,
    StepComplete,
    StepStart,
    TextChunk,
    ToolCall,
    ToolResultEvent,
    parse_event,
)
from phasegraph.nodes.redact import redactor
from phasegraph.server.auth import Access
from phasegraph.server.checkpoints import thread_config
from phasegraph.server.responses import ID_PATTERN, STARTS, errors
from phasegraph.server.runs import STOPS, RunManager, manager_of
from phasegraph.server.sse import follow_sse
from phasegraph.server.store import RequestRecord, scoped_key

logger = logging.getLogger(__name__)

#: The interrupt of a paused request is named after it: ``pause:<requestId>``.
PAUSE_PREFIX = "pause:"
#: What a question's answer is: the user's words (the thread's next turn reads them).
ANSWER_SCHEMA = {"type": "string", "description": "The answer, in the user's own words."}
INTERNAL = "the server failed while streaming this run (see its log); GET /api/requests/{id} shows its state"
INCOMPLETE = "the run's stream ended without an outcome; GET /api/requests/{id} shows its state"
#: What every other stream sends too: no cache, and no proxy (nginx) holding events back.
NO_BUFFERING = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
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


def _addressable(value: str) -> str:
    if value in (".", ".."):
        raise ValueError("'.' and '..' cannot be used as ids: they cannot be addressed in a URL")
    return value


#: Run and thread ids become request and thread ids, which appear in URL paths.
AgUiId = Annotated[str, Field(pattern=ID_PATTERN), AfterValidator(_addressable)]


class TextUserMessage(UserMessage):
    """A user message the protocols can read: text, or text parts (joined by newlines)."""

    role: Literal["user"]  # required: it tells the messages apart
    content: str | list[TextPart]  # type: ignore[assignment]  # narrowed on purpose: no media parts


class EarlierMessage(BaseModel):
    """Any other message: the client's copy of the conversation, which the thread's checkpoint keeps."""

    model_config = ConfigDict(extra="allow", alias_generator=to_camel, populate_by_name=True)

    id: str
    role: Literal["developer", "system", "assistant", "tool", "activity", "reasoning"]


#: The conversation as the route reads it: user messages (the last one is answered), and the rest.
HistoryMessage = Annotated[TextUserMessage | EarlierMessage, Field(discriminator="role")]


def _settings_schema(schema: dict[str, Any]) -> None:
    """Document ``forwardedProps`` as the settings object every protocol's clients may set."""
    schema["anyOf"][0] = client_settings_schema()


class AgUiInput(RunAgentInput):
    """AG-UI's ``RunAgentInput``, narrowed to what a phasegraph protocol can take."""

    model_config = ConfigDict(extra="forbid")

    thread_id: AgUiId
    run_id: AgUiId = Field(description="The new run's request id (a resumed paused run keeps its own).")
    messages: list[HistoryMessage] = Field(  # type: ignore[assignment]  # user messages narrowed to text
        description="The conversation; its last user message is what the agent answers.",
        json_schema_extra={
            "contains": {"type": "object", "properties": {"role": {"const": "user"}}, "required": ["role"]}
        },
    )
    tools: list[AgUiTool] | None = Field(
        default=None, max_length=0, description="None: the protocols call only their own tools."
    )
    context: list[AgUiContext] | None = Field(
        default=None, max_length=0, description="None: the protocols take no ambient context."
    )
    state: Annotated[dict[str, Any], Field(max_length=0)] | None = Field(
        default=None, description="Empty: a run starts from its thread's checkpointed state."
    )
    forwarded_props: dict[str, Any] | None = Field(
        default=None,
        description="The protocol's client settings (the generic route's ``settings``).",
        json_schema_extra=_settings_schema,
    )
    resume: list[ResumeEntry] | None = Field(
        default=None, max_length=1, description="The answer to the interrupt the thread's last run left open."
    )

    @field_validator("messages")
    @classmethod
    def _has_user_message(cls, messages: list[Any]) -> list[Any]:
        if not any(message.role == "user" for message in messages):
            raise ValueError("messages has no user message: there is nothing for the agent to answer")
        return messages


@dataclass(frozen=True)
class _Run:
    """A started (or continued) request and the seq its stream follows from."""

    record: RequestRecord
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
        if body.resume:
            return await _answer(manager, protocol, body, project_id, body.resume[0])
        return _Run(await _start(manager, protocol, body, project_id, _user_message(body)), 0)

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
            headers=NO_BUFFERING,
        )

    return router


async def _start(
    manager: RunManager, protocol: str, body: AgUiInput, project_id: str, message: str
) -> RequestRecord:
    """A new request on the thread (a question pending there takes ``message`` as its answer)."""
    manager.check_message_size(message)
    return await manager.start(
        protocol, message, project_id=project_id, request_id=body.run_id, thread_id=body.thread_id,
        model=None, show_tool_outputs=False, settings=body.forwarded_props or {},
    )  # fmt: skip


def _user_message(body: AgUiInput) -> str:
    """The text of the last user message (the input's validator guarantees there is one)."""
    last = next(m for m in reversed(body.messages) if isinstance(m, TextUserMessage))
    if isinstance(last.content, str):
        return last.content
    return "\n".join(part.text for part in last.content)


async def _answer(
    manager: RunManager, protocol: str, body: AgUiInput, project_id: str, entry: ResumeEntry
) -> _Run:
    """Continue from the interrupt ``entry`` answers: a paused request, or a question on the thread."""
    if entry.interrupt_id.startswith(PAUSE_PREFIX):
        return await _continue_paused(manager, protocol, body, project_id, entry)
    closed = NotFoundError(f"thread {body.thread_id!r} has no open interrupt {entry.interrupt_id!r}")
    found = await manager.store.threads(body.thread_id, frozenset({project_id}))
    if not found:
        raise closed
    if found[0].protocol != protocol:
        raise ConflictError(f"thread {body.thread_id!r} belongs to protocol {found[0].protocol!r}")
    graph = manager.graph(get_protocol(protocol))
    pending = [i.id for i in (await graph.aget_state(thread_config(found[0].thread_key))).interrupts]
    if entry.interrupt_id not in pending:
        raise closed
    if unanswered := [i for i in pending if i != entry.interrupt_id]:
        raise InvalidInputError(f"a resume answers every open interrupt; unanswered: {', '.join(unanswered)}")
    if entry.status == "cancelled":
        raise InvalidInputError(
            f"interrupt {entry.interrupt_id!r} is a question the thread waits on: it can be answered, not "
            "cancelled (status 'resolved', the answer as payload or as the last user message)"
        )
    answer = _user_message(body) if entry.payload is None else entry.payload
    if not isinstance(answer, str):
        raise InvalidInputError(f"interrupt {entry.interrupt_id!r} takes words: its payload must be a string")
    return _Run(await _start(manager, protocol, body, project_id, answer), 0)


async def _continue_paused(
    manager: RunManager, protocol: str, body: AgUiInput, project_id: str, entry: ResumeEntry
) -> _Run:
    """Resume (``resolved``) or cancel (``cancelled``) the paused request the interrupt names."""
    request_id = entry.interrupt_id.removeprefix(PAUSE_PREFIX)
    record = await manager.store.get(scoped_key(project_id, request_id))
    if record is None or record.thread_id != body.thread_id or record.protocol != protocol:
        raise NotFoundError(f"thread {body.thread_id!r} has no open interrupt {entry.interrupt_id!r}")
    if record.status != "paused":
        raise ConflictError(f"request {request_id!r} is {record.status}, not paused: nothing to resume")
    if entry.payload is not None:
        raise InvalidInputError(f"a paused run takes no answer: resume {entry.interrupt_id!r} without one")
    chosen = get_protocol(protocol).client_settings(body.forwarded_props or {})
    if any(record.settings.get(key) != value for key, value in chosen.items()):
        raise InvalidInputError(f"request {request_id!r} keeps its own settings: forwardedProps differ")
    if entry.status == "cancelled":
        await manager.cancel(record)
    else:
        await manager.resume(record, None)
    return _Run(record, record.last_seq)


async def _stream(manager: RunManager, run: _Run, parent_run_id: str | None) -> AsyncIterator[BaseEvent]:
    """The run as AG-UI events: RUN_STARTED, its events translated, then how it ended."""
    record, translation = run.record, _Translation(run.record)
    yield RunStartedEvent(
        thread_id=record.thread_id, run_id=record.request_id, parent_run_id=parent_run_id,
        protocol_version=PROTOCOL_VERSION, timestamp=_now(),
    )  # fmt: skip
    try:
        # The shared follower: a dropped connection pauses the run like on every other stream.
        follower = cast(AsyncGenerator[ServerSentEvent, None], follow_sse(manager, record, run.after, "stop"))
        async with contextlib.aclosing(follower) as followed:
            async for item in followed:
                event = parse_event(item.raw_data or "")
                if isinstance(event, STOPS):
                    for ending in await translation.ending(event, manager):
                        yield ending
                    return
                for translated in translation.of(event):
                    yield translated
        message, code = INCOMPLETE, "incomplete"
    except Exception:  # the machinery failed, not the run: the stream still ends as AG-UI requires
        logger.exception("request %s: its AG-UI stream failed", record.request_id)
        message, code = INTERNAL, "internal"
    ts = _now()
    for closed in translation.closing(ts):
        yield closed
    yield RunErrorEvent(message=message.format(id=record.request_id), code=code, timestamp=ts)


class _Translation:
    """The AG-UI events of one stream, kept balanced: what it opened is closed before the run ends."""

    def __init__(self, record: RequestRecord) -> None:
        self.record = record
        self.message: str | None = None  # the assistant text message being streamed
        self.said = ""  # the text of the latest assistant message since the last tool event
        self.steps: list[str] = []  # started and not finished, oldest first

    def of(self, event: Event) -> list[BaseEvent]:
        """The AG-UI events for one event of the run (any but the one that ends it)."""
        raw, ts = event.to_dict(), _millis(event)
        if isinstance(event, TextChunk):
            return self._say(event.text, event.seq, ts, raw)
        parent, out = self.message, self._end_message(ts)
        match event:
            case ToolCall():
                self.said = ""
                call = event.call_id
                return [
                    *out,
                    ToolCallStartEvent(tool_call_id=call, tool_call_name=event.name, parent_message_id=parent,
                                       timestamp=ts, raw_event=raw),
                    ToolCallArgsEvent(tool_call_id=call, delta=json.dumps(event.args), timestamp=ts),
                    ToolCallEndEvent(tool_call_id=call, timestamp=ts),
                ]  # fmt: skip
            case ToolResultEvent():
                self.said = ""
                content = event.output if event.output is not None else _status(event)
                result = ToolCallResultEvent(
                    message_id=self._id(event.seq), tool_call_id=event.call_id, content=content, role="tool",
                    timestamp=ts, raw_event=raw,
                )  # fmt: skip
                return [*out, result]
            case PhaseStart() | StepStart():
                return [*out, *self._step(_step_name(event), started=True, ts=ts, raw=raw)]
            case PhaseEnd() | StepComplete():
                return [*out, *self._step(_step_name(event), started=False, ts=ts, raw=raw)]
        return [*out, CustomEvent(name=event.type, value=raw, timestamp=ts)]

    async def ending(self, event: Event, manager: RunManager) -> list[BaseEvent]:
        """The last events: the unstreamed answer, what is open closed, the state, and the outcome."""
        # Read first: if reading fails, nothing is closed yet and the failure's RUN_ERROR closes it all.
        graph = manager.graph(get_protocol(self.record.protocol))
        state = await graph.aget_state(thread_config(self.record.thread_key))
        values = redactor().data(dumpd(state.values or {}))
        raw, ts = event.to_dict(), _millis(event)
        out: list[BaseEvent] = []
        if isinstance(event, Final) and event.answer.strip() and event.answer.strip() != self.said.strip():
            out += self._say(event.answer, event.seq, ts, None)
        out += self.closing(ts)
        out.append(StateSnapshotEvent(snapshot=values, timestamp=ts))
        if isinstance(event, ErrorEvent):
            return [*out, RunErrorEvent(message=event.message, code=event.kind, timestamp=ts, raw_event=raw)]
        final = isinstance(event, Final)
        outcome = self._outcome(event, state.interrupts)
        finished = RunFinishedEvent(
            thread_id=self.record.thread_id, run_id=self.record.request_id, outcome=outcome,
            result=raw if final else None, raw_event=None if final else raw, timestamp=ts,
        )  # fmt: skip
        return [*out, finished]

    def _outcome(self, event: Event, pending: tuple[GraphInterrupt, ...]) -> RunFinishedOutcome:
        """Cancelled; an interrupt (a pause, or questions left on the thread); or success."""
        if isinstance(event, Cancelled):
            return RunFinishedCancelledOutcome()
        waits = [self._pause(event)] if isinstance(event, Paused) else [_question(i) for i in pending]
        return RunFinishedInterruptOutcome(interrupts=waits) if waits else RunFinishedSuccessOutcome()

    def closing(self, ts: int) -> list[BaseEvent]:
        """End the open text message and finish every open step, innermost first."""
        out = self._end_message(ts)
        while self.steps:
            out.append(StepFinishedEvent(step_name=self.steps.pop(), timestamp=ts))
        return out

    def _say(self, text: str, seq: int, ts: int, raw: dict[str, Any] | None) -> list[BaseEvent]:
        out: list[BaseEvent] = []
        if self.message is None:
            self.message, self.said = self._id(seq), ""
            out.append(TextMessageStartEvent(message_id=self.message, role="assistant", timestamp=ts))
        self.said += text
        out.append(TextMessageContentEvent(message_id=self.message, delta=text, timestamp=ts, raw_event=raw))
        return out

    def _end_message(self, ts: int) -> list[BaseEvent]:
        if self.message is None:
            return []
        ended, self.message = self.message, None
        return [TextMessageEndEvent(message_id=ended, timestamp=ts)]

    def _step(self, name: str, *, started: bool, ts: int, raw: dict[str, Any]) -> list[BaseEvent]:
        """A step's start or finish; a finish of no started step (a run resumed mid-phase) is CUSTOM."""
        if started and name not in self.steps:
            self.steps.append(name)
            return [StepStartedEvent(step_name=name, timestamp=ts, raw_event=raw)]
        if not started and name in self.steps:
            self.steps.remove(name)
            return [StepFinishedEvent(step_name=name, timestamp=ts, raw_event=raw)]
        return [CustomEvent(name=raw["type"], value=raw, timestamp=ts)]

    def _pause(self, event: Paused) -> Interrupt:
        where = f" after {event.phase} {event.phase_index}" if event.phase else ""
        return Interrupt(
            id=f"{PAUSE_PREFIX}{self.record.request_id}",
            reason="paused",
            message=f"the run paused ({event.reason}){where}; resume it to continue",
            metadata={"requestId": self.record.request_id, "pauseReason": event.reason},
        )

    def _id(self, seq: int) -> str:
        """A message id: the request's, and the seq of the event that opened it."""
        return f"{self.record.request_id}-{seq}"


def _question(pending: GraphInterrupt) -> Interrupt:
    """A LangGraph interrupt left on the thread, as AG-UI's interrupt (answered in words)."""
    value = redactor().data(dumpd(pending.value))
    question = value.get("question") if isinstance(value, dict) else value
    return Interrupt(
        id=pending.id,
        reason="input_required",
        message=question if isinstance(question, str) else None,
        response_schema=ANSWER_SCHEMA,
        metadata={"value": value},
    )


def _step_name(event: PhaseStart | PhaseEnd | StepStart | StepComplete) -> str:
    """A phase's name and index (``action_phase 1``), or a plan step's plan and id (``plan-x-1 s2``)."""
    if isinstance(event, StepStart | StepComplete):
        return f"{event.plan_id or 'plan'} {event.step_id}"
    return f"{event.phase} {event.phase_index}" if event.phase_index is not None else str(event.phase)


def _status(event: ToolResultEvent) -> str:
    """What a result says when its output is not shown: its status (and error)."""
    status = {"status": event.status, "error": event.error} if event.error else {"status": event.status}
    return json.dumps(status)


def _millis(event: Event) -> int:
    return int(event.ts.timestamp() * 1000)


def _now() -> int:
    return int(time.time() * 1000)
