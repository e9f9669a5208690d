"""Our events as AG-UI 1.0 events, one by one, kept balanced: what a stream opened is closed at its end."""

import json
import time
from typing import Any

from ag_ui.core import (
    BaseEvent,
    CustomEvent,
    Interrupt,
    MessagesSnapshotEvent,
    RunErrorEvent,
    RunFinishedCancelledOutcome,
    RunFinishedEvent,
    RunFinishedInterruptOutcome,
    RunFinishedOutcome,
    RunFinishedSuccessOutcome,
    StepFinishedEvent,
    StepStartedEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
    ToolCallArgsEvent,
    ToolCallEndEvent,
    ToolCallResultEvent,
    ToolCallStartEvent,
)
from langgraph.types import Interrupt as GraphInterrupt

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
)
from phasegraph.nodes.redact import redactor
from phasegraph.server.http.ag_ui.approvals import approval_interrupt, is_approval
from phasegraph.server.http.ag_ui.state import StateStream, plain
from phasegraph.server.storage.records import RequestRecord

#: The interrupt of a paused request is named after it: ``pause:<requestId>``.
PAUSE_PREFIX = "pause:"
#: What a question's answer is: the user's words (the thread's next turn reads them).
ANSWER_SCHEMA = {"type": "string", "description": "The answer, in the user's own words."}


class Translation:
    """The AG-UI events of one stream, kept balanced: what it opened is closed before the run ends."""

    def __init__(self, record: RequestRecord) -> None:
        self.record = record
        self.message: str | None = None  # the assistant text message being streamed
        self.said = ""  # the text of the latest assistant message since the last tool event
        self.steps: list[str] = []  # started and not finished, oldest first

    def of(self, event: Event) -> list[BaseEvent]:
        """The AG-UI events for one event of the run (any but the one that ends it)."""
        raw, ts = event.to_dict(), millis(event)
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

    async def ending(self, event: Event, states: StateStream) -> list[BaseEvent]:
        """The last events: the unstreamed answer, what is open closed, state and messages, the outcome."""
        # Read first: if reading fails, nothing is closed yet and the failure's RUN_ERROR closes it all.
        state, values = await states.read()
        raw, ts = event.to_dict(), millis(event)
        out: list[BaseEvent] = []
        if isinstance(event, Final) and event.answer.strip() and event.answer.strip() != self.said.strip():
            out += self._say(event.answer, event.seq, ts, None)
        out += self.closing(ts)
        out += states.delta(values, ts)
        if isinstance(values.get("messages"), list):
            out.append(MessagesSnapshotEvent(messages=values["messages"], timestamp=ts))
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
        """Cancelled; an interrupt (a pause, or what the thread waits on); or success.

        A run paused at an ``interrupt`` (an approval, a question) ends with what the thread waits on,
        named by the LangGraph interrupts' ids; any other pause with its own ``pause:<requestId>``.
        """
        if isinstance(event, Cancelled):
            return RunFinishedCancelledOutcome()
        if isinstance(event, Paused) and not (event.reason == "interrupt" and pending):
            waits = [self._pause(event)]
        else:
            waits = [self._waiting(each) for each in pending]
        return RunFinishedInterruptOutcome(interrupts=waits) if waits else RunFinishedSuccessOutcome()

    def _waiting(self, pending: GraphInterrupt) -> Interrupt:
        """A LangGraph interrupt left on the thread: an approval, or a question answered in words."""
        return (
            approval_interrupt(pending, self.record.request_id)
            if is_approval(pending)
            else _question(pending)
        )

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
    value = redactor().data(plain(pending.value))
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


def millis(event: Event) -> int:
    """An event's time in milliseconds since the epoch (AG-UI's timestamps)."""
    return int(event.ts.timestamp() * 1000)


def now() -> int:
    """Now, in milliseconds since the epoch."""
    return int(time.time() * 1000)
