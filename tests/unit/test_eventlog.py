"""The batched event log and the live hub: durable before visible, batches, ownership, slow followers."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from phasegraph.nodes.events import Event, TextChunk
from phasegraph.server.runs.eventlog import EventLog, Superseded
from phasegraph.server.runs.live import LiveHub
from phasegraph.server.storage.records import RequestRecord
from phasegraph.server.storage.store import Append, RequestStore


def _text(record: RequestRecord, seq: int) -> Event:
    return TextChunk(request_id=record.request_id, project_id="p", protocol="triggered_phase", seq=seq,
                     text=f"chunk {seq} ")  # fmt: skip


def _record(name: str, owner: str = "me") -> RequestRecord:
    return RequestRecord(request_id=name, project_id="p", protocol="triggered_phase", thread_id=name,
                         status="running", owner=owner)  # fmt: skip


class CountingStore(RequestStore):
    """A real store that counts its batch transactions."""

    batches: list[int]

    async def write_batch(self, items, owner=None):  # type: ignore[no-untyped-def]
        self.batches.append(sum(len(i.events) for i in items))
        return await super().write_batch(items, owner)


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[CountingStore]:
    store = CountingStore.for_checkpointer(f"sqlite:{tmp_path / 'log.db'}")
    assert isinstance(store, CountingStore)
    store.batches = []
    await store.setup()
    yield store
    await store.close()


async def test_an_event_is_in_the_store_before_any_follower_sees_it(store: CountingStore, tmp_path: Path):
    hub = LiveHub()
    log = EventLog(store, hub, "me")
    record = _record("r1")
    await store.create(record)
    subscription = hub.subscribe(record.request_key)
    committed_when_shown: list[list[int]] = []
    show = subscription.push

    def push(events: list[Event]) -> None:
        # What another connection reads from the database at the moment the event is handed over.
        with sqlite3.connect(tmp_path / "log.db") as db:
            rows = db.execute("SELECT seq FROM phasegraph_events ORDER BY seq").fetchall()
        committed_when_shown.append([seq for (seq,) in rows])
        show(events)

    subscription.push = push  # type: ignore[method-assign]
    log.start()
    try:
        await log.write(record.request_key, [_text(record, 1)])
        await log.write(record.request_key, [_text(record, 2)], status="completed")
    finally:
        await log.close()
    assert committed_when_shown == [[1], [1, 2]]
    assert [e.seq for e in subscription.take()] == [1, 2]
    current = await store.get(record.request_key)
    assert current is not None and current.status == "completed" and current.last_seq == 2


async def test_many_runs_share_few_transactions(store: CountingStore):
    log = EventLog(store, LiveHub(), "me")
    records = [_record(f"r{i}") for i in range(50)]
    for record in records:
        await store.create(record)
    log.start()
    try:
        # Fifty runs emit ten events each, as fast as they can: the writer batches across runs.
        futures = [await log.append(r.request_key, [_text(r, seq)]) for seq in range(1, 11) for r in records]
        await asyncio.gather(*futures)
    finally:
        await log.close()
    assert sum(store.batches) == 500
    assert len(store.batches) < 50, store.batches  # not one transaction per event
    for record in records:
        assert [e.seq for e in await store.events_after(record.request_key, 0)] == list(range(1, 11))


async def test_a_run_taken_over_elsewhere_is_refused_and_the_others_are_written(store: CountingStore):
    hub = LiveHub()
    log = EventLog(store, hub, "me")
    mine, taken = _record("mine"), _record("taken")
    await store.create(mine)
    await store.create(taken)
    await store.update(taken.request_key, owner="another-replica")
    followed = hub.subscribe(taken.request_key)
    log.start()
    try:
        refused = await log.append(taken.request_key, [_text(taken, 1)])
        accepted = await log.append(mine.request_key, [_text(mine, 1)])
        await accepted
        with pytest.raises(Superseded):
            await refused
    finally:
        await log.close()
    assert await store.events_after(taken.request_key, 0) == []
    assert followed.take() == []  # nothing refused is ever shown
    assert [e.seq for e in await store.events_after(mine.request_key, 0)] == [1]


async def test_a_conflicting_request_does_not_cost_the_batch_its_other_events(store: CountingStore):
    log = EventLog(store, LiveHub(), "me")
    one, two = _record("one"), _record("two")
    await store.create(one)
    await store.create(two)
    await store.write_batch([Append(two.request_key, [_text(two, 1)])])  # seq 1 of "two" exists already
    log.start()
    try:
        futures = [await log.append(one.request_key, [_text(one, 1)]),
                   await log.append(two.request_key, [_text(two, 1)])]  # fmt: skip
        results = await asyncio.gather(*futures, return_exceptions=True)
    finally:
        await log.close()
    assert results[0] is None and isinstance(results[1], Exception)
    assert [e.seq for e in await store.events_after(one.request_key, 0)] == [1]


def test_a_slow_follower_is_dropped_to_replay_instead_of_growing_its_queue():
    hub = LiveHub(limit=5)
    slow = hub.subscribe("p/r")
    events = [_text(_record("r"), seq) for seq in range(1, 9)]
    slow.push(events[:5])
    assert not slow.dropped and len(slow.events) == 5
    slow.push(events[5:])
    assert slow.dropped and not slow.events  # it reads the store from where it was instead
