"""A phasegraph request's events as LangGraph API stream parts (``event: <mode>``).

The parts are a pure function of the request's stored events and its own checkpoints, so the
live stream and a join that replays it (``Last-Event-ID``) send the same parts under the same ids:

- ``metadata`` first (``{run_id, attempt}``), ``end`` last;
- ``custom``: every phasegraph event, as its nodes wrote it (``{"phasegraph_event": ...}``);
- ``messages`` (``messages-tuple``): the assistant's text chunks as ``[AIMessageChunk, metadata]``;
- ``values`` / ``updates``: read from the checkpoints the run saved (their metadata names the
  request), each superstep's just before the first event of the next superstep and the rest at
  the end, so a client sees the state after every step as the reference server sends it;
- ``error`` when the run failed, and ``updates`` ``{"__interrupt__": [...]}`` when it stopped at
  an interrupt.

A part's id is ``<seq>-<n>``: the n-th part sent at event ``seq`` of the request.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

from fastapi.sse import ServerSentEvent
from langgraph.types import StateSnapshot

from phasegraph.nodes.emit import EVENT_KEY
from phasegraph.nodes.events import ErrorEvent, Event, Final, Paused, TextChunk
from phasegraph.server.http.langgraph_api.views import jsonable, output
from phasegraph.server.runs.manager import STOPS, RunManager
from phasegraph.server.storage.checkpoints import thread_config
from phasegraph.server.storage.records import RequestRecord

#: How long a live stream waits for a step's checkpoint (durability ``async`` writes it meanwhile).
CHECKPOINT_WAIT_SECONDS = 2.0
CHECKPOINT_POLL_SECONDS = 0.02
STATE_MODES = frozenset({"values", "updates"})


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
        self.base_step: int = record.options.get("base_step", -2)
        self._sent: set[str] = set()

    async def stream(self, after: tuple[int, int] | None = None) -> AsyncIterator[ServerSentEvent]:
        """Every part after ``after`` (all when ``None``), ending with ``end`` once the run stopped."""
        async for seq, n, name, data in self._parts():
            if after is None or (seq, n) > after:
                yield ServerSentEvent(event=name, id=part_id(seq, n), raw_data=json.dumps(data))

    async def _parts(self) -> AsyncIterator[tuple[int, int, str, Any]]:
        yield 0, 0, "metadata", {"run_id": self.record.request_id, "attempt": 1}
        last, flushed = 0, self.base_step  # steps below ``flushed`` have been looked at
        async for event in self.manager.follow(self.record, 0):
            n, last = 0, event.seq
            step = event.graph_step
            if step is not None and step > flushed and self.modes & STATE_MODES:  # a new superstep began
                flushed = step
                for name, data in await self._steps(before=step):
                    yield event.seq, n, name, data
                    n += 1
            for name, data in self._of_event(event):
                yield event.seq, n, name, data
                n += 1
            if isinstance(event, STOPS):
                for name, data in await self._ending(event):
                    yield event.seq, n, name, data
                    n += 1
        yield last + 1, 0, "end", None

    def _of_event(self, event: Event) -> list[tuple[str, Any]]:
        parts: list[tuple[str, Any]] = []
        if "custom" in self.modes:
            parts.append(("custom", {EVENT_KEY: json.loads(event.to_json())}))
        if "messages-tuple" in self.modes and isinstance(event, TextChunk):
            parts.append(("messages", self._message(event)))
        if isinstance(event, ErrorEvent):
            parts.append(("error", {"error": event.kind, "message": event.message}))
        return parts

    def _message(self, event: TextChunk) -> list[dict[str, Any]]:
        chunk: dict[str, Any] = {
            "content": event.text, "type": "AIMessageChunk",
            "id": f"run--{event.request_id}-{event.graph_step}",
            "additional_kwargs": {}, "response_metadata": {}, "name": None, "tool_calls": [],
            "invalid_tool_calls": [], "tool_call_chunks": [], "usage_metadata": None,
        }  # fmt: skip
        meta = {
            "run_id": self.record.request_id, "thread_id": self.record.thread_id,
            "graph_id": self.record.protocol, "assistant_id": self.record.protocol,
            "langgraph_step": event.graph_step, "phase": event.phase,
        }  # fmt: skip
        return [chunk, meta]

    async def _ending(self, event: Event) -> list[tuple[str, Any]]:
        """At the stop: the steps not sent yet, then the interrupt the run stopped at."""
        parts = await self._steps(before=None) if self.modes & STATE_MODES else []
        if isinstance(event, Paused | Final) and "updates" in self.modes:
            snapshot = await self.graph.aget_state(thread_config(self.record.thread_key))
            if snapshot.interrupts or (isinstance(event, Paused) and snapshot.next):
                parts.append(("updates", {"__interrupt__": jsonable(snapshot.interrupts)}))
        return parts

    async def _steps(self, before: int | None) -> list[tuple[str, Any]]:
        """``values``/``updates`` of the run's checkpoints with a step below ``before`` not sent yet.

        Live, the checkpoint of the step just before ``before`` may still be being written: it is
        waited for (briefly), so a replay places it where the live stream did.
        """
        snapshots = await self._snapshots()
        wanted = None if before is None else before - 1
        waited = 0.0
        while wanted is not None and wanted > self.base_step and waited < CHECKPOINT_WAIT_SECONDS:
            if any(_step(s) >= wanted for s in snapshots):
                break
            await asyncio.sleep(CHECKPOINT_POLL_SECONDS)
            waited += CHECKPOINT_POLL_SECONDS
            snapshots = await self._snapshots()
        parts: list[tuple[str, Any]] = []
        for index, snapshot in enumerate(snapshots):
            checkpoint_id = snapshot.config["configurable"]["checkpoint_id"]
            source = (snapshot.metadata or {}).get("source")
            if (
                checkpoint_id in self._sent
                or source != "loop"
                or (before is not None and _step(snapshot) >= before)
            ):
                continue
            self._sent.add(checkpoint_id)
            if "updates" in self.modes:
                previous = snapshots[index - 1] if index else await self._parent(snapshot)
                updates = {t.name: output(self.graph, t.result) for t in (previous.tasks if previous else ())
                           if t.name != "__start__" and t.result is not None}  # fmt: skip
                if updates:
                    parts.append(("updates", updates))
            if "values" in self.modes:
                parts.append(("values", output(self.graph, snapshot.values)))
        return parts

    async def _snapshots(self) -> list[StateSnapshot]:
        """The run's own checkpoints (top level), oldest first."""
        config = thread_config(self.record.thread_key)
        found = [
            s async for s in self.graph.aget_state_history(config, filter={"run_id": self.record.request_id})
        ]
        return [s for s in reversed(found) if not (s.config["configurable"].get("checkpoint_ns") or "")]

    async def _parent(self, snapshot: StateSnapshot) -> StateSnapshot | None:
        if snapshot.parent_config is None:
            return None
        return await self.graph.aget_state(snapshot.parent_config)


def _step(snapshot: StateSnapshot) -> int:
    return int((snapshot.metadata or {}).get("step", -1))
