"""Pausing, resuming and cancelling runs, wherever they are driven.

A run driven here is told directly (its driver looks at its next pause point, or its task is
cancelled). A run another replica drives is asked through the store: that replica hears at once
(Postgres NOTIFY) or at its next watch round. A run nobody drives any more is taken over first.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from langgraph.types import Command, StateSnapshot

from phasegraph.nodes.approval import waits_for
from phasegraph.nodes.errors import ConflictError
from phasegraph.nodes.events import Cancelled
from phasegraph.server.runs.driving import Driver
from phasegraph.server.runs.engine import SUPERSEDED, Engine
from phasegraph.server.runs.recovery import unsaved_turn
from phasegraph.server.runs.takeover import TakeOver
from phasegraph.server.storage.checkpoints import end_of_phase, thread_config
from phasegraph.server.storage.records import RequestRecord


class Control:
    """What clients (and other replicas, through the store) ask of a request's run."""

    def __init__(self, engine: Engine, driver: Driver, takeover: TakeOver) -> None:
        self.engine, self.driver, self.takeover = engine, driver, takeover

    async def resume(
        self, record: RequestRecord, phase_index: int | None, answer: Any = None
    ) -> RequestRecord:
        """Continue a request from the end of ``phase_index`` (latest when ``None``); earlier = fork.

        A run waiting on a question (an approval) goes on only with ``answer``, as
        ``Command(resume=answer)``; an answer to a run that asks nothing is refused (409).
        """
        engine = self.engine
        engine.refuse_when_stopping()
        if record.status == "cancelled" or record.cancel_requested:
            raise ConflictError(f"request {record.request_id!r} was cancelled and cannot be resumed")
        if record.status == "superseded":
            raise ConflictError(
                f"request {record.request_id!r} was superseded: a later request on thread "
                f"{record.thread_id!r} went on from where it paused; follow the thread's latest request, "
                "or fork a checkpoint"
            )
        if record.status == "running":
            if not engine.orphaned(record):
                raise ConflictError(f"request {record.request_id!r} is still running")
            # Its server died mid-run: record that (paused, crashed) and resume like any pause.
            if not await self.takeover.take_over(record, "pause"):
                raise ConflictError(f"request {record.request_id!r} changed state meanwhile; try again")
            record = await engine.current(record)
        served = engine.protocols.get(record.protocol)
        graph_input: Command[Any] | dict[str, Any] | None = None
        latest = await served.graph.aget_state(thread_config(record.thread_key))
        if phase_index is None and answer is None and (turn := unsaved_turn(record, latest)) is not None:
            graph_input = turn  # its server died before it saved anything: the turn runs from its start
        elif phase_index is None:
            graph_input = answered(record, latest, answer)
        elif answer is not None:  # a question an earlier phase's checkpoint asked is answered no more
            raise ConflictError(
                "an answer goes to the question the run waits on now: send it without resumeFromPhaseIndex"
            )
        if graph_input is not None:  # the latest checkpoint: the question's (answered) or the turn's start
            snapshot, fork = latest, False
        else:
            snapshot, fork = await end_of_phase(served.graph, record.thread_key, phase_index)
        if not await engine.store.claim(record, engine.owner, (record.status,)):
            raise ConflictError(f"request {record.request_id!r} changed state meanwhile; try again")
        await self.driver.restart(served, record, snapshot, phase_index=phase_index, fork=fork,
                                  graph_input=graph_input)  # fmt: skip
        return record

    async def pause(self, record: RequestRecord, reason: str = "requested") -> None:
        """Ask a running request to stop at its next pause point."""
        engine = self.engine
        if record.status != "running":
            raise ConflictError(f"request {record.request_id!r} is {record.status}, not running")
        run = engine.local.get(record.request_key)
        if run is not None and run.finishing:
            raise ConflictError(f"request {record.request_id!r} is finishing: its run produced its end")
        if run is not None:  # driven here: the driver looks at its next pause point
            run.pause = run.pause or reason
        elif engine.orphaned(record):  # nobody drives it: pause it here and now
            if not await self.takeover.take_over(record, "pause"):
                raise ConflictError(f"request {record.request_id!r} changed state meanwhile; try again")
        else:  # another replica drives it: it hears at once (Postgres) or at its next watch round
            await engine.store.request_control(record.request_key, pause_requested=True)

    async def cancel(self, record: RequestRecord) -> None:
        """Cancel a request for good: its stream ends with ``cancelled`` and it cannot be resumed."""
        engine = self.engine
        if record.status == "cancelled":
            return
        if record.status in ("completed", "failed", "superseded"):
            raise ConflictError(f"request {record.request_id!r} already {record.status}; nothing to cancel")
        run = engine.local.get(record.request_key)
        if run is not None and run.task is not None and (run.ending or run.finishing):
            # Its run produced its last event, or its driver wrote how the run ends and is only
            # releasing what the run held: let it finish, then cancel what it left (a paused run) or
            # refuse (a finished one).
            await asyncio.shield(run.task)
            await self.cancel(await engine.current(record))
        elif run is not None and run.task is not None:
            run.task.cancel()  # the driver records the cancellation
            with contextlib.suppress(asyncio.CancelledError):
                await run.task
        elif record.status == "running" and not engine.orphaned(record):  # its driver (elsewhere) stops it
            await engine.store.request_control(record.request_key, cancel_requested=True)
        else:  # paused, finished or orphaned: nobody else will say it
            served = engine.protocols.get(record.protocol)
            values = await served.values(record.thread_key)
            await engine.emit(served, record, Cancelled, values, status="cancelled", guarded=False)

    async def on_control(self, request_key: str) -> None:
        """Another replica stored a pause or cancel request: apply it if the run is driven here."""
        if (
            request_key in self.engine.local
            and (record := await self.engine.store.get(request_key)) is not None
        ):
            self.apply(record)

    def apply(self, record: RequestRecord) -> None:
        """Apply the control flags stored on a request to its run, when it is driven here."""
        run = self.engine.local.get(record.request_key)
        if run is None or run.task is None:
            return
        if record.status == "cancelled" or record.cancel_requested:
            if not run.finishing:  # a run that produced its last event ends with it, as cancel() lets it
                run.task.cancel()
        elif record.owner != self.engine.owner:  # another replica took the run over (this one looked dead)
            run.stop = SUPERSEDED
            run.task.cancel()
        elif record.pause_requested:
            run.pause = run.pause or "requested"


#: The answers a 409 names.
ANSWERS = (
    '{"answer": "approve"}, {"answer": {"decision": "edit", "args": {...}}} or '
    '{"answer": {"decision": "reject", "reason": "..."}}'
)


def answered(record: RequestRecord, snapshot: StateSnapshot, answer: Any) -> Command[Any] | None:
    """The input that resumes a request from its latest checkpoint, ``snapshot``: its answer, if it asks.

    A run waiting in an ``interrupt`` (an approval before a tool call, a question) goes on only
    with an answer: without one it would ask again at once (409 says what to send). An answer to a
    run that waits for none is refused (409): it would be read as nothing.
    """
    waiting = [item.value for item in snapshot.interrupts]
    if answer is None:
        if waiting:
            raise ConflictError(f"request {record.request_id!r} {waits_for(waiting[0])}: resume it with an "
                                f"answer ({ANSWERS})")  # fmt: skip
        return None
    if not waiting:
        raise ConflictError(
            f"request {record.request_id!r} waits for no answer (it is {record.status} with no question "
            "asked): resume it without one"
        )
    return Command(resume=answer)
