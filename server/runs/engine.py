"""What every part of the run engine shares, and the one way the server adds an event of its own.

The ``Engine`` holds this process's identity (its owner id), the request store, the batched event
log and its live hub, the protocols, and the runs driven here (``LocalRun``, one per request key).
Starting, driving, pausing, taking over and following are separate parts that each get the engine.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from langgraph.checkpoint.base import BaseCheckpointSaver

from phasegraph.nodes.errors import NotFoundError, PhasegraphError
from phasegraph.nodes.events import EventBase
from phasegraph.nodes.redact import redactor
from phasegraph.nodes.settings import ServerSettings
from phasegraph.nodes.trace import TraceEntry
from phasegraph.server.runs.eventlog import EventLog
from phasegraph.server.runs.live import LiveHub, Subscription
from phasegraph.server.runs.protocols import Protocols, Served
from phasegraph.server.runs.recovery import is_orphaned, new_owner_id
from phasegraph.server.runs.wakeups import Dispatcher
from phasegraph.server.storage.records import RequestRecord, Status
from phasegraph.server.storage.store import RequestStore

#: Why a local run stops when another replica has taken it over (it adds nothing more).
SUPERSEDED = "superseded"


class ServerStopping(PhasegraphError):
    """The server is stopping (503): it starts no run, and ends streams of runs driven elsewhere.

    Its own runs pause at once (reason ``shutdown``); a client sends a refused request again, or
    follows a run again (``Last-Event-ID``), wherever the load balancer sends it next.
    """

    kind = "service_unavailable"


@dataclass
class LocalRun:
    """A run this process drives: its task, and what its driver was asked or has done."""

    task: asyncio.Task[None] | None = None
    #: Why the run should pause at its next pause point.
    pause: str | None = None
    #: Why its task was cancelled when that is not a cancel: ``shutdown`` or ``superseded``.
    stop: str | None = None
    #: Seq of the last event its driver queued (set while the driver runs the graph).
    queued: int | None = None
    #: Its driver queued the event that ends the run (final, error, paused).
    ending: bool = False
    #: Its graph produced the run's last event (final or error): the run ends with it, whatever a
    #: client asks or does meanwhile (a pause, a cancel, a hang-up, a shutdown waits for that end).
    finishing: bool = False


class Engine:
    """The state the run engine's parts share, and what they all do with it."""

    def __init__(
        self, settings: ServerSettings, store: RequestStore, checkpointer: BaseCheckpointSaver[str]
    ) -> None:
        self.settings, self.store, self.checkpointer = settings, store, checkpointer
        self.owner = new_owner_id()
        self.hub = LiveHub()
        self.log = EventLog(store, self.hub, self.owner)
        self.protocols = Protocols(checkpointer, settings)
        self.wakeups: Dispatcher | None = None
        self.local: dict[str, LocalRun] = {}  # request key -> the run driven here
        self.fresh: dict[str, Subscription] = {}  # new runs' subscriptions, until their stream takes them
        #: The process is stopping: it starts no run (``refuse_when_stopping``).
        self.stopping = False

    def refuse_when_stopping(self) -> None:
        """Raise ``ServerStopping`` once the process stops: a run started now would pause at once."""
        if self.stopping:
            raise ServerStopping("this server is stopping: send the request again (another server takes it)")

    def orphaned(self, record: RequestRecord) -> bool:
        """A running request whose driver (another process) is gone or silent too long."""
        return is_orphaned(record, self.owner, self.settings.orphan_after_seconds)

    async def current(self, record: RequestRecord) -> RequestRecord:
        """The request as the store has it now."""
        current = await self.store.get(record.request_key)
        if current is None:
            raise NotFoundError(f"request {record.request_id!r} does not exist")
        return current

    async def stop(
        self, served: Served, record: RequestRecord, status: Status, event_type: type[EventBase], *,
        traces: list[TraceEntry] | None = None, **fields: Any,
    ) -> None:  # fmt: skip
        """Commit the event that ends a run segment together with the request's new status."""
        values = await served.values(record.thread_key)
        await self.emit(served, record, event_type, values, seq=record.last_seq + 1, status=status,
                        traces=traces, **fields)  # fmt: skip

    async def emit(
        self, served: Served, record: RequestRecord, event_type: type[EventBase], values: dict[str, Any], *,
        seq: int | None = None, status: Status | None = None, guarded: bool = True,
        traces: list[TraceEntry] | None = None, **fields: Any,
    ) -> EventBase:  # fmt: skip
        """Commit an event the server itself adds (with the protocol's phase fields); wait for it.

        ``seq`` defaults to the one after the store's last; ``guarded`` writes only while this
        replica drives the request.
        """
        if seq is None:
            await self.log.barrier()
            seq = (await self.current(record)).last_seq + 1
        event = event_type(
            request_id=record.request_id, project_id=record.project_id, protocol=record.protocol, seq=seq,
            **served.event_meta(values), **fields,
        )  # fmt: skip
        event = redactor().model(event)
        key = record.request_key
        written = await self.log.append(key, [event], traces, status=status, guarded=guarded)  # type: ignore[list-item]
        run = self.local.get(key)
        if run is not None and run.queued is not None:  # the driver's own: a cancel must not reuse the seq
            run.queued = seq
            if status is not None:
                run.ending = True
        await asyncio.shield(written)
        return event
