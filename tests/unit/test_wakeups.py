"""Replicas on Postgres wake each other: a commit or a control request notifies the listeners."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator
from uuid import uuid4

import pytest

from phasegraph.nodes.events import TextChunk
from phasegraph.server.runs.wakeups import Wakeups
from phasegraph.server.storage.records import RequestRecord
from phasegraph.server.storage.store import Append, RequestStore

URL = os.environ.get("PHASEGRAPH_TEST_POSTGRES_URL", "")
pytestmark = pytest.mark.skipif(not URL, reason="PHASEGRAPH_TEST_POSTGRES_URL unset")


@pytest.fixture
async def store() -> AsyncIterator[RequestStore]:
    store = RequestStore.for_checkpointer(URL)
    await store.setup()
    yield store
    await store.close()


async def _running_request(store: RequestStore) -> RequestRecord:
    """A request replica A drives."""
    name = f"r-{uuid4().hex}"  # a thread of its own: the shared database holds every earlier test's runs
    record = RequestRecord(request_id=name, project_id="p", protocol="triggered_phase",
                           thread_id=name, status="running", owner="replica-a")  # fmt: skip
    await store.create(record)
    return record


async def _commit_one_event(store: RequestStore, record: RequestRecord) -> None:
    """Replica A commits an event of its run, as its log's batch writer does."""
    event = TextChunk(
        request_id=record.request_id, project_id="p", protocol="triggered_phase", seq=1, text="x"
    )
    await store.write_batch([Append(record.request_key, [event], guarded=True)], "replica-a")


async def _listening(owner: str, woken: asyncio.Queue[tuple[str, str]]) -> Wakeups:
    async def on_control(key: str) -> None:
        woken.put_nowait(("control", key))

    wakeups = Wakeups(URL, owner, lambda key: woken.put_nowait(("events", key)), on_control,
                      lambda: woken.put_nowait(("reconnected", "")))  # fmt: skip
    wakeups.start()
    assert await asyncio.wait_for(woken.get(), 10) == ("reconnected", "")
    assert wakeups.listening
    return wakeups


async def test_another_replicas_commit_and_control_requests_wake_the_listener(store: RequestStore):
    record = await _running_request(store)
    woken: asyncio.Queue[tuple[str, str]] = asyncio.Queue()
    wakeups = await _listening("replica-b", woken)
    try:
        await _commit_one_event(store, record)
        assert await asyncio.wait_for(woken.get(), 10) == ("events", record.request_key)
        await store.request_control(record.request_key, pause_requested=True)
        assert await asyncio.wait_for(woken.get(), 10) == ("control", record.request_key)
    finally:
        await wakeups.close()


async def test_a_replica_is_not_woken_by_its_own_commits(store: RequestStore):
    record = await _running_request(store)
    woken: asyncio.Queue[tuple[str, str]] = asyncio.Queue()
    wakeups = await _listening("replica-a", woken)
    try:
        await _commit_one_event(store, record)
        await store.request_control(record.request_key, cancel_requested=True)
        # The control request arrives (notifications keep their order), the own commit before it did not.
        assert await asyncio.wait_for(woken.get(), 10) == ("control", record.request_key)
    finally:
        await wakeups.close()
