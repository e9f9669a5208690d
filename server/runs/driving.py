"""Driving a run: segment by segment between pause points, every event committed before it is shown.

Events are queued on the batched event log as the graph emits them; the terminal event (final or
error) is held until the graph has saved its last checkpoint, then committed with the request's
final status. Between segments the driver looks for a pause it was asked for, or a stop the run
asked for (LangGraph API ``interrupt_before``/``interrupt_after``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

from langchain_core.runnables import RunnableConfig

from phasegraph.graphs.run import stream_graph
from phasegraph.nodes.context import RunContext
from phasegraph.nodes.events import Cancelled, ErrorEvent, Event, Final, Paused, Resumed
from phasegraph.nodes.trace import TraceEntry
from phasegraph.server.runs.engine import SUPERSEDED, Engine, LocalRun
from phasegraph.server.runs.eventlog import Superseded
from phasegraph.server.runs.protocols import Served
from phasegraph.server.runs.recovery import replaced_from
from phasegraph.server.runs.stops import RunStops
from phasegraph.server.storage.checkpoints import can_go_on, thread_config
from phasegraph.server.storage.records import RequestRecord, Status

logger = logging.getLogger(__name__)

DRIVER_FAILED = "the server failed while driving this run (see its log); send the message again"
#: Why a run whose graph stopped with nothing left to run (and no ``final``) ends as failed.
NOTHING_LEFT = "the run stopped with nothing left to run and no answer; send a new message"


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


class Driver:
    """Launches runs on this process and drives each to its end, its pause or its cancellation."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def launch(
        self, served: Served, record: RequestRecord, graph_input: Any, config: RunnableConfig,
        context: RunContext | None = None,
    ) -> None:  # fmt: skip
        """Drive ``record``'s run from ``graph_input`` (``None``: on from the checkpoint) in a task.

        ``context``: the run's Context when the caller made it already (else it is made from the record).
        """
        run = LocalRun()
        run.task = asyncio.create_task(self._drive(run, served, record, graph_input, config, context),
                                       name=f"run-{record.request_key}")  # fmt: skip
        self.engine.local[record.request_key] = run

    async def restart(
        self, served: Served, record: RequestRecord, snapshot: Any, *, phase_index: int | None = None,
        fork: bool = False, graph_input: Any = None,
    ) -> None:  # fmt: skip
        """Emit ``resumed`` and drive the run on from ``snapshot`` (a claimed request).

        ``graph_input`` is ``None`` (on from the checkpoint), the ``Command`` answering its question, or a
        turn's input (a turn that saved nothing before a crash, run again from its start).

        Work a crash interrupted after the checkpoint is done again, so the event names the seq
        from which the earlier attempt's events are replaced.
        """
        events = await self.engine.store.events_after(record.request_key, 0)
        last = events[-1] if events else None
        crashed = isinstance(last, Paused) and last.reason == "crashed"
        # A run that stopped at a question (an interrupt) repeats nothing: the step that asked emitted
        # only the question, and it goes on from the answer.
        asked = isinstance(last, Paused) and last.reason == "interrupt"
        # a thread with no checkpoint yet (a first turn that saved nothing): all of the attempt is redone
        replaces = None if fork or asked else replaced_from(events, (snapshot.metadata or {}).get("step", -2))
        checkpoint_id = (snapshot.config or {}).get("configurable", {}).get("checkpoint_id", "")
        reason = "crashed" if crashed or replaces is not None else "requested"
        last_seq = events[-1].seq if events else 0
        resumed = await self.engine.emit(served, record, Resumed, snapshot.values, seq=last_seq + 1,
                                         checkpoint_id=checkpoint_id, from_phase_index=phase_index, fork=fork,
                                         replaces_from_seq=replaces, reason=reason)  # fmt: skip
        config = thread_config(record.thread_key, checkpoint_id if fork else None)
        self.launch(served, record.model_copy(update={"last_seq": resumed.seq}), graph_input, config)

    async def _drive(
        self, run: LocalRun, served: Served, record: RequestRecord, graph_input: Any, config: RunnableConfig,
        given: RunContext | None,
    ) -> None:  # fmt: skip
        engine, key = self.engine, record.request_key
        try:
            context = given or served.context(record)
            # the conversation as the client names it; a run launched without a Context goes on from a
            # checkpoint (a resume, a takeover, a fork)
            context.run_trace(record.thread_id, resumed=given is None)
            run.queued = record.last_seq
            stopped: str | None = None
            try:  # how the run's trace ends when no final or error of its own settled it
                stopped = await self._segments(run, served, record, graph_input, config, context)
            except asyncio.CancelledError:
                stopped = _stopped(run)
                raise
            except Superseded:
                stopped = "superseded"
                raise
            except Exception:
                stopped = "failed"
                raise
            finally:
                await context.aclose(stopped)  # the run ended or paused here: what it held open is released
        except asyncio.CancelledError:
            done = record.model_copy(update={"last_seq": _queued(run, record)})
            if run.ending:
                pass  # its last event is queued already (final, error, paused): that is how it ends
            elif run.stop == SUPERSEDED:
                logger.warning("request %s: another replica took it over; stopped here", record.request_id)
            elif run.stop == "shutdown":
                await engine.stop(served, done, "paused", Paused, reason="shutdown")
            else:
                await engine.stop(served, done, "cancelled", Cancelled)
        except Superseded:
            logger.warning("request %s: another replica took it over; stopped here", record.request_id)
        except Exception:  # the store or the server failed, not the graph: end the run visibly
            logger.exception("request %s: its driver failed", record.request_id)
            with contextlib.suppress(Exception):  # the store may be what failed; recovery retries
                done = record.model_copy(update={"last_seq": _queued(run, record)})
                await engine.stop(served, done, "failed", ErrorEvent, kind="internal", message=DRIVER_FAILED)
        finally:
            if engine.local.get(key) is run:  # a resume may have launched the request's next run already
                del engine.local[key]
            if (unfollowed := engine.fresh.pop(key, None)) is not None:
                engine.hub.unsubscribe(key, unfollowed)
            engine.hub.poke(key)  # followers look at the store: the run may have stopped without a word

    async def _segments(
        self, run: LocalRun, served: Served, record: RequestRecord, graph_input: Any, config: RunnableConfig,
        context: RunContext,
    ) -> str | None:  # fmt: skip
        """Run the graph segment by segment (pause points between) until it ends or pauses.

        Returns ``failed`` for a run that stopped with nothing left to run, else ``None``.
        """
        engine, key, traces = self.engine, record.request_key, _Buffer()
        written: asyncio.Future[None] | None = None
        stops = served.stops(record.options)
        while True:
            held: list[Event] = []  # the terminal event and anything after it
            # Checkpoints name the request that made them (the LangGraph API's run_id): a run's own
            # checkpoints are its values and updates there.
            config = {**config, "metadata": {**config.get("metadata", {}), "run_id": record.request_id}}
            async for event in stream_graph(served.spec, served.graph, graph_input, context, config,
                                            traces=traces, seq_start=_queued(run, record),
                                            durability=engine.settings.durability,
                                            interrupts=stops.interrupts()):  # fmt: skip
                if held or isinstance(event, Final | ErrorEvent):
                    held.append(event)
                    run.finishing = True
                    continue
                if written is not None and written.done():
                    written.result()  # a failed write (superseded, database down) stops the run here
                written = await engine.log.append(key, [event], traces.drain())
                run.queued = event.seq
            if held:
                ended: Status = "completed" if any(isinstance(e, Final) for e in held) else "failed"
                written = await engine.log.append(key, held, traces.drain(), status=ended)
                run.queued, run.ending = held[-1].seq, True
                await asyncio.shield(written)
                return None
            if written is not None:  # at a pause point clients have been shown the whole segment
                await asyncio.shield(written)
            reason, run.pause = run.pause, None
            reason = reason or await self._stopped_at(served, record, stops)
            if reason is not None:
                done = record.model_copy(update={"last_seq": _queued(run, record)})
                if reason == NOTHING_LEFT:
                    await engine.stop(served, done, "failed", ErrorEvent, kind="conflict", message=reason,
                                      traces=traces.drain())  # fmt: skip
                    return "failed"
                await engine.stop(served, done, "paused", Paused, reason=reason, traces=traces.drain())
                return None
            graph_input, config = None, thread_config(record.thread_key)  # past the pause point

    async def _stopped_at(self, served: Served, record: RequestRecord, stops: RunStops) -> str | None:
        """Why the run cannot simply go on where its segment ended (``None``: a pause point it passes).

        The graph stops by itself at a stop the run asked for (LangGraph API ``interrupt_before`` /
        ``interrupt_after``) or at a question it asks (an ``interrupt``): both pause the run. A graph
        that stopped with nothing left to run and no ``final`` ends it: going on would run nothing,
        again and again, with the thread busy for good.
        """
        snapshot = await served.graph.aget_state(thread_config(record.thread_key))
        if not can_go_on(snapshot):
            return NOTHING_LEFT
        if snapshot.interrupts or (stops and await stops.reached(served.graph, snapshot)):
            return "interrupt"
        return None


def _queued(run: LocalRun, record: RequestRecord) -> int:
    """The seq of the last event the run's driver queued (the record's when it queued none yet)."""
    return run.queued if run.queued is not None else record.last_seq


def _stopped(run: LocalRun) -> str:
    """How a cancelled driver's run ends: paused (the server stopping), taken over, or cancelled."""
    return "paused" if run.stop == "shutdown" else "superseded" if run.stop == SUPERSEDED else "cancelled"
