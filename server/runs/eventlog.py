"""The durable event log, written in batches (group commit), and handed to live followers after commit.

Drivers queue what their runs emit and go on. One writer task commits whatever has queued, from
every run of this replica, in one transaction, then publishes those events to the live hub. So
**an event is durable before any client sees it**: a crash loses nothing a client was shown, and a
replay after it repeats nothing. A driver waits for its commit only where that order is the point:
a pause, a terminal event, a status change.

While one batch commits the next gathers, and under load a batch gathers a few milliseconds more,
so batches grow with load while a quiet server commits each event at once. A batch that fails is
retried one request at a time, so one request's conflict (a driver another replica took over)
never costs the others their events.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import deque
from dataclasses import dataclass, field

from phasegraph.nodes.errors import PhasegraphError
from phasegraph.nodes.events import Event
from phasegraph.nodes.telemetry.metrics import instruments
from phasegraph.nodes.trace import TraceEntry
from phasegraph.server.runs.live import LiveHub
from phasegraph.server.storage.records import Status
from phasegraph.server.storage.store import Append, RequestStore

logger = logging.getLogger(__name__)

#: Events per transaction, at most.
BATCH_EVENTS = 500
#: Under load (the last commit ended less than this ago), how long a batch gathers before it is
#: committed: the commit's fixed cost is shared by everything that arrives meanwhile. After a quiet
#: spell, or when a run's last event is queued, the batch is committed at once.
LINGER_SECONDS = 0.004
#: Events queued and not yet committed beyond which drivers wait (the log cannot keep up).
QUEUE_EVENTS = 20_000


class Superseded(PhasegraphError):
    """Another replica drives the request now: it took the run over from this one."""

    kind = "superseded"


@dataclass
class _Pending:
    append: Append
    done: asyncio.Future[None] = field(default_factory=lambda: asyncio.get_running_loop().create_future())


class EventLog:
    """Group-committing writer of one replica's events, traces and run statuses."""

    def __init__(self, store: RequestStore, hub: LiveHub, owner: str) -> None:
        self.store, self.hub, self.owner = store, hub, owner
        self._queue: deque[_Pending] = deque()
        self._queued_events = 0
        self._arrived = asyncio.Event()
        self._room = asyncio.Event()
        self._room.set()
        self._task: asyncio.Task[None] | None = None
        self._last_commit = 0.0  # monotonic time the writer last went idle
        self._awaited = 0  # queued items that end a run segment: their driver waits, so no lingering

    def start(self) -> None:
        """Start the writer task."""
        self._task = asyncio.create_task(self._write_forever(), name="event-log-writer")

    async def close(self) -> None:
        """Let the writer commit what is queued, then stop it."""
        await self.barrier()  # the writer's own order: committing beside it could reorder a request's batches
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def append(
        self,
        request_key: str,
        events: list[Event],
        traces: list[TraceEntry] | None = None,
        *,
        status: Status | None = None,
        guarded: bool = True,
    ) -> asyncio.Future[None]:
        """Queue a request's events (and traces, and status); the future completes at their commit.

        ``guarded`` writes only while this replica drives the request; otherwise the future fails
        with ``Superseded``. Waits first while the log is too far behind.
        """
        while self._queued_events >= QUEUE_EVENTS:
            self._room.clear()
            await self._room.wait()
        pending = _Pending(Append(request_key, events, traces or [], status, guarded))
        self._awaited += status is not None
        self._queue.append(pending)
        self._queued_events += len(events)
        self._arrived.set()
        return pending.done

    async def barrier(self) -> None:
        """Wait until everything queued so far is committed (or refused)."""
        if self._queue:
            await asyncio.gather(*(p.done for p in self._queue), return_exceptions=True)

    async def write(
        self,
        request_key: str,
        events: list[Event],
        traces: list[TraceEntry] | None = None,
        *,
        status: Status | None = None,
        guarded: bool = True,
    ) -> None:
        """Queue and wait for the commit (see ``append``)."""
        await (await self.append(request_key, events, traces, status=status, guarded=guarded))

    async def _write_forever(self) -> None:
        while True:
            await self._arrived.wait()
            if time.monotonic() - self._last_commit < LINGER_SECONDS and not self._awaited:
                await asyncio.sleep(LINGER_SECONDS)
            self._arrived.clear()
            while self._queue:
                await self._write_once()
            self._last_commit = time.monotonic()

    async def _write_once(self) -> None:
        batch: list[_Pending] = []
        size = 0
        while self._queue and (not batch or size + len(self._queue[0].append.events) <= BATCH_EVENTS):
            pending = self._queue.popleft()
            batch.append(pending)
            size += len(pending.append.events)
        self._awaited -= sum(p.append.status is not None for p in batch)
        try:
            await self._commit(batch)
        except Exception as exc:
            if len({p.append.request_key for p in batch}) == 1:
                _fail(batch, exc)
            else:
                logger.warning("a batch of %d events failed (%s); writing it request by request", size, exc)
                for key in dict.fromkeys(p.append.request_key for p in batch):
                    alone = [p for p in batch if p.append.request_key == key]
                    try:
                        await self._commit(alone)
                    except Exception as one:
                        _fail(alone, one)
        finally:
            self._queued_events -= size
            if self._queued_events < QUEUE_EVENTS:
                self._room.set()

    async def _commit(self, batch: list[_Pending]) -> None:
        started, failure = time.perf_counter(), dict[str, str]()
        try:
            refused = await self.store.write_batch([p.append for p in batch], self.owner)
        except Exception as exc:
            failure = {"error.type": type(exc).__name__}
            raise
        finally:  # every write is timed, one that failed too (marked with its error)
            instruments().log_writes.record(time.perf_counter() - started, failure)
        for pending in batch:
            key = pending.append.request_key
            if key in refused:
                _settle(pending, Superseded(f"request {key!r} is driven by another replica now"))
                continue
            if pending.append.events:
                self.hub.publish(key, pending.append.events)
            _settle(pending, None)


def _settle(pending: _Pending, exc: BaseException | None) -> None:
    if pending.done.done():
        return
    if exc is None:
        pending.done.set_result(None)
    else:
        pending.done.set_exception(exc)
        pending.done.exception()  # retrieved here: a driver that never awaits it is not an error


def _fail(batch: list[_Pending], exc: BaseException) -> None:
    for pending in batch:
        _settle(pending, exc)
