"""Taking over runs whose driver died: at start-up, from the watcher, or when a client acts on one.

A replica that dies mid-run leaves its requests ``running``. Whoever takes one over first settles
what the dead driver left queued, then becomes its owner in the store (one replica wins), and
pauses it (``paused``, reason ``crashed``) or resumes it from its last checkpoint.
"""

from __future__ import annotations

import logging
import time
from functools import partial
from typing import Literal

from phasegraph.nodes.events import Cancelled, ErrorEvent, Event, EventBase, Final, Paused
from phasegraph.server.runs.driving import Driver
from phasegraph.server.runs.engine import Engine
from phasegraph.server.runs.recovery import is_orphaned, owner_gone, unsaved_turn
from phasegraph.server.storage.checkpoints import can_go_on, thread_config
from phasegraph.server.storage.records import RequestRecord, Status

logger = logging.getLogger(__name__)

CANNOT_CONTINUE = (
    "the server driving this run stopped before the run saved a point to continue from; "
    "send the message again"
)


class TakeOver:
    """Becomes the driver of orphaned runs."""

    def __init__(self, engine: Engine, driver: Driver) -> None:
        self.engine, self.driver = engine, driver

    async def take_over(self, record: RequestRecord, action: Literal["pause", "resume"]) -> bool:
        """Become the driver of an orphaned run and pause or resume it; False when another replica won.

        Followers then end cleanly (``paused`` with reason ``crashed``) or see the run go on
        (``resumed`` naming the events it replaces). A run that had in fact ended gets its
        status; one that cannot go on from its checkpoint ends with an ``error``.
        """
        engine = self.engine
        await engine.log.barrier()  # a local driver's queued writes are settled before the owner changes
        if not await engine.store.take_over(record, engine.owner):
            return False
        record = await engine.current(record)
        logger.warning("request %s: its server stopped mid-run; this replica will %s it",
                       record.request_id, action)  # fmt: skip
        events = await engine.store.events_after(record.request_key, max(record.last_seq - 1, 0))
        if events and (ended := _status_after(events[-1])):  # only the status was not written
            await engine.log.write(record.request_key, [], status=ended)
            return True
        served = engine.protocols.get(record.protocol)
        snapshot = await served.graph.aget_state(thread_config(record.thread_key))
        turn = unsaved_turn(record, snapshot)  # a turn that saved nothing re-runs from its message
        if not can_go_on(snapshot) and turn is None:  # saved writes of a step whose checkpoint was lost go on
            await engine.stop(served, record, "failed", ErrorEvent, kind="crashed", message=CANNOT_CONTINUE)
        elif action == "pause":
            await engine.stop(served, record, "paused", Paused, reason="crashed")
        else:
            await self.driver.restart(served, record, snapshot, graph_input=turn)
        return True

    async def recover_orphans(self) -> None:
        """Take over every run whose driver died (at start-up, then from the watcher)."""
        engine = self.engine
        stale_after = engine.settings.orphan_after_seconds
        gone = partial(owner_gone, me=engine.owner)
        for record in await engine.store.maybe_orphaned(time.time() - stale_after, gone):
            if record.request_key in engine.local:
                continue
            # Ours with no task left (its driver failed) counts once its heartbeat is stale.
            mine_but_lost = record.owner == engine.owner and is_orphaned(
                record.model_copy(update={"owner": None}), engine.owner, stale_after
            )
            if engine.orphaned(record) or mine_but_lost:
                try:
                    await self.take_over(record, engine.settings.on_orphan)
                except Exception:  # one broken request must not stop recovering the others
                    logger.exception("request %s could not be taken over", record.request_id)


def _status_after(event: Event) -> Status | None:
    """The status a request has once ``event`` is its last (``None``: the run was still going)."""
    statuses: dict[type[EventBase], Status] = {
        Final: "completed",
        ErrorEvent: "failed",
        Cancelled: "cancelled",
        Paused: "paused",
    }
    return next((status for kind, status in statuses.items() if isinstance(event, kind)), None)
