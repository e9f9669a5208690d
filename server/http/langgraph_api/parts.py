"""A phasegraph request's events as LangGraph API stream parts (``event: <mode>``).

The parts are a pure function of the request's stored events and its own checkpoints, so the
live stream and a join that replays it (``Last-Event-ID``) send the same parts under the same ids:

- ``metadata`` first (``{run_id, attempt}``), ``end`` last;
- ``custom``: every phasegraph event, as its nodes wrote it (``{"phasegraph_event": ...}``);
- ``values`` / ``updates``: read from the checkpoints the run saved (their metadata names the
  request), each superstep's just before the first event of the next superstep and the rest at
  the end, so a client sees the state after every step as the reference server sends it;
- ``messages-tuple``, ``messages`` and ``events``: the model's text as it streams, the tools that
  ran and the messages each node wrote (see ``chat``);
- ``error`` when the run failed; when it stopped at an interrupt, ``updates``
  ``{"__interrupt__": [...]}`` and, for a question an ``interrupt()`` asks, ``values``: the state
  with ``__interrupt__`` beside it, as LangGraph's own stream writes it (``useStream`` reads it there).

A part's id is ``<seq>-<n>``: the n-th part sent at event ``seq`` of the request.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

from fastapi.sse import ServerSentEvent

from phasegraph.nodes.emit import EVENT_KEY
from phasegraph.nodes.events import ErrorEvent, Event, Final, Paused, Resumed
from phasegraph.server.http.langgraph_api.chat import CHAT_MODES, ChatParts, Part
from phasegraph.server.http.langgraph_api.steps import RunCheckpoints, Saved
from phasegraph.server.http.langgraph_api.views import jsonable, output
from phasegraph.server.runs.engine import ServerStopping
from phasegraph.server.runs.manager import STOPS, RunManager
from phasegraph.server.storage.checkpoints import thread_config
from phasegraph.server.storage.records import RequestRecord

STATE_MODES = frozenset({"values", "updates"})
#: Modes whose parts read the run's checkpoints as it goes.
CHECKPOINT_MODES = STATE_MODES | CHAT_MODES


def part_id(seq: int, n: int) -> str:
    """The SSE id of the n-th part sent at event ``seq``."""
    return f"{seq}-{n}"


def parse_part_id(value: str | None) -> tuple[int, int] | None:
    """``Last-Event-ID`` as (seq, n); ``None`` when absent or not one of ours (then replay all)."""
    seq, _, n = (value or "").partition("-")
    return (int(seq), int(n)) if seq.isdigit() and n.isdigit() else None


class RunParts:
    """The stream parts of one request, for the modes its client asked for."""

    def __init__(self, manager: RunManager, record: RequestRecord, modes: list[str]) -> None:
        self.manager, self.record, self.modes = manager, record, set(modes)
        self.graph = manager.protocol(record.protocol).graph
        per_step = manager.engine.settings.durability != "exit"
        self.checkpoints = RunCheckpoints(self.graph, record, saved_per_step=per_step)
        self.chat = ChatParts(record, self.modes)
        self.subgraphs = {name for name, _ in self.graph.get_subgraphs()}  # nodes that hold one

    async def stream(self, after: tuple[int, int] | None = None) -> AsyncIterator[ServerSentEvent]:
        """Every part after ``after`` (all when ``None``), ending with ``end`` once the run stopped."""
        async for seq, n, name, data in self._parts():
            if after is None or (seq, n) > after:
                yield ServerSentEvent(event=name, id=part_id(seq, n), raw_data=json.dumps(data))

    async def _parts(self) -> AsyncIterator[tuple[int, int, str, Any]]:
        first = [("metadata", {"run_id": self.record.request_id, "attempt": 1}), *self.chat.begin()]
        for n, (name, data) in enumerate(first):
            yield 0, n, name, data
        last, flushed = 0, self.checkpoints.base_step  # steps below ``flushed`` have been looked at
        try:
            async for event in self.manager.follow(self.record, 0):
                parts: list[Part] = []
                last, step = event.seq, await self._step(event, flushed)
                if step is not None and step > flushed and self.modes & CHECKPOINT_MODES:  # a new superstep
                    flushed = step
                    parts += self._of_saved(await self.checkpoints.saved(before=step))
                parts += self._of_event(event, step)
                if isinstance(event, STOPS):
                    parts += await self._ending(event)
                for n, (name, data) in enumerate(parts):
                    yield event.seq, n, name, data
        except ServerStopping:  # the run goes on elsewhere, not ended: no ``end``; its client joins again
            return
        yield last + 1, 0, "end", None

    async def _step(self, event: Event, flushed: int) -> int | None:
        """The event's superstep; a subgraph's event (it has none) is placed in its node's."""
        if event.graph_step is not None or not self.subgraphs or not self.modes & CHAT_MODES:
            return event.graph_step
        if isinstance(event, (*STOPS, Resumed)):  # the server's own: from no node
            return None
        return await self.checkpoints.subgraph_step(flushed, self.subgraphs)

    def _of_event(self, event: Event, step: int | None) -> list[Part]:
        parts: list[Part] = []
        if "custom" in self.modes:
            parts.append(("custom", {EVENT_KEY: json.loads(event.to_json())}))
        if self.modes & CHAT_MODES:
            parts += self.chat.on_event(event, self.checkpoints.nodes(step))
        if isinstance(event, ErrorEvent):
            parts.append(("error", {"error": event.kind, "message": event.message}))
        return parts

    def _of_saved(self, saved: list[Saved]) -> list[Part]:
        """``updates``, ``values`` and the chat parts of checkpoints not looked at before."""
        parts: list[Part] = []
        for one in saved:
            if "updates" in self.modes:
                updates = {node.name: output(self.graph, update) for node, update in one.writes}
                if updates:
                    parts.append(("updates", updates))
            parts += self.chat.on_saved(one)
            if "values" in self.modes:
                parts.append(("values", output(self.graph, one.snapshot.values)))
        return parts

    async def _ending(self, event: Event) -> list[Part]:
        """At the stop: the steps not sent yet, the interrupt the run stopped at, the graph's end."""
        parts: list[Part] = []
        if self.modes & CHECKPOINT_MODES:
            parts += self._of_saved(await self.checkpoints.saved(before=None))
        if not isinstance(event, Paused | Final) or not self.modes & {"updates", "values", "events"}:
            return parts + self.chat.end(None)
        snapshot = await self.graph.aget_state(thread_config(self.record.thread_key))
        values = output(self.graph, snapshot.values)
        if "updates" in self.modes and (snapshot.interrupts or (isinstance(event, Paused) and snapshot.next)):
            parts.append(("updates", {"__interrupt__": jsonable(snapshot.interrupts)}))
        if "values" in self.modes and snapshot.interrupts:  # an interrupt() asks: not a stop before a node
            parts.append(("values", {**values, "__interrupt__": jsonable(snapshot.interrupts)}))
        return parts + self.chat.end(values)
