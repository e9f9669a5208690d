"""Run manager: starts, drives, pauses, resumes and cancels runs; every event is committed before it is shown.

Drivers queue their runs' events on the batched event log (``server.eventlog``), which hands each
committed batch to this replica's followers in memory (``server.live``). Followers on other replicas
read the store when Postgres notifies them (``server.wakeups``), so any replica can serve any
request's stream, and a client reconnecting with ``Last-Event-ID`` replays the store and then joins
the live queue with no gap and no repeat.
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
from starlette.requests import Request

from phasegraph.graphs.registry import ProtocolSpec, get_protocol
from phasegraph.graphs.run import stream_graph, turn_input
from phasegraph.nodes.context import RunContext
from phasegraph.nodes.errors import ConfigurationError, ConflictError, NotFoundError, TooLargeError
from phasegraph.nodes.events import Cancelled, ErrorEvent, Event, EventBase, Final, Paused, Resumed
from phasegraph.nodes.models import public_spec
from phasegraph.nodes.redact import redactor
from phasegraph.nodes.settings import ServerSettings
from phasegraph.nodes.trace import TraceEntry
from phasegraph.server.checkpoints import end_of_phase, require_next, snapshot_at, thread_config
from phasegraph.server.eventlog import EventLog, Superseded
from phasegraph.server.live import LiveHub, Subscription
from phasegraph.server.recovery import is_orphaned, new_owner_id, replaced_from
from phasegraph.server.stops import RunStops
from phasegraph.server.store import RequestRecord, RequestStore, Status, scoped_key
from phasegraph.server.wakeups import Wakeups

logger = logging.getLogger(__name__)

DRIVER_FAILED = "the server failed while driving this run (see its log); send the message again"
CANNOT_CONTINUE = (
    "the server driving this run stopped before the run saved a point to continue from; "
    "send the message again"
)

#: How often the watcher heartbeats local runs, applies stored control flags and looks for orphans.
WATCH_SECONDS = 1.0
#: How often a follower reads the store when nothing can wake it (no listening connection to Postgres).
SLOW_POLL_SECONDS = 1.0
#: Events after which a follower's stream ends: the run stopped (a resume is a new stream).
STOPS = (Final, ErrorEvent, Cancelled, Paused)
#: Why a local run stops when another replica has taken it over (it adds nothing more).
SUPERSEDED = "superseded"
#: ``start``'s default input: the message is the user's turn.
TURN: Any = object()


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
        self.hub = LiveHub()
        self.log = EventLog(store, self.hub, self.owner)
        self.wakeups: Wakeups | None = None
        self._graphs: dict[str, CompiledStateGraph[Any, Any, Any, Any]] = {}
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self._pauses: dict[str, str] = {}  # request key -> why its run should pause at its next point
        self._stops: dict[str, str] = {}  # request key -> why its task was cancelled (not a cancel)
        self._queued: dict[str, int] = {}  # request key -> seq of the last event its driver queued
        self._ending: set[str] = set()  # request keys whose driver queued the event that ends the run
        self._fresh: dict[str, Subscription] = {}  # new runs' subscriptions, until their stream takes them
        self._watcher: asyncio.Task[None] | None = None

    async def open(self) -> None:
        """Start the event log, the Postgres listener, recovery of dead replicas' runs and the watcher."""
        self.log.start()
        if self.store.engine.dialect.name == "postgresql":
            self.wakeups = Wakeups(self.settings.checkpointer, self.owner, self.hub.poke, self.on_control,
                                   self.hub.poke_all)  # fmt: skip
            self.wakeups.start()
        await self.recover_orphans()  # runs a dead predecessor left behind, before any client asks
        self._watcher = asyncio.create_task(self.watch(), name="run-watcher")

    async def close(self) -> None:
        """Pause local runs at their last checkpoint (they stay resumable), commit the log, stop."""
        if self._watcher is not None:
            self._watcher.cancel()
            await asyncio.gather(self._watcher, return_exceptions=True)
        await self.shutdown()
        await self.log.close()
        if self.wakeups is not None:
            await self.wakeups.close()

    def graph(self, spec: ProtocolSpec) -> CompiledStateGraph[Any, Any, Any, Any]:
        """The protocol's graph with the shared checkpointer, stopping at its pause points."""
        if spec.id not in self._graphs:
            self._graphs[spec.id] = spec.compile(self.checkpointer, pausable=True)
        return self._graphs[spec.id]

    def context_for(self, record: RequestRecord) -> RunContext:
        """Rebuild a request's Context from its record (works on any replica)."""
        spec = get_protocol(record.protocol)
        return spec.make_context(
            **record.settings,
            request_id=record.request_id,
            workspace=self.settings.workspace,
            database=self.settings.checkpointer,
        )

    async def start(
        self, protocol: str, message: str, *, project_id: str, request_id: str | None, thread_id: str | None,
        model: str | None, show_tool_outputs: bool, settings: dict[str, Any] | None = None,
        graph_input: Any = TURN, options: dict[str, Any] | None = None, checkpoint_id: str | None = None,
    ) -> RequestRecord:  # fmt: skip
        """Create a request and start its run in the background.

        ``settings`` are the Context fields the client chose (checked against what the protocol allows).
        By default ``message`` is the user's turn; a LangGraph API run passes its own ``graph_input``
        instead (state, a ``Command`` or ``None`` to continue), may start from ``checkpoint_id`` (a
        fork) and keeps its ``options`` (``interrupt_before``/``interrupt_after``) on the record.
        """
        spec = get_protocol(protocol)
        client = spec.client_settings(settings or {})
        if graph_input is TURN:
            spec.check_message(message)
        chosen = self._allowed_model(model)
        request_id = request_id or uuid4().hex
        thread_id = thread_id or request_id
        taken, first = await self.store.before_start(
            scoped_key(project_id, request_id), project_id, thread_id
        )
        if taken:
            raise ConflictError(f"request {request_id!r} already exists; resume it or use a new requestId")
        thread_key = await self._thread_key(first, thread_id, spec.id, project_id)
        fields = {**client, "model": chosen, "project_id": project_id, "show_tool_outputs": show_tool_outputs}
        record = self._new_record(request_id, project_id, spec.id, thread_id, thread_key, fields)
        record.options = options or {}
        self.context_for(record)  # a bad model spec fails here, before anything is stored
        await self.store.create(record)
        if graph_input is TURN:
            graph_input = {"messages": [HumanMessage(message)]}
            if first is not None:  # a thread's later turn may answer the question its last turn asked
                graph_input = await turn_input(self.graph(spec), thread_config(record.thread_key), message)
        # Subscribed before the run starts, so its stream needs no first read of the store.
        self._fresh[record.request_key] = self.hub.subscribe(record.request_key)
        self._launch(record, graph_input, thread_config(record.thread_key, checkpoint_id))
        return record

    def check_message_size(self, message: str) -> None:
        """Refuse a message longer than this server accepts (413), before anything else is looked up."""
        if len(message) > self.settings.max_message_chars:
            raise TooLargeError(
                f"the message has {len(message)} characters; this server accepts at most "
                f"{self.settings.max_message_chars}"
            )

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

    async def _thread_key(
        self, first: RequestRecord | None, thread_id: str, protocol: str, project_id: str
    ) -> str:
        """The LangGraph thread of a project's thread id: a new one, or an existing thread it may join.

        A new turn may join a thread only of its own protocol, and not while it runs. Threads are
        per project: another project's thread of the same id is a different thread.
        """
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
        last_seq = events[-1].seq if events else 0
        resumed = await self._emit(record, Resumed, snapshot.values, seq=last_seq + 1,
                                   checkpoint_id=checkpoint_id, from_phase_index=phase_index, fork=fork,
                                   replaces_from_seq=replaces, reason=reason)  # fmt: skip
        config = thread_config(record.thread_key, checkpoint_id if fork else None)
        self._launch(record.model_copy(update={"last_seq": resumed.seq}), None, config)

    async def take_over(self, record: RequestRecord, action: Literal["pause", "resume"]) -> bool:
        """Become the driver of an orphaned run and pause or resume it; False when another replica won.

        Followers then end cleanly (``paused`` with reason ``crashed``) or see the run go on
        (``resumed`` naming the events it replaces). A run that had in fact ended gets its
        status; one that cannot go on from its checkpoint ends with an ``error``.
        """
        await self.log.barrier()  # a local driver's queued writes are settled before the owner changes
        if not await self.store.take_over(record, self.owner):
            return False
        record = await self._current(record)
        logger.warning("request %s: its server stopped mid-run; this replica will %s it",
                       record.request_id, action)  # fmt: skip
        events = await self.store.events_after(record.request_key, max(record.last_seq - 1, 0))
        if events and (ended := _status_after(events[-1])):  # only the status was not written
            await self.log.write(record.request_key, [], status=ended)
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
        return True

    async def recover_orphans(self) -> None:
        """Take over every run whose driver died (at start-up, then from the watcher)."""
        stale_before = time.time() - self.settings.orphan_after_seconds
        for record in await self.store.maybe_orphaned(self.owner, stale_before):
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
        resumed = await self._emit(
            record, Resumed, snapshot.values, seq=1, checkpoint_id=checkpoint_id, fork=True
        )
        config = thread_config(origin.thread_key, checkpoint_id)
        self._launch(record.model_copy(update={"last_seq": resumed.seq}), None, config)
        return record

    async def pause(self, record: RequestRecord, reason: str = "requested") -> None:
        """Ask a running request to stop at its next pause point."""
        if record.status != "running":
            raise ConflictError(f"request {record.request_id!r} is {record.status}, not running")
        if record.request_key in self._tasks:  # driven here: the driver looks at its next pause point
            self._pauses.setdefault(record.request_key, reason)
        elif self._orphaned(record):  # nobody drives it: pause it here and now
            if not await self.take_over(record, "pause"):
                raise ConflictError(f"request {record.request_id!r} changed state meanwhile; try again")
        else:  # another replica drives it: it hears at once (Postgres) or at its next watch round
            await self.store.request_control(record.request_key, pause_requested=True)

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
            await self.store.request_control(record.request_key, cancel_requested=True)  # its driver stops it
        else:  # paused, finished or orphaned: nobody else will say it
            await self._emit(record, Cancelled, await self._values(record), status="cancelled", guarded=False)

    async def on_control(self, request_key: str) -> None:
        """Another replica stored a pause or cancel request: apply it if the run is driven here."""
        if request_key in self._tasks and (record := await self.store.get(request_key)) is not None:
            self._apply_control(record)

    def _apply_control(self, record: RequestRecord) -> None:
        task = self._tasks.get(record.request_key)
        if task is None:
            return
        if record.status == "cancelled" or record.cancel_requested:
            task.cancel()
        elif record.owner != self.owner:  # another replica took the run over (this one looked dead)
            self._stops[record.request_key] = SUPERSEDED
            task.cancel()
        elif record.pause_requested:
            self._pauses.setdefault(record.request_key, "requested")

    async def follow(self, record: RequestRecord, after_seq: int = 0) -> AsyncIterator[Event]:
        """Every event after ``after_seq``: the stored ones, then live ones until the run stops.

        The subscription starts before the store is read, so an event committed meanwhile is in
        one or the other (or both: ``seq`` drops the repeat). A follower dropped for reading too
        slowly, or woken by another replica's commit, reads the store from where it was.
        """
        key = record.request_key
        fresh = self._fresh.pop(key, None) if after_seq == 0 else None
        subscription = fresh or self.hub.subscribe(key)
        try:
            from_store, first = fresh is None, True
            while True:
                if subscription.dropped:
                    self.hub.unsubscribe(key, subscription)
                    subscription = self.hub.subscribe(key)
                    from_store = True
                if from_store or subscription.stale:
                    subscription.stale = False
                    events = await self.store.events_after(key, after_seq)
                else:
                    events = subscription.take()
                from_store = False
                for event in events:
                    if event.seq <= after_seq:
                        continue  # replayed already
                    if event.seq > after_seq + 1:  # committed before this subscription: in the store
                        from_store = True
                        break
                    after_seq = event.seq
                    yield event
                    if isinstance(event, STOPS) and event is events[-1]:
                        return  # the run stopped (a stop followed by more was paused, then resumed)
                if first and not events and record.status != "running":
                    return  # nothing after ``after_seq`` and nothing more to come
                first = False
                if not from_store:
                    await subscription.wait(self._poll_interval(key))
        finally:
            self.hub.unsubscribe(key, subscription)

    def _poll_interval(self, request_key: str) -> float | None:
        """How long a follower may wait without reading the store (``None``: until woken)."""
        if request_key in self._tasks or (self.wakeups is not None and self.wakeups.listening):
            return None
        return SLOW_POLL_SECONDS

    async def watch(self) -> None:
        """Heartbeat this process's runs, apply stored control flags, take over dead replicas' runs."""
        while True:
            try:
                await self.recover_orphans()
                for record in await self.store.heartbeat(list(self._tasks), self.owner):
                    self._apply_control(record)
            except Exception:  # a database hiccup must not end the watcher; the next round retries
                logger.exception("run watcher round failed")
            await asyncio.sleep(WATCH_SECONDS)

    async def shutdown(self) -> None:
        """Stop local runs at their last checkpoint; they stay resumable."""
        for request_key, task in list(self._tasks.items()):
            self._stops[request_key] = "shutdown"
            task.cancel()
        await asyncio.gather(*self._tasks.values(), return_exceptions=True)

    def _launch(self, record: RequestRecord, graph_input: Any, config: RunnableConfig) -> None:
        task = asyncio.create_task(self._drive(record, graph_input, config), name=f"run-{record.request_key}")
        self._tasks[record.request_key] = task

    async def _drive(self, record: RequestRecord, graph_input: Any, config: RunnableConfig) -> None:
        key = record.request_key
        try:
            await self._segments(record, graph_input, config)
        except asyncio.CancelledError:
            reason = self._stops.pop(key, "")
            done = record.model_copy(update={"last_seq": self._queued.get(key, record.last_seq)})
            if key in self._ending:
                pass  # its last event is queued already (final, error, paused): that is how it ends
            elif reason == SUPERSEDED:
                logger.warning("request %s: another replica took it over; stopped here", record.request_id)
            elif reason == "shutdown":
                await self._stop(done, "paused", Paused, reason="shutdown")
            else:
                await self._stop(done, "cancelled", Cancelled)
        except Superseded:
            logger.warning("request %s: another replica took it over; stopped here", record.request_id)
        except Exception:  # the store or the server failed, not the graph: end the run visibly
            logger.exception("request %s: its driver failed", record.request_id)
            with contextlib.suppress(Exception):  # the store may be what failed; recovery retries
                done = record.model_copy(update={"last_seq": self._queued.get(key, record.last_seq)})
                await self._stop(done, "failed", ErrorEvent, kind="internal", message=DRIVER_FAILED)
        finally:
            self._tasks.pop(key, None)
            self._pauses.pop(key, None)
            self._stops.pop(key, None)
            self._queued.pop(key, None)
            self._ending.discard(key)
            if (unfollowed := self._fresh.pop(key, None)) is not None:
                self.hub.unsubscribe(key, unfollowed)
            self.hub.poke(key)  # followers look at the store: the run may have stopped without a word

    async def _segments(self, record: RequestRecord, graph_input: Any, config: RunnableConfig) -> None:
        """Run the graph segment by segment (pause points between) until it ends or pauses.

        Events are queued on the log as they come and shown once committed; the terminal event is
        held until the graph has saved its last checkpoint, then committed with the final status.
        """
        spec, key = get_protocol(record.protocol), record.request_key
        graph, context, traces = self.graph(spec), self.context_for(record), _Buffer()
        self._queued[key] = record.last_seq
        try:
            await self._drive_segments(record, graph_input, config, graph, context, traces)
        finally:
            await context.aclose()  # the run ended or paused here: what it held open is released

    async def _drive_segments(
        self, record: RequestRecord, graph_input: Any, config: RunnableConfig,
        graph: CompiledStateGraph[Any, Any, Any, Any], context: RunContext, traces: _Buffer,
    ) -> None:  # fmt: skip
        spec, key = get_protocol(record.protocol), record.request_key
        written: asyncio.Future[None] | None = None
        stops = RunStops.of(record.options, spec.pause_after)
        while True:
            held: list[Event] = []  # the terminal event and anything after it
            # Checkpoints name the request that made them (the LangGraph API's run_id): a run's own
            # checkpoints are its values and updates there.
            config = {**config, "metadata": {**config.get("metadata", {}), "run_id": record.request_id}}
            async for event in stream_graph(spec, graph, graph_input, context, config, traces=traces,
                                            seq_start=self._queued[key],
                                            durability=self.settings.durability,
                                            interrupts=stops.interrupts()):  # fmt: skip
                if held or isinstance(event, Final | ErrorEvent):
                    held.append(event)
                    continue
                if written is not None and written.done():
                    written.result()  # a failed write (superseded, database down) stops the run here
                written = await self.log.append(key, [event], traces.drain())
                self._queued[key] = event.seq
            if held:
                ended: Status = "completed" if any(isinstance(e, Final) for e in held) else "failed"
                written = await self.log.append(key, held, traces.drain(), status=ended)
                self._queued[key] = held[-1].seq
                self._ending.add(key)
                await asyncio.shield(written)
                return
            if written is not None:  # at a pause point clients have been shown the whole segment
                await asyncio.shield(written)
            reason = self._pauses.pop(key, None)
            if reason is None and stops and await stops.reached(graph, thread_config(record.thread_key)):
                reason = "interrupt"  # a stop the run asked for (LangGraph API interrupt_before/after)
            if reason is not None:
                done = record.model_copy(update={"last_seq": self._queued[key]})
                await self._stop(done, "paused", Paused, reason=reason, traces=traces.drain())
                return
            graph_input, config = None, thread_config(record.thread_key)  # past the pause point

    async def _stop(
        self, record: RequestRecord, status: Status, event_type: type[EventBase], *,
        traces: list[TraceEntry] | None = None, **fields: Any,
    ) -> None:  # fmt: skip
        """Commit the event that ends a run segment together with the request's new status."""
        await self._emit(record, event_type, await self._values(record), seq=record.last_seq + 1,
                         status=status, traces=traces, **fields)  # fmt: skip

    async def _emit(
        self, record: RequestRecord, event_type: type[EventBase], values: dict[str, Any], *,
        seq: int | None = None, status: Status | None = None, guarded: bool = True,
        traces: list[TraceEntry] | None = None, **fields: Any,
    ) -> Event:  # fmt: skip
        """Commit an event the server itself adds (with the protocol's phase fields); wait for it.

        ``seq`` defaults to the one after the store's last; ``guarded`` writes only while this
        replica drives the request.
        """
        if seq is None:
            await self.log.barrier()
            seq = (await self._current(record)).last_seq + 1
        meta = get_protocol(record.protocol).event_meta(values)
        event = event_type(
            request_id=record.request_id, project_id=record.project_id, protocol=record.protocol, seq=seq,
            **meta, **fields,
        )  # fmt: skip
        event = redactor().model(event)
        key = record.request_key
        written = await self.log.append(key, [event], traces, status=status, guarded=guarded)  # type: ignore[list-item]
        if key in self._queued:  # the driver's own: a cancel arriving now must not reuse the seq
            self._queued[key] = seq
            if status is not None:
                self._ending.add(key)
        await asyncio.shield(written)
        return event  # type: ignore[return-value]

    async def _values(self, record: RequestRecord) -> dict[str, Any]:
        graph = self.graph(get_protocol(record.protocol))
        return (await graph.aget_state(thread_config(record.thread_key))).values or {}

    def _orphaned(self, record: RequestRecord) -> bool:
        return is_orphaned(record, self.owner, self.settings.orphan_after_seconds)


def _status_after(event: Event) -> Status | None:
    """The status a request has once ``event`` is its last (``None``: the run was still going)."""
    statuses: dict[type[EventBase], Status] = {
        Final: "completed",
        ErrorEvent: "failed",
        Cancelled: "cancelled",
        Paused: "paused",
    }
    return next((status for kind, status in statuses.items() if isinstance(event, kind)), None)


def manager_of(request: Request) -> RunManager:
    """The app's run manager (every router's routes drive runs through it)."""
    manager: RunManager = request.app.state.manager
    return manager
