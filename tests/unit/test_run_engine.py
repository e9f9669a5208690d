"""The run engine in one process: a driver that is still releasing its run's Context after the run paused.

A run ends its segment (``paused``) and then closes what it held open (MCP sessions, stores); clients
may resume or cancel it meanwhile. The engine must keep track of the request's next run, and a
cancel must cancel what the run left, not interrupt the release and be lost.
"""

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from langgraph.checkpoint.memory import InMemorySaver

from phasegraph.nodes.context import RunContext
from phasegraph.nodes.settings import ServerSettings
from phasegraph.server.runs.manager import RunManager
from phasegraph.server.storage.records import RequestRecord
from phasegraph.server.storage.store import RequestStore

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

    async def aclose(context: RunContext) -> None:
        await held.hold()

    monkeypatch.setattr(RunContext, "aclose", aclose)
    return held


@pytest.fixture
async def manager(workspace: Path) -> AsyncIterator[RunManager]:
    settings = ServerSettings(checkpointer="memory", workspace=str(workspace))
    store = RequestStore.for_checkpointer("memory")
    await store.setup()
    manager = RunManager(settings, store, InMemorySaver())
    await manager.open()
    try:
        yield manager
    finally:
        await manager.close()
        await store.close()


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
