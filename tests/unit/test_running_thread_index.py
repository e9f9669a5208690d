"""The store keeps one running request per thread (revision 0008's unique index over running requests).

Concurrent inserts and claims on one thread: exactly one wins, every other gets :class:`ThreadBusy`, on
sqlite and on Postgres. A database that already holds several running requests of one thread (what the
race left before the index) keeps its newest running and pauses the others, so the index can be built and
nothing is lost.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from uuid import uuid4

import pytest
import sqlalchemy as sa

from phasegraph.server.storage.migrate import alembic_config, upgrade_schema
from phasegraph.server.storage.records import RequestExists, RequestRecord, requests_table
from phasegraph.server.storage.store import RequestStore


@pytest.fixture(params=["sqlite", "postgres"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[RequestStore]:
    url = (
        f"sqlite:{tmp_path / 'state.db'}"
        if request.param == "sqlite"
        else request.getfixturevalue("fresh_postgres")
    )
    made = RequestStore.for_checkpointer(url)
    await made.setup()
    yield made
    await made.close()


def _request(thread_id: str, status: str = "running", name: str | None = None) -> RequestRecord:
    return RequestRecord(request_id=name or f"r-{uuid4().hex[:8]}", project_id="p", protocol="unified",
                         thread_id=thread_id, status=status, owner="me")  # fmt: skip


async def _outcomes(*calls) -> list[str]:
    results = await asyncio.gather(*calls, return_exceptions=True)
    return sorted("won" if r in (None, True) else type(r).__name__ for r in results)


async def test_of_runs_started_at_once_on_one_thread_exactly_one_is_stored(store: RequestStore):
    outcomes = await _outcomes(*(store.create(_request("t1")) for _ in range(6)))
    assert outcomes == ["ThreadBusy"] * 5 + ["won"]
    with pytest.raises(RequestExists):  # a taken request id is still told apart from a busy thread
        await store.create(_request("t1", name=(await store.threads("t1", None))[0].request_id))
    await store.create(_request("t2"))  # other threads are free
    await store.create(_request("t1", status="paused"))  # requests that are not running are not counted


async def test_a_paused_request_resumes_only_while_its_thread_runs_nothing_else(store: RequestStore):
    """Two resumes of a paused request and a new turn on its thread, at once: exactly one runs."""
    for _ in range(3):
        paused = _request("t", status="paused")
        await store.create(paused)
        outcomes = await _outcomes(
            store.claim(paused, "me", ("paused",)),
            store.claim(paused, "me", ("paused",)),
            store.create(_request("t")),
        )
        assert outcomes.count("won") == 1, outcomes
        [won] = [r for r in await _thread(store, "t") if r.status == "running"]
        await store.update(won.request_key, status="completed")


async def _thread(store: RequestStore, thread_id: str) -> list[RequestRecord]:
    table = requests_table
    async with store.engine.connect() as conn:
        rows = (await conn.execute(table.select().where(table.c.thread_id == thread_id))).all()
    return [RequestRecord.model_validate(dict(row._mapping)) for row in rows]


async def test_a_new_request_supersedes_the_other_paused_requests_of_its_thread(store: RequestStore):
    older, other_thread = _request("t", status="paused"), _request("u", status="paused")
    await store.create(older)
    await store.create(other_thread)
    newer = _request("t")
    await store.create(newer)
    statuses = {r.request_key: r.status for r in await _thread(store, "t") + await _thread(store, "u")}
    assert statuses == {older.request_key: "superseded", other_thread.request_key: "paused",
                        newer.request_key: "running"}  # fmt: skip
    assert not await store.claim(older, "me", ("paused",))  # it is not resumed any more


def test_a_database_with_several_running_requests_on_a_thread_keeps_the_newest_running(tmp_path: Path):
    from alembic import command

    engine = sa.create_engine(f"sqlite:///{tmp_path / 'old.db'}")
    with engine.begin() as conn:
        command.upgrade(alembic_config(conn), "0007")
        rows = {"older": ("t", 1.0), "newer": ("t", 2.0), "alone": ("u", 1.0)}
        records = [
            _request(thread, name=name).model_dump() | {"created_at": at}
            for name, (thread, at) in rows.items()
        ]
        conn.execute(
            requests_table.insert(), [*records, _request("t", "completed", name="done").model_dump()]
        )
    with engine.begin() as conn:
        upgrade_schema(conn)
        statuses = dict(conn.execute(sa.text("SELECT request_id, status FROM phasegraph_requests")).all())
        assert statuses == {"older": "paused", "newer": "running", "done": "completed", "alone": "running"}
        with pytest.raises(sa.exc.IntegrityError):
            conn.execute(
                sa.text("UPDATE phasegraph_requests SET status = 'running' WHERE request_id = 'older'")
            )
    engine.dispose()
