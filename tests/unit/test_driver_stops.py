"""A driven run whose graph stops by itself with nothing left to run ends; it never goes on with nothing.

Routes refuse to go on from a finished thread (tests/server/test_resume_refusals.py), but the driver
must not rely on that: a run started to go on (no input) from a thread whose graph already finished
used to go on with nothing again and again, and its thread stayed busy for good.
"""

import asyncio

from phasegraph.nodes.events import ErrorEvent
from phasegraph.server.runs.manager import RunManager
from phasegraph.server.storage.records import RequestRecord

WAIT = 10  # hang guard for one run: before the fix the second run never ended


async def _ended(manager: RunManager, record: RequestRecord) -> list[str]:
    """The request's event types once its run stopped (waits for that, within the hang guard)."""

    async def follow() -> list[str]:
        return [event.type async for event in manager.follow(record)]

    return await asyncio.wait_for(follow(), WAIT)


async def test_a_run_going_on_from_a_finished_thread_ends_and_frees_the_thread(manager: RunManager):
    served = manager.protocol("triggered_phase")

    async def start(request_id: str, **kwargs: object) -> RequestRecord:
        return await manager.start(served, "Summarise the roadmap", project_id="p", request_id=request_id,
                                   thread_id="t", model=None, show_tool_outputs=False, **kwargs)  # fmt: skip

    assert (await _ended(manager, await start("first")))[-1] == "final"
    going_on = await start("going-on", graph_input=None)  # no input: on from the finished checkpoint

    assert await _ended(manager, going_on) == ["error"]
    [error] = await manager.store.events_after(going_on.request_key, 0)
    assert isinstance(error, ErrorEvent) and error.kind == "conflict"
    assert "nothing left to run" in error.message
    current = await manager.store.get(going_on.request_key)
    assert current is not None and current.status == "failed"
    assert not await manager.store.thread_busy(going_on.thread_key)
    assert (await _ended(manager, await start("next")))[-1] == "final"  # the thread takes turns again
