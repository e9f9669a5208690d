"""Run manager: starts, drives, pauses, resumes and cancels runs; every event lands in the store first.

Clients follow a request by reading its event log (replay) and waiting for more (live), so any
replica on the same database can serve any request's stream.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator
from typing import Any, Literal
from uuid import uuid4

from langchain_core.messages import HumanMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph.state import CompiledStateGraph

from graphs.registry import ProtocolSpec, get_protocol
from graphs.run import stream_graph
from nodes.context import RunContext
from nodes.errors import ConfigurationError, ConflictError, NotFoundError
from nodes.events import Cancelled, ErrorEvent, Event, EventBase, Final, Paused, Resumed
from nodes.models import public_spec
from nodes.settings import ServerSettings
from nodes.trace import TraceEntry
from server.checkpoints import end_of_phase, require_next, snapshot_at, thread_config
from server.recovery import is_orphaned, new_owner_id, replaced_from
from server.store import RequestRecord, RequestStore, scoped_key

logger = logging.getLogger(__name__)

DRIVER_FAILED = "the server failed while driving this run (see its log); send the message again"
CANNOT_CONTINUE = (
    "the server driving this run stopped before the run saved a point to continue from; "
    "send the message again"
)

#: How often followers and the watcher look at the database for other replicas' changes.
POLL_SECONDS = 0.2
#: Why a local run stops when another replica has taken it over (it adds nothing more).
SUPERSEDED = "superseded"


class _Buffer:
    """Trace entries of the current run, drained into the store with each event."""

    def __init__(self) -> None:
        self.entries: list[TraceEntry] = []

    def append(self, entry: TraceEntry) -> None:
        self.entries.append(entry)

    def get(self, request_id: str) -> list[TraceEntry]:
        return [e for e in self.entries if e.request_id == request_id]

    def drain(self) -> list[TraceEntry]:
        drained, self.entries = self.entries, []
        return drained


class RunManager:
    """Owns this process's runs; coordinates with other replicas through the store."""

    def __init__(
        self, settings: ServerSettings, store: RequestStore, checkpointer: BaseCheckpointSaver[str]
    ) -> None:
        self.settings, self.store, self.checkpointer = settings, store, checkpointer
        self.owner = new_owner_id()
        self._graphs: dict[str, CompiledStateGraph[Any, Any, Any, Any]] = {}
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self._wakeups: dict[str, asyncio.Event] = {}
        self._pause_reasons: dict[str, str] = {}

    def graph(self, spec: ProtocolSpec) -> CompiledStateGraph[Any, Any, Any, Any]:
        """The protocol's graph with the shared checkpointer, stopping at its pause points."""
        if spec.id not in self._graphs:
            self._graphs[spec.id] = spec.compile(self.checkpointer, pausable=True)
        return self._graphs[spec.id]

    def context_for(self, record: RequestRecord) -> RunContext:
        """Rebuild a request's Context from its record (works on any replica)."""
        spec = get_protocol(record.protocol)
        return spec.make_context(
            **record.settings, request_id=record.request_id, workspace=self.settings.workspace
        )

    async def start(
        self, protocol: str, message: str, *, project_id: str, request_id: str | None, thread_id: str | None,
        model: str | None, show_tool_outputs: bool,
    ) -> RequestRecord:  # fmt: skip
        """Create a request and start its run in the background."""
        spec = get_protocol(protocol)
        if not message.strip():
            raise ConfigurationError("the message is empty: say what the agent should do")
        chosen = self._allowed_model(model)
        request_id = request_id or uuid4().hex
        if await self.store.get(scoped_key(project_id, request_id)) is not None:
            raise ConflictError(f"request {request_id!r} already exists; resume it or use a new requestId")
        thread_id = thread_id or request_id
        thread_key = await self._thread_key(thread_id, spec.id, project_id)
        settings = {"model": chosen, "project_id": project_id, "show_tool_outputs": show_tool_outputs}
        record = self._new_record(request_id, project_id, spec.id, thread_id, thread_key, settings)
        self.context_for(record)  # a bad model spec fails here, before anything is stored
        await self.store.create(record)
        graph_input = {"messages": [HumanMessage(message)]}
        self._launch(record, graph_input, thread_config(record.thread_key))
        return record

    def _allowed_model(self, model: str | None) -> str:
        """The spec a request may run: the default, an allowed spec, or one named as clients see it."""
        if model is None:
            return self.settings.model
        allowed = self.settings.models()
        if model in allowed:
            return model
        by_public_name = {public_spec(spec): spec for spec in allowed}
        if model in by_public_name:
            return by_public_name[model]
        raise ConfigurationError(f"model {model!r} is not allowed here; allowed: {sorted(by_public_name)}")

    def _new_record(
        self, request_id: str, project_id: str, protocol: str, thread_id: str, thread_key: str,
        settings: dict[str, Any],
    ) -> RequestRecord:  # fmt: skip
        """A running request owned by this process."""
        return RequestRecord(
            request_key=scoped_key(project_id, request_id), request_id=request_id, project_id=project_id,
            protocol=protocol, thread_id=thread_id, thread_key=thread_key, status="running",
            settings=settings, owner=self.owner, heartbeat_at=time.time(),
        )  # fmt: skip

    async def _thread_key(self, thread_id: str, protocol: str, project_id: str) -> str:
        """The LangGraph thread of a project's thread id: a new one, or an existing thread it may join.

        A new turn may join a thread only of its own protocol, and not while it runs. Threads are
        per project: another project's thread of the same id is a different thread.
        """
        first = await self.store.for_thread(project_id, thread_id)
        if first is None:
            return scoped_key(project_id, thread_id)
        if first.protocol != protocol:
            raise ConflictError(f"thread {thread_id!r} belongs to protocol {first.protocol!r}")
        if await self.store.thread_busy(first.thread_key):
            raise ConflictError(f"thread {thread_id!r} has a request running; wait, pause or cancel it first")
        return first.thread_key

    async def resume(self, record: RequestRecord, phase_index: int | None) -> RequestRecord:
        """Continue a request from the end of ``phase_index`` (latest when ``None``); earlier = fork."""
        if record.status == "cancelled" or record.cancel_requested:
            raise ConflictError(f"request {record.request_id!r} was cancelled and cannot be resumed")
        if record.status == "running":
            if not self._orphaned(record):
                raise ConflictError(f"request {record.request_id!r} is still running")
            # Its server died mid-run: record that (paused, crashed) and resume like any pause.
            if not await self.take_over(record, "pause"):
                raise ConflictError(f"request {record.request_id!r} changed state meanwhile; try again")
            record = await self._current(record)
        graph = self.graph(get_protocol(record.protocol))
        snapshot, fork = await end_of_phase(graph, record.thread_key, phase_index)
        if not await self.store.claim(record.request_key, self.owner, (record.status,)):
            raise ConflictError(f"request {record.request_id!r} changed state meanwhile; try again")
        await self._restart(record, snapshot, phase_index=phase_index, fork=fork)
        return record

    async def _restart(
        self, record: RequestRecord, snapshot: Any, *, phase_index: int | None = None, fork: bool = False
    ) -> None:
        """Emit ``resumed`` and drive the run on from ``snapshot`` (a claimed request).

        Work a crash interrupted after the checkpoint is done again, so the event names the seq
        from which the earlier attempt's events are replaced.
        """
        events = await self.store.events_after(record.request_key, 0)
        crashed = bool(events) and isinstance(events[-1], Paused) and events[-1].reason == "crashed"
        replaces = None if fork else replaced_from(events, snapshot.metadata.get("step"))
        checkpoint_id = snapshot.config["configurable"]["checkpoint_id"]
        reason = "crashed" if crashed or replaces is not None else "requested"
        resumed = await self._emit(record, Resumed, snapshot.values, checkpoint_id=checkpoint_id,
                                   from_phase_index=phase_index, fork=fork, replaces_from_seq=replaces,
                                   reason=reason)  # fmt: skip
        config = thread_config(record.thread_key, checkpoint_id if fork else None)
        self._launch(record.model_copy(update={"last_seq": resumed.seq}), None, config)

    async def take_over(self, record: RequestRecord, action: Literal["pause", "resume"]) -> bool:
        """Become the driver of an orphaned run and pause or resume it; False when another replica won.

        Followers then end cleanly (``paused`` with reason ``crashed``) or see the run go on
        (``resumed`` naming the events it replaces). A run that had in fact ended gets its
        status; one that cannot go on from its checkpoint ends with an ``error``.
        """
        if not await self.store.take_over(record, self.owner):
            return False
        record = await self._current(record)
        logger.warning("request %s: its server stopped mid-run; this replica will %s it",
                       record.request_id, action)  # fmt: skip
        try:
            events = await self.store.events_after(record.request_key, max(record.last_seq - 1, 0))
            if events and (ended := _status_after(events[-1])):  # only the status was not written
                await self.store.update(record.request_key, status=ended, pause_requested=False)
                return True
            snapshot = await self.graph(get_protocol(record.protocol)).aget_state(
                thread_config(record.thread_key)
            )
            if not snapshot.next:
                await self._stop(record, "failed", ErrorEvent, kind="crashed", message=CANNOT_CONTINUE)
            elif action == "pause":
                await self._stop(record, "paused", Paused, reason="crashed")
            else:
                await self._restart(record, snapshot)
        finally:
            self._wake(record.request_key)
        return True

    async def recover_orphans(self) -> None:
        """Take over every run whose driver died (at start-up, then from the watcher)."""
        for record in await self.store.running():
            if record.request_key in self._tasks:
                continue
            # Ours with no task left (its driver failed) counts once its heartbeat is stale.
            mine_but_lost = record.owner == self.owner and is_orphaned(
                record.model_copy(update={"owner": None}), self.owner, self.settings.orphan_after_seconds
            )
            if self._orphaned(record) or mine_but_lost:
                try:
                    await self.take_over(record, self.settings.on_orphan)
                except Exception:  # one broken request must not stop recovering the others
                    logger.exception("request %s could not be taken over", record.request_id)

    async def _current(self, record: RequestRecord) -> RequestRecord:
        current = await self.store.get(record.request_key)
        if current is None:
            raise NotFoundError(f"request {record.request_id!r} does not exist")
        return current

    async def fork(self, origin: RequestRecord, checkpoint_id: str) -> RequestRecord:
        """Start a new request on ``origin``'s thread, continuing from ``checkpoint_id``."""
        graph = self.graph(get_protocol(origin.protocol))
        snapshot = await snapshot_at(graph, origin.thread_key, checkpoint_id)
        require_next(snapshot)
        # A fresh record: nothing of the origin's state (cancelled, pause flags) carries over.
        record = self._new_record(
            uuid4().hex,
            origin.project_id,
            origin.protocol,
            origin.thread_id,
            origin.thread_key,
            origin.settings,
        )
        await self.store.create(record)
        resumed = await self._emit(record, Resumed, snapshot.values, checkpoint_id=checkpoint_id, fork=True)
        config = thread_config(origin.thread_key, checkpoint_id)
        self._launch(record.model_copy(update={"last_seq": resumed.seq}), None, config)
        return record

    async def pause(self, record: RequestRecord, reason: str = "requested") -> None:
        """Ask a running request to stop at its next pause point."""
        if record.status != "running":
            raise ConflictError(f"request {record.request_id!r} is {record.status}, not running")
        if self._orphaned(record):  # nobody drives it: pause it here and now
            if not await self.take_over(record, "pause"):
                raise ConflictError(f"request {record.request_id!r} changed state meanwhile; try again")
            return
        self._pause_reasons[record.request_key] = reason
        await self.store.update(record.request_key, pause_requested=True)

    async def cancel(self, record: RequestRecord) -> None:
        """Cancel a request for good: its stream ends with ``cancelled`` and it cannot be resumed."""
        if record.status == "cancelled":
            return
        if record.status in ("completed", "failed"):
            raise ConflictError(f"request {record.request_id!r} already {record.status}; nothing to cancel")
        task = self._tasks.get(record.request_key)
        if task is not None:
            task.cancel()  # the driver records the cancellation
            with contextlib.suppress(asyncio.CancelledError):
                await task
        elif record.status == "running" and not self._orphaned(record):
            await self.store.update(record.request_key, cancel_requested=True)  # its driver stops it
        else:  # paused, finished or orphaned: nobody else will say it
            await self.store.update(record.request_key, status="cancelled")
            await self._emit(record, Cancelled, await self._values(record))

    async def follow(self, request_key: str, after_seq: int = 0) -> AsyncIterator[Event]:
        """Every event after ``after_seq``: the stored ones, then live ones while the run goes on."""
        wakeup = self._wakeups.setdefault(request_key, asyncio.Event())
        try:
            while True:
                wakeup.clear()  # before reading, so an event stored meanwhile wakes the wait below
                record = await self.store.get(request_key)
                if record is None:
                    raise NotFoundError("the request does not exist any more")
                for event in await self.store.events_after(request_key, after_seq):
                    after_seq = event.seq
                    yield event
                if record.status != "running":  # an orphan ends too, once a replica took it over
                    return
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(wakeup.wait(), POLL_SECONDS)
        finally:
            if request_key not in self._tasks:
                self._wakeups.pop(request_key, None)

    async def watch(self) -> None:
        """Heartbeat this process's runs and apply pause/cancel requests other replicas stored."""
        while True:
            try:
                await self.recover_orphans()
                for request_key, task in list(self._tasks.items()):
                    record = await self.store.get(request_key)
                    if record is not None and (record.status == "cancelled" or record.cancel_requested):
                        task.cancel()
                    elif record is not None and record.owner != self.owner:
                        # Another replica took the run over (this one looked dead): it drives now.
                        self._pause_reasons[request_key] = SUPERSEDED
                        task.cancel()
                    elif record is not None:
                        await self.store.update(request_key, heartbeat_at=time.time())
            except Exception:  # a database hiccup must not end the watcher; the next round retries
                logger.exception("run watcher round failed")
            await asyncio.sleep(POLL_SECONDS)

    async def shutdown(self) -> None:
        """Stop local runs at their last checkpoint; they stay resumable."""
        for request_id, task in list(self._tasks.items()):
            self._pause_reasons[request_id] = "shutdown"
            task.cancel()
        await asyncio.gather(*self._tasks.values(), return_exceptions=True)

    def _launch(self, record: RequestRecord, graph_input: Any, config: RunnableConfig) -> None:
        task = asyncio.create_task(self._drive(record, graph_input, config), name=f"run-{record.request_key}")
        self._tasks[record.request_key] = task

    async def _drive(self, record: RequestRecord, graph_input: Any, config: RunnableConfig) -> None:
        spec = get_protocol(record.protocol)
        graph, context, traces = self.graph(spec), self.context_for(record), _Buffer()
        seq, ended = record.last_seq, ""
        try:
            while True:
                # Read each segment to its end, so the graph saves its last checkpoint.
                async for event in stream_graph(
                    spec, graph, graph_input, context, config, traces=traces, seq_start=seq
                ):
                    await self._store_event(record.request_key, event, traces.drain())
                    seq = event.seq
                    if isinstance(event, Final | ErrorEvent):
                        ended = "completed" if isinstance(event, Final) else "failed"
                await self.store.append_traces(record.request_key, traces.drain())
                if ended:
                    await self.store.update(record.request_key, status=ended)
                    return
                current = await self.store.get(record.request_key)
                if current is not None and current.pause_requested:
                    reason = self._pause_reasons.pop(record.request_key, "requested")
                    await self._stop(
                        record.model_copy(update={"last_seq": seq}), "paused", Paused, reason=reason
                    )
                    return
                graph_input, config = None, thread_config(record.thread_key)  # past the pause point
        except asyncio.CancelledError:
            reason = self._pause_reasons.pop(record.request_key, "")
            if reason != SUPERSEDED:
                await self.store.append_traces(record.request_key, traces.drain())
            done = record.model_copy(update={"last_seq": seq})
            if reason == SUPERSEDED:
                logger.warning("request %s: another replica took it over; stopped here", record.request_id)
            elif reason == "shutdown":
                await self._stop(done, "paused", Paused, reason="shutdown")
            else:
                await self._stop(done, "cancelled", Cancelled)
        except Exception:  # the store or the server failed, not the graph: end the run visibly
            logger.exception("request %s: its driver failed", record.request_id)
            with contextlib.suppress(Exception):  # the store may be what failed; recovery retries
                done = record.model_copy(update={"last_seq": seq})
                await self._stop(done, "failed", ErrorEvent, kind="internal", message=DRIVER_FAILED)
        finally:
            self._tasks.pop(record.request_key, None)
            self._wake(record.request_key)

    async def _stop(
        self, record: RequestRecord, status: str, event_type: type[EventBase], **fields: Any
    ) -> None:
        await self._emit(record, event_type, await self._values(record), **fields)
        await self.store.update(record.request_key, status=status, pause_requested=False)

    async def _emit(
        self, record: RequestRecord, event_type: type[EventBase], values: dict[str, Any], **fields: Any
    ) -> Event:
        """Record an event the server itself adds, with the protocol's phase fields."""
        current = await self.store.get(record.request_key)
        seq = (current.last_seq if current else record.last_seq) + 1
        meta = get_protocol(record.protocol).event_meta(values)
        event = event_type(
            request_id=record.request_id, project_id=record.project_id, protocol=record.protocol, seq=seq,
            **meta, **fields,
        )  # fmt: skip
        await self._store_event(record.request_key, event, [])  # type: ignore[arg-type]
        return event  # type: ignore[return-value]

    async def _values(self, record: RequestRecord) -> dict[str, Any]:
        graph = self.graph(get_protocol(record.protocol))
        return (await graph.aget_state(thread_config(record.thread_key))).values or {}

    async def _store_event(self, request_id: str, event: Event, traces: list[TraceEntry]) -> None:
        await self.store.record(request_id, event, traces)
        self._wake(request_id)

    def _wake(self, request_id: str) -> None:
        if (wakeup := self._wakeups.get(request_id)) is not None:
            wakeup.set()

    def _orphaned(self, record: RequestRecord) -> bool:
        return is_orphaned(record, self.owner, self.settings.orphan_after_seconds)


def _status_after(event: Event) -> str | None:
    """The status a request has once ``event`` is its last (``None``: the run was still going)."""
    statuses = {Final: "completed", ErrorEvent: "failed", Cancelled: "cancelled", Paused: "paused"}
    return next((status for kind, status in statuses.items() if isinstance(event, kind)), None)
