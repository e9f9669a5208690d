"""An AG-UI client as ``@ag-ui/client`` 1.0.0's ``HttpAgent`` is: what it keeps, what it sends.

It applies a run's events the way the JS client's default apply does (``apply/default.ts``): text
messages and tool calls build assistant messages, ``TOOL_CALL_RESULT`` adds a tool message after its
call, ``STATE_SNAPSHOT`` replaces the state, ``STATE_DELTA`` patches it (RFC 6902, ``jsonpatch`` here
where the JS client uses fast-json-patch), ``MESSAGES_SNAPSHOT`` keeps the messages the snapshot
names (replaced by its copy), drops the others and appends the snapshot's new ones, and
``RUN_FINISHED`` with the interrupt outcome leaves the interrupts pending. Its next input carries
everything, as ``prepareRunAgentInput`` builds it: ``tools: []``, ``context: []``,
``forwardedProps``, the whole ``state`` and every message.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import jsonpatch
from ag_ui.core import (
    BaseEvent,
    Event,
    MessagesSnapshotEvent,
    RunFinishedEvent,
    StateDeltaEvent,
    StateSnapshotEvent,
    TextMessageContentEvent,
    TextMessageStartEvent,
    ToolCallArgsEvent,
    ToolCallResultEvent,
    ToolCallStartEvent,
)
from pydantic import TypeAdapter

EVENTS: TypeAdapter[BaseEvent] = TypeAdapter(Event)


@dataclass
class Agent:
    """One ``HttpAgent``: a thread, and the messages and state it holds."""

    url: str
    thread_id: str
    forwarded_props: dict[str, Any] = field(default_factory=dict)
    messages: list[dict[str, Any]] = field(default_factory=list)
    state: dict[str, Any] = field(default_factory=dict)
    pending_interrupts: list[dict[str, Any]] = field(default_factory=list)
    #: The state as each STATE_SNAPSHOT and STATE_DELTA of the last run left it, in order.
    states: list[dict[str, Any]] = field(default_factory=list)

    def say(self, message_id: str, text: str) -> None:
        """``agent.addMessage``: the user's next message."""
        self.messages.append({"id": message_id, "role": "user", "content": text})

    def input(self, run_id: str, resume: list[dict[str, Any]] | None = None) -> dict[str, Any]:
        """``prepareRunAgentInput``: what ``runAgent`` posts."""
        body = {
            "threadId": self.thread_id, "runId": run_id, "tools": [], "context": [],
            "forwardedProps": copy.deepcopy(self.forwarded_props), "state": copy.deepcopy(self.state),
            "messages": [copy.deepcopy(m) for m in self.messages if m["role"] != "activity"],
        }  # fmt: skip
        return body if resume is None else {**body, "resume": resume}

    def run(self, client: httpx.Client, path: str, body: dict[str, Any]) -> list[BaseEvent]:
        """Post ``body`` and apply every event of the stream; the events, parsed."""
        with client.stream("POST", path, json=body) as response:
            events = list(self.apply_all(response))
        return events

    def apply_all(self, response: httpx.Response) -> Iterator[BaseEvent]:
        """Apply the stream's events as they come."""
        assert response.status_code == 200, response.read()
        self.states = []
        for line in response.iter_lines():
            if line:
                event = EVENTS.validate_json(line.removeprefix("data: "))
                self.apply(event, json.loads(line.removeprefix("data: ")))
                yield event

    def apply(self, event: BaseEvent, wire: dict[str, Any]) -> None:
        """One event, as the JS client's default apply handles it (``wire``: the event as sent)."""
        match event:
            case TextMessageStartEvent():
                self.messages.append({"id": event.message_id, "role": event.role, "content": ""})
            case TextMessageContentEvent():
                self._message(event.message_id)["content"] += event.delta
            case ToolCallStartEvent():
                self._call_owner(event).setdefault("toolCalls", []).append(
                    {"id": event.tool_call_id, "type": "function",
                     "function": {"name": event.tool_call_name, "arguments": ""}}
                )  # fmt: skip
            case ToolCallArgsEvent():
                self._call(event.tool_call_id)["function"]["arguments"] += event.delta
            case ToolCallResultEvent():
                self._result(event)
            case StateSnapshotEvent():
                self.state = wire["snapshot"]
                self.states.append(copy.deepcopy(self.state))
            case StateDeltaEvent():
                # fast-json-patch's applyPatch(state, delta, validate=true): a bad patch raises here too
                self.state = jsonpatch.apply_patch(self.state, wire["delta"])
                self.states.append(copy.deepcopy(self.state))
            case MessagesSnapshotEvent():
                self._snapshot(wire["messages"])
            case RunFinishedEvent():
                outcome = wire.get("outcome") or {}
                self.pending_interrupts = (
                    outcome.get("interrupts", []) if outcome.get("type") == "interrupt" else []
                )

    def _message(self, message_id: str) -> dict[str, Any]:
        return next(m for m in self.messages if m["id"] == message_id)

    def _call_owner(self, event: ToolCallStartEvent) -> dict[str, Any]:
        """The assistant message a call belongs to: its parent, else a new one named after the call."""
        parent = next((m for m in self.messages if m["id"] == event.parent_message_id), None)
        if parent is not None and parent["role"] == "assistant":
            return parent
        owner = {"id": event.parent_message_id or event.tool_call_id, "role": "assistant"}
        if parent is not None:
            owner["id"] = event.tool_call_id
        self.messages.append(owner)
        return owner

    def _call(self, call_id: str) -> dict[str, Any]:
        return next(c for m in self.messages for c in m.get("toolCalls", []) if c["id"] == call_id)

    def _result(self, event: ToolCallResultEvent) -> None:
        """A tool message, right after the assistant message that made the call (and its other results)."""
        call = event.tool_call_id
        message = {"id": event.message_id, "toolCallId": call, "role": "tool", "content": event.content}
        owners = [n for n, m in enumerate(self.messages) if call in {c["id"] for c in m.get("toolCalls", [])}]
        if not owners:
            self.messages.append(message)
            return
        at = owners[0] + 1
        while at < len(self.messages) and self.messages[at]["role"] == "tool":
            at += 1
        self.messages.insert(at, message)

    def _snapshot(self, snapshot: list[dict[str, Any]]) -> None:
        """Keep what the snapshot names (its copy), drop the rest, append what is new."""
        by_id = {m["id"]: m for m in snapshot}
        kept = [by_id[m["id"]] for m in self.messages if m["id"] in by_id]
        held = {m["id"] for m in kept}
        self.messages = kept + [m for m in snapshot if m["id"] not in held]
