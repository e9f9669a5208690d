"""Run manager: the one object routes drive runs through; every event is committed before it is shown.

It wires the run engine's parts together and runs the background work: the event log's writer,
the wake-ups from other processes (Postgres LISTEN/NOTIFY, or sockets on sqlite) and the watcher,
which heartbeats this process's runs, applies control flags other replicas stored and takes over
runs whose driver died. The parts:

- ``starting``: new requests and forks; ``driving``: a run's segments between pause points;
- ``control``: pause, resume, cancel (and here, roll back); ``takeover``: orphaned runs;
- ``following``: a request's stored then live events, for its streams.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from langgraph.checkpoint.base import BaseCheckpointSaver
from starlette.requests import Request

from phasegraph.nodes.errors import ConflictError
from phasegraph.nodes.events import Event
from phasegraph.nodes.settings import ServerSettings
from phasegraph.server.runs.control import Control
from phasegraph.server.runs.driving import Driver
from phasegraph.server.runs.engine import Engine, LocalRun
from phasegraph.server.runs.following import STOPS, Followers
from phasegraph.server.runs.protocols import Served
from phasegraph.server.runs.socket_wakeups import SocketWakeups
from phasegraph.server.runs.starting import TURN, Starter
from phasegraph.server.runs.takeover import TakeOver
from phasegraph.server.runs.wakeups import Wakeups
from phasegraph.server.storage.records import RequestRecord
from phasegraph.server.storage.retention import pruner_for
from phasegraph.server.storage.store import RequestStore, forget

__all__ = ["STOPS", "TURN", "RunManager", "manager_of"]

logger = logging.getLogger(__name__)

#: How often the watcher heartbeats local runs, applies stored control flags and looks for orphans.
WATCH_SECONDS = 1.0
#: How long a shutdown waits for a run that holds its last event to commit it.
FINISH_GRACE_SECONDS = 10.0


class RunManager:
    """Owns this process's runs; coordinates with other replicas through the store."""

    def __init__(
        self, settings: ServerSettings, store: RequestStore, checkpointer: BaseCheckpointSaver[str]
    ) -> None:
        self.engine = engine = Engine(settings, store, checkpointer)
        self.settings, self.store, self.checkpointer = settings, store, checkpointer
        driver = Driver(engine)
        self.takeover = TakeOver(engine, driver)
        self.control = Control(engine, driver, self.takeover)
        self.starter = Starter(engine, driver)
        self.followers = Followers(engine)
        #: Create a request of a resolved protocol and start its run (``Starter.start``'s signature).
        self.start = self.starter.start
        self._watcher: asyncio.Task[None] | None = None
        self._stopping: asyncio.Task[None] | None = None

    async def open(self) -> None:
        """Start the event log, the wake-ups, recovery of dead replicas' runs and the watcher."""
        engine = self.engine
        engine.log.start()
        spec = self.settings.checkpointer
        if self.store.engine.dialect.name == "postgresql":
            engine.wakeups = Wakeups(spec, engine.owner, engine.hub.poke, self.control.on_control,
                                     engine.hub.poke_all)  # fmt: skip
        elif spec.startswith("sqlite:"):  # other workers or servers may share the file
            wakeups = SocketWakeups(Path(spec.removeprefix("sqlite:")), engine.owner, engine.hub.poke,
                                    self.control.on_control)  # fmt: skip
            self.store.announce = wakeups.announce
            engine.wakeups = wakeups
        if engine.wakeups is not None:
            engine.wakeups.start()
        await self.takeover.recover_orphans()  # runs a dead predecessor left behind, before any client asks
        self._watcher = asyncio.create_task(self.watch(), name="run-watcher")

    def stop_soon(self) -> None:
        """The process is told to stop: pause local runs now, then end the streams of runs driven elsewhere.

        Called on the stop signal, before the HTTP server waits for open answers to end: a client
        streaming a run here must not keep it going (nor the process waiting for it) until it
        finishes. From now on nothing starts a run here (``ServerStopping``, 503).
        """
        if self._stopping is None:
            self.engine.stopping = True
            self._stopping = asyncio.create_task(self._stop_runs(), name="run-manager-stop")

    async def _stop_runs(self) -> None:
        if self._watcher is not None:  # no run taken over from now on
            self._watcher.cancel()
            await asyncio.gather(self._watcher, return_exceptions=True)
        while self.engine.local:  # a run launched while the others paused pauses too
            await self.shutdown()
        self.engine.hub.close()

    async def close(self) -> None:
        """Pause local runs at their last checkpoint (they stay resumable), commit the log, stop."""
        self.stop_soon()
        assert self._stopping is not None
        await self._stopping
        await self.engine.log.close()
        if self.engine.wakeups is not None:
            self.store.announce = None
            await self.engine.wakeups.close()

    async def watch(self) -> None:
        """Heartbeat this process's runs, apply stored control flags, take over dead replicas' runs."""
        while True:
            try:
                await self.takeover.recover_orphans()
                for record in await self.store.heartbeat(list(self.engine.local), self.engine.owner):
                    self.control.apply(record)
            except Exception:  # a database hiccup must not end the watcher; the next round retries
                logger.exception("run watcher round failed")
            await asyncio.sleep(WATCH_SECONDS)

    async def shutdown(self) -> None:
        """Stop local runs at their last checkpoint; they stay resumable.

        A run whose graph produced its last event ends with it (``FINISH_GRACE_SECONDS`` at most: a
        database that stopped answering must not hold the shutdown forever).
        """
        runs = list(self.engine.local.values())
        for run in runs:
            if not run.finishing:
                self._stop(run)
        finishing = {run.task for run in runs if run.finishing and run.task is not None}
        if finishing:
            _, late = await asyncio.wait(finishing, timeout=FINISH_GRACE_SECONDS)
            for run in runs:
                if run.task in late:
                    self._stop(run)
        await asyncio.gather(*(run.task for run in runs if run.task is not None), return_exceptions=True)

    @staticmethod
    def _stop(run: LocalRun) -> None:
        run.stop = "shutdown"
        if run.task is not None:
            run.task.cancel()

    def protocol(self, protocol_id: str) -> Served:
        """The protocol of that id as this server runs it (its graph on the shared checkpointer)."""
        return self.engine.protocols.get(protocol_id)

    async def fork(self, origin: RequestRecord, checkpoint_id: str) -> RequestRecord:
        """Start a new request on ``origin``'s thread, continuing from ``checkpoint_id``."""
        return await self.starter.fork(origin, checkpoint_id)

    def check_message_size(self, message: str) -> None:
        """Refuse a message longer than this server accepts (413)."""
        self.starter.check_message_size(message)

    async def resume(
        self, record: RequestRecord, phase_index: int | None, answer: Any = None
    ) -> RequestRecord:
        """Continue a request from the end of ``phase_index`` (latest when ``None``; earlier = fork).

        ``answer`` (not ``None``) answers the question the run waits on, an approval: the run goes
        on with ``Command(resume=answer)``.
        """
        return await self.control.resume(record, phase_index, answer)

    async def pause(self, record: RequestRecord, reason: str = "requested") -> None:
        """Ask a running request to stop at its next pause point."""
        await self.control.pause(record, reason)

    async def cancel(self, record: RequestRecord) -> None:
        """Cancel a request for good: its stream ends with ``cancelled`` and it cannot be resumed."""
        await self.control.cancel(record)

    async def roll_back(self, record: RequestRecord) -> None:
        """Cancel a running or paused request, then remove it and the checkpoints it saved.

        Its thread is left as it was before the run (LangGraph's ``rollback``). The removal waits
        until the run stopped, wherever it was driven: a run another worker or replica drives is
        told through the store (as ``cancel`` tells it) and writes nothing once its stop is stored.
        """
        if record.status not in ("running", "paused"):
            raise ConflictError(
                f"request {record.request_id!r} is {record.status}: only a running or paused run can be "
                "rolled back"
            )
        await self.cancel(record)
        async for _ in self.follow(record, 0):  # until its stop is stored
            pass
        await pruner_for(self.checkpointer, requests=False).remove_run(record.thread_key, record.request_id)
        await forget(self.store, record.request_key)

    def follow(self, record: RequestRecord, after_seq: int = 0) -> AsyncIterator[Event]:
        """Every event after ``after_seq``: the stored ones, then live ones until the run stops."""
        return self.followers.follow(record, after_seq)


def manager_of(request: Request) -> RunManager:
    """The app's run manager (every router's routes drive runs through it)."""
    manager: RunManager = request.app.state.manager
    return manager
