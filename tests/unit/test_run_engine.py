"""The run engine in one process, at its races: a driver still releasing its run's Context, a run finishing.

A run ends its segment (``paused``) and then closes what it held open (MCP sessions, stores); clients
may resume or cancel it meanwhile. The engine must keep track of the request's next run, and a
cancel must cancel what the run left, not interrupt the release and be lost. A run whose graph
produced ``final`` is finished, whatever a client or the server does before that is committed.
"""

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import pytest

from phasegraph.nodes.context import RunContext
from phasegraph.nodes.errors import ConflictError
from phasegraph.nodes.events import Event, Final
from phasegraph.server.http.sse import settle_dropped
from phasegraph.server.runs import driving
from phasegraph.server.runs.manager import RunManager
from phasegraph.server.storage.records import RequestRecord

WAIT = 10  # seconds any one step may take; nothing here waits without a bound


class HeldRelease:
    """Makes every run's Context release wait until the test lets it go, one release at a time."""

    def __init__(self) -> None:
        self.started: asyncio.Queue[asyncio.Event] = asyncio.Queue()

    async def hold(self) -> None:
        release = asyncio.Event()
        self.started.put_nowait(release)
        await release.wait()

    async def next(self) -> asyncio.Event:
        """The release that started next (waits for it), to be set by the test."""
        return await asyncio.wait_for(self.started.get(), WAIT)


@pytest.fixture
def held(monkeypatch: pytest.MonkeyPatch) -> HeldRelease:
    held = HeldRelease()

    async def aclose(context: RunContext, outcome: str | None = None) -> None:
        await held.hold()

    monkeypatch.setattr(RunContext, "aclose", aclose)
    return held


async def _paused_while_releasing(
    manager: RunManager, held: HeldRelease
) -> tuple[RequestRecord, asyncio.Event]:
    """A request paused at its first pause point whose driver is still releasing the run's Context."""
    record = await manager.start(
        manager.protocol("triggered_phase"), "Summarise the roadmap", project_id="p", request_id="r",
        thread_id=None, model=None, show_tool_outputs=False,
    )  # fmt: skip
    await manager.pause(record)  # before the first segment ends: it pauses at its first pause point
    release = await held.next()
    current = await manager.store.get(record.request_key)
    assert current is not None and current.status == "paused"
    return current, release


async def _events(manager: RunManager, record: RequestRecord) -> list[str]:
    return [event.type async for event in manager.follow(record)]


async def test_a_driver_releasing_its_run_leaves_the_next_run_of_the_request_registered(
    manager: RunManager, held: HeldRelease
):
    paused, first_release = await _paused_while_releasing(manager, held)
    await manager.resume(paused, None)
    next_release = await held.next()  # the resumed run reached its end and releases in turn
    resumed_run = manager.engine.local[paused.request_key]
    first_release.set()  # the first driver finishes now, after the second run started
    await asyncio.sleep(0.05)
    assert manager.engine.local.get(paused.request_key) is resumed_run
    next_release.set()
    await asyncio.wait_for(asyncio.shield(resumed_run.task), WAIT)
    assert paused.request_key not in manager.engine.local
    assert (await _events(manager, paused))[-1] == "final"


async def test_a_cancel_while_the_paused_run_releases_its_context_cancels_the_request(
    manager: RunManager, held: HeldRelease
):
    paused, release = await _paused_while_releasing(manager, held)
    cancelling = asyncio.create_task(manager.cancel(paused))
    await asyncio.sleep(0.05)
    release.set()  # the release is not interrupted: the cancel waits for it
    await asyncio.wait_for(cancelling, WAIT)
    current = await manager.store.get(paused.request_key)
    assert current is not None and current.status == "cancelled"
    assert (await _events(manager, paused))[-2:] == ["paused", "cancelled"]


async def cancelled_elsewhere(manager: RunManager, record: RequestRecord) -> None:
    """What a replica that does not drive the run does: store the flag; this one hears and applies it."""
    await manager.store.request_control(record.request_key, cancel_requested=True)
    await manager.control.on_control(record.request_key)


@pytest.mark.parametrize(
    "what_happens",
    ["client hangs up", "client hangs up and cancels", "cancel", "another replica cancels", "shutdown"],
)
async def test_a_run_whose_graph_produced_final_ends_completed_whatever_happens_meanwhile(
    manager: RunManager, monkeypatch: pytest.MonkeyPatch, what_happens: str
):
    """The graph produced ``final``; its driver holds it until the graph has saved its last checkpoint.

    A client that hangs up right then (its stream pauses the run, or cancels it as a LangGraph API
    client may ask), a cancel or a server shutdown in that window must not stop the run: it ends
    ``completed`` with its ``final``, as it would a moment later.
    """
    produced, gate = asyncio.Event(), asyncio.Event()
    graph_stream = driving.stream_graph

    async def held_after_final(*args: Any, **kwargs: Any) -> AsyncIterator[Event]:
        async for event in graph_stream(*args, **kwargs):
            yield event
            if isinstance(event, Final):  # the driver has it: the run is at the race point
                produced.set()
                await gate.wait()

    monkeypatch.setattr(driving, "stream_graph", held_after_final)
    record = await manager.start(
        manager.protocol("triggered_phase"), "Summarise the roadmap", project_id="p", request_id="r",
        thread_id=None, model=None, show_tool_outputs=False,
    )  # fmt: skip
    await asyncio.wait_for(produced.wait(), WAIT)
    driver = manager.engine.local[record.request_key].task
    assert driver is not None
    current = await manager.store.get(record.request_key)
    assert current is not None and current.status == "running"  # final is not committed yet
    actions = {
        "client hangs up": lambda: settle_dropped(manager, current, "pause"),
        "client hangs up and cancels": lambda: settle_dropped(manager, current, "cancel"),
        "cancel": lambda: manager.cancel(current),
        "another replica cancels": lambda: cancelled_elsewhere(manager, current),
        "shutdown": manager.shutdown,
    }
    read, store_get = asyncio.Event(), manager.store.get

    async def get_and_tell(request_key: str) -> RequestRecord | None:
        """A hung-up stream reads the request first, then acts at once on what it read."""
        found = await store_get(request_key)
        read.set()
        return found

    monkeypatch.setattr(manager.store, "get", get_and_tell)
    acting = asyncio.create_task(actions[what_happens]())
    if what_happens.startswith("client"):
        await asyncio.wait_for(read.wait(), WAIT)  # it read the request and acted on it before this wakes
    elif what_happens == "another replica cancels":
        await asyncio.wait_for(acting, WAIT)  # the flag is stored and applied here: nothing waits on the run
    else:
        await asyncio.sleep(0)  # it acted in its first step
    gate.set()  # only now does the graph go on to its end
    with contextlib.suppress(ConflictError):  # a cancel of a run that completed is refused
        await asyncio.wait_for(acting, WAIT)
    await asyncio.wait_for(asyncio.gather(driver, return_exceptions=True), WAIT)
    ended = await manager.store.get(record.request_key)
    assert ended is not None and ended.status == "completed"
    events = await _events(manager, record)
    assert events[-1] == "final" and "paused" not in events and "cancelled" not in events
