"""Checkpoint retention on each saver the server opens: memory, sqlite and Postgres, with a real graph.

The graph loops a few steps, calls a subgraph (its own checkpoint namespace per call) and may wait in
an interrupt, so every structure pruning touches is there: checkpoints, pending writes, shared
channel blobs, parent links, call namespaces and a pending interrupt.
"""

from __future__ import annotations

import asyncio
import logging
import operator
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal, TypedDict
from uuid import uuid4

import pytest
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import Command, interrupt
from typer.testing import CliRunner

import phasegraph.server.storage.pruning.postgres
import phasegraph.server.storage.pruning.sqlite
import phasegraph.server.storage.retention
from phasegraph.nodes.errors import ConfigurationError
from phasegraph.nodes.events import ErrorEvent
from phasegraph.nodes.settings import ServerSettings
from phasegraph.nodes.trace import TraceEntry
from phasegraph.server.app import create_app
from phasegraph.server.cli.main import app
from phasegraph.server.storage.persistence import open_checkpointer
from phasegraph.server.storage.pruning.base import Pruner, id_at, made_at
from phasegraph.server.storage.pruning.requests import Forgotten
from phasegraph.server.storage.records import RequestRecord
from phasegraph.server.storage.retention import (
    Retention,
    RetentionPolicy,
    parse_retention,
    parse_ttl,
    prune,
    pruner_for,
)
from phasegraph.server.storage.store import Append, RequestStore
from phasegraph.server.storage.threads import ThreadStore

# -- the policy ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "policy"),
    [
        ("keep_latest=20", RetentionPolicy(keep_latest=20)),
        ("ttl=30d", RetentionPolicy(ttl_seconds=30 * 86400)),
        (" keep_latest = 5 , ttl = 12h ", RetentionPolicy(keep_latest=5, ttl_seconds=12 * 3600)),
        ("ttl=90m,keep_latest=1", RetentionPolicy(keep_latest=1, ttl_seconds=5400)),
        ("ttl=45s", RetentionPolicy(ttl_seconds=45)),
    ],
)
def test_the_policy_reads_keep_latest_and_ttl(text: str, policy: RetentionPolicy):
    assert parse_retention(text) == policy
    assert parse_retention(str(policy)) == policy  # it prints the way it is written


@pytest.mark.parametrize("text", ["", "   "])
def test_an_empty_policy_is_off(text: str):
    assert parse_retention(text) is None


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("keep_latest=0", "at least 1"),
        ("keep_latest=-3", "at least 1"),
        ("keep_latest=2.5", "at least 1"),
        ("ttl=30", "unit, s, m, h or d"),
        ("ttl=30w", "unit, s, m, h or d"),
        ("ttl=0d", "above 0"),
        ("ttl=", "unit, s, m, h or d"),
        ("keep=3", "'keep=3'"),
        ("keep_latest=3,keep_latest=4", "names a setting twice"),
        ("keep_latest", "'keep_latest'"),
        ("keep_latest=3;ttl=1d", "at least 1"),
    ],
)
def test_a_malformed_policy_is_refused_with_what_is_wrong(text: str, says: str):
    with pytest.raises(ConfigurationError) as refused:
        parse_retention(text)
    assert "PHASEGRAPH_RETENTION" in str(refused.value) and says in str(refused.value)


def test_the_settings_read_the_policy_and_its_interval(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("PHASEGRAPH_RETENTION", "keep_latest=20,ttl=30d")
    monkeypatch.setenv("PHASEGRAPH_RETENTION_INTERVAL_SECONDS", "60")
    settings = ServerSettings()
    assert parse_retention(settings.retention) == RetentionPolicy(20, 30 * 86400)
    assert settings.retention_interval_seconds == 60
    monkeypatch.delenv("PHASEGRAPH_RETENTION")
    monkeypatch.delenv("PHASEGRAPH_RETENTION_INTERVAL_SECONDS")
    assert ServerSettings().retention == "" and ServerSettings().retention_interval_seconds == 300


async def test_a_server_with_a_malformed_policy_refuses_to_start(tmp_path: Path):
    settings = ServerSettings(
        retention="ttl=1y", checkpointer=f"sqlite:{tmp_path / 'state.db'}", workspace=str(tmp_path)
    )
    app = create_app(settings)
    with pytest.raises(ConfigurationError, match="ttl '1y'"):
        async with app.router.lifespan_context(app):
            pass


@pytest.mark.parametrize(
    ("args", "env", "says"),
    [
        (["--ttl", "3w"], {}, "ttl '3w' is not a duration"),
        ([], {}, "no retention policy"),
        ([], {"PHASEGRAPH_RETENTION": "keep_latest=0"}, "keep_latest '0' must be a whole number"),
        (["--keep-latest", "2"], {"PHASEGRAPH_CHECKPOINTER": "memory"}, "memory checkpointer lives inside"),
    ],
)
def test_the_command_refuses_what_it_cannot_do(
    args: list[str], env: dict[str, str], says: str, tmp_path: Path
):
    database = {"PHASEGRAPH_CHECKPOINTER": f"sqlite:{tmp_path / 'state.db'}", "PHASEGRAPH_RETENTION": ""}
    done = CliRunner().invoke(app, ["prune", *args], env={**database, **env})
    assert done.exit_code == 2 and says in done.output
    assert not (tmp_path / "state.db").exists()  # refused before anything was opened


def test_ttl_units():
    assert [parse_ttl(t) for t in ("1s", "2m", "3h", "4d")] == [1, 120, 10800, 345600]


# -- a tiny graph with every structure pruning touches -------------------------------------------


class State(TypedDict, total=False):
    items: Annotated[list[str], operator.add]  # grows each step: a blob per version on Postgres
    count: int  # steps taken this turn
    limit: int  # steps per turn
    ask: bool  # end the turn in an interrupt
    answer: str  # what the interrupt was answered
    signed: int  # calls of the helper subgraph so far


class HelperState(TypedDict, total=False):
    signed: int


def take_step(state: State) -> State:
    return {"items": [f"step-{state['count']}"], "count": state["count"] + 1}


def route_after_step(state: State) -> Literal["take_step", "call_helper"]:
    return "take_step" if state["count"] < state["limit"] else "call_helper"


def ask_user(state: State) -> State:
    return {"answer": interrupt("go on?")} if state.get("ask") else {}


def build_graph(saver: BaseCheckpointSaver[Any]) -> CompiledStateGraph[Any, Any, Any, Any]:
    helper = StateGraph(HelperState)
    helper.add_node("note", lambda s: {"signed": s.get("signed", 0)})
    helper.add_node("sign", lambda s: {"signed": s["signed"] + 1})
    helper.add_edge(START, "note")
    helper.add_edge("note", "sign")
    builder = StateGraph(State)
    builder.add_node("take_step", take_step)
    builder.add_node("call_helper", helper.compile())  # a subgraph: its own namespace per call
    builder.add_node("ask_user", ask_user)
    builder.add_edge(START, "take_step")
    builder.add_conditional_edges("take_step", route_after_step, ["take_step", "call_helper"])
    builder.add_edge("call_helper", "ask_user")
    builder.add_edge("ask_user", END)
    return builder.compile(checkpointer=saver)


def config(thread_id: str) -> Any:
    return {"configurable": {"thread_id": thread_id}}


async def turns(
    graph: CompiledStateGraph[Any, Any, Any, Any], thread_id: str, n: int, ask: bool = False
) -> None:
    for i in range(n):
        last = ask and i == n - 1
        await graph.ainvoke({"items": [f"turn-{i}"], "count": 0, "limit": 3, "ask": last}, config(thread_id))


# -- the backends ---------------------------------------------------------------------------------


@dataclass
class Backend:
    kind: str
    saver: BaseCheckpointSaver[Any]
    store: RequestStore
    pruner: Pruner

    async def checkpoints(self, thread_id: str) -> dict[str, list[str]]:
        """Checkpoint ids per namespace, newest first (through the saver's own API)."""
        found: dict[str, list[str]] = {}
        async for saved in self.saver.alist(config(thread_id)):
            conf = saved.config["configurable"]
            found.setdefault(conf["checkpoint_ns"], []).append(conf["checkpoint_id"])
        return found

    async def raw(self, thread_id: str) -> dict[str, int]:
        """Rows of the thread as stored, and those nothing points at any more (orphans)."""
        if self.kind == "memory":
            return self._raw_memory(thread_id)
        if self.kind == "sqlite":
            conn = self.saver.conn  # type: ignore[attr-defined]
            out = {}
            for name, sql in (
                ("checkpoints", "SELECT count(*) FROM checkpoints WHERE thread_id = ?"),
                ("writes", "SELECT count(*) FROM writes WHERE thread_id = ?"),
                (
                    "orphan_writes",
                    "SELECT count(*) FROM writes w WHERE thread_id = ? AND NOT EXISTS (SELECT 1 FROM "
                    "checkpoints c WHERE c.thread_id = w.thread_id AND c.checkpoint_ns = w.checkpoint_ns "
                    "AND c.checkpoint_id = w.checkpoint_id)",
                ),
            ):
                cursor = await conn.execute(sql, (thread_id,))
                out[name] = (await cursor.fetchone())[0]
            return out
        return await self._raw_postgres(thread_id)

    def _raw_memory(self, thread_id: str) -> dict[str, int]:
        saver: Any = self.saver
        spaces = saver.storage.get(thread_id, {})
        kept = {(ns, i) for ns, saved in spaces.items() for i in saved}
        named = {
            (thread_id, ns, ch, v)
            for ns, saved in spaces.items()
            for entry in saved.values()
            for ch, v in saver.serde.loads_typed(entry[0])["channel_versions"].items()
        }
        writes = {k: v for k, v in saver.writes.items() if k[0] == thread_id}
        blobs = [k for k in saver.blobs if k[0] == thread_id]
        return {
            "checkpoints": len(kept),
            "writes": sum(len(v) for v in writes.values()),
            "orphan_writes": sum(len(v) for k, v in writes.items() if (k[1], k[2]) not in kept),
            "blobs": len(blobs),
            "orphan_blobs": len([k for k in blobs if k not in named]),
        }

    async def _raw_postgres(self, thread_id: str) -> dict[str, int]:
        named = (
            "EXISTS (SELECT 1 FROM checkpoints c WHERE c.thread_id = b.thread_id AND c.checkpoint_ns = "
            "b.checkpoint_ns AND c.checkpoint -> 'channel_versions' ->> b.channel = b.version)"
        )
        queries = {
            "checkpoints": "SELECT count(*) FROM checkpoints WHERE thread_id = %s",
            "writes": "SELECT count(*) FROM checkpoint_writes WHERE thread_id = %s",
            "orphan_writes": "SELECT count(*) FROM checkpoint_writes w WHERE thread_id = %s AND NOT EXISTS "
            "(SELECT 1 FROM checkpoints c WHERE c.thread_id = w.thread_id AND "
            "c.checkpoint_ns = w.checkpoint_ns AND c.checkpoint_id = w.checkpoint_id)",
            "blobs": "SELECT count(*) FROM checkpoint_blobs WHERE thread_id = %s",
            "orphan_blobs": f"SELECT count(*) FROM checkpoint_blobs b WHERE thread_id = %s AND NOT {named}",
        }
        out = {}
        async with self.saver.conn.connection() as conn:  # type: ignore[attr-defined]
            for name, sql in queries.items():
                out[name] = (await (await conn.execute(sql, (thread_id,))).fetchone())["count"]
        return out


@pytest.fixture(params=["memory", "sqlite", "postgres"])
async def backend(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Backend]:
    """Each saver opened the way the server opens it, with a request store on the same database."""
    kind = request.param
    spec = {"memory": "memory", "sqlite": f"sqlite:{tmp_path / 'state.db'}"}.get(kind)
    if spec is None:
        spec = request.getfixturevalue("fresh_postgres")
    store = RequestStore.for_checkpointer(spec)
    await store.setup()
    try:
        async with open_checkpointer(spec) as saver:
            yield Backend(kind, saver, store, pruner_for(saver, requests=kind != "memory"))
    finally:
        await store.close()


@pytest.fixture
def small_chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    """Two checkpoints (and three blobs) per transaction: every pass takes many."""
    monkeypatch.setattr(phasegraph.server.storage.pruning.sqlite, "CHUNK", 2)
    monkeypatch.setattr(phasegraph.server.storage.pruning.postgres, "CHUNK", 2)
    monkeypatch.setattr(phasegraph.server.storage.pruning.postgres, "BLOB_CHUNK", 3)


async def record(store: RequestStore, thread_key: str, status: Any) -> RequestRecord:
    project, _, thread = thread_key.partition("/")
    request = RequestRecord(
        request_id=f"r-{uuid4().hex[:8]}", project_id=project, protocol="triggered_phase",
        thread_id=thread, status=status,
    )  # fmt: skip
    await store.create(request)
    return request


async def logged(store: RequestStore, thread_key: str, status: Any) -> RequestRecord:
    """A request of the thread with an event and a trace entry in the store, as a run leaves them."""
    request = await record(store, thread_key, status)
    event = ErrorEvent(
        request_id=request.request_id, project_id=request.project_id, protocol="triggered_phase", seq=1,
        kind="x", message="gone",
    )  # fmt: skip
    entry = TraceEntry(type="tool_result", request_id=request.request_id, details={"output": "x"})
    await store.write_batch([Append(request.request_key, [event], [entry])])
    return request


# -- pruning --------------------------------------------------------------------------------------


async def test_keep_latest_keeps_each_namespaces_newest_with_their_state(
    backend: Backend, small_chunks: None
):
    graph = build_graph(backend.saver)
    for thread in ("p/one", "p/two"):
        await turns(graph, thread, 3)
    before = {t: await backend.checkpoints(t) for t in ("p/one", "p/two")}
    assert len(before["p/one"][""]) > 3 and len([ns for ns in before["p/one"] if ns]) == 3  # a call each turn
    newest = before["p/one"][""][:3]
    saved = {i: await backend.saver.aget_tuple({**config("p/one"), "configurable": {
        "thread_id": "p/one", "checkpoint_ns": "", "checkpoint_id": i}}) for i in newest}  # fmt: skip

    policy = RetentionPolicy(keep_latest=3)
    planned = await prune(backend.pruner, policy, store=backend.store, dry_run=True)
    assert {t: await backend.checkpoints(t) for t in before} == before  # a dry run removes nothing
    done = await prune(backend.pruner, policy, store=backend.store)

    assert done.removed == planned.removed and done.trimmed == planned.trimmed == 2 and done.threads == 2
    assert done.removed.checkpoints > 0 and done.removed.writes > 0
    assert (done.removed.blobs > 0) == (backend.kind != "sqlite")
    after = await backend.checkpoints("p/one")
    assert after[""] == newest  # the root namespace keeps exactly its newest three
    # the calls of the earlier turns started from root checkpoints removed now; the last one's did not
    calls = [ns for ns in before["p/one"] if ns]
    assert [ns for ns in after if ns] == [max(calls, key=lambda ns: before["p/one"][ns][0])]
    assert all(len(ids) <= 3 for ids in after.values())
    for checkpoint_id, tuple_before in saved.items():
        tuple_after = await backend.saver.aget_tuple(
            {"configurable": {"thread_id": "p/one", "checkpoint_ns": "", "checkpoint_id": checkpoint_id}}
        )
        assert tuple_after is not None
        assert tuple_after.checkpoint["channel_values"] == tuple_before.checkpoint["channel_values"]
        assert tuple_after.pending_writes == tuple_before.pending_writes
    oldest = await backend.saver.aget_tuple(
        {"configurable": {"thread_id": "p/one", "checkpoint_ns": "", "checkpoint_id": newest[-1]}}
    )
    assert oldest is not None and oldest.parent_config is None  # its parent is gone: it has none
    raw = await backend.raw("p/one")
    assert raw["orphan_writes"] == 0 and raw.get("orphan_blobs", 0) == 0

    # The thread goes on from its newest checkpoint with its whole history.
    await turns(graph, "p/one", 1)
    state = (await graph.aget_state(config("p/one"))).values
    assert state["items"] == [x for i in (0, 1, 2, 0) for x in (f"turn-{i}", "step-0", "step-1", "step-2")]
    assert state["signed"] == 4
    again = await prune(backend.pruner, policy, store=backend.store)
    assert again.trimmed == 1 and all(len(ids) <= 3 for ids in (await backend.checkpoints("p/one")).values())


async def test_ttl_removes_idle_threads_and_spares_what_a_request_needs(backend: Backend):
    graph = build_graph(backend.saver)
    for thread in ("p/idle", "p/paused", "p/running"):
        await turns(graph, thread, 2)
    await turns(graph, "p/waiting", 2, ask=True)  # its last turn waits for an answer
    assert (await graph.aget_state(config("p/waiting"))).interrupts
    await record(backend.store, "p/paused", "paused")
    await record(backend.store, "p/running", "running")
    await record(backend.store, "p/idle", "completed")
    await asyncio.sleep(0.01)
    cutoff = time.time()
    await asyncio.sleep(0.01)
    await turns(graph, "p/recent", 1)
    before = {t: await backend.checkpoints(t) for t in ("p/paused", "p/running", "p/waiting", "p/recent")}
    idle = await backend.raw("p/idle")

    policy = RetentionPolicy(ttl_seconds=1)
    planned = await prune(backend.pruner, policy, store=backend.store, dry_run=True, moment=cutoff + 1)
    assert await backend.raw("p/idle") == idle
    done = await prune(backend.pruner, policy, store=backend.store, moment=cutoff + 1)

    assert (done.expired, done.spared, done.busy, done.threads) == (1, 2, 1, 5)
    assert done.removed == planned.removed
    assert done.removed.checkpoints == idle["checkpoints"] and done.removed.writes == idle["writes"]
    assert done.removed.blobs == idle.get("blobs", 0)
    assert set((await backend.raw("p/idle")).values()) == {0}  # nothing of it is left
    assert {t: await backend.checkpoints(t) for t in before} == before
    # the interrupted thread still takes its answer
    await graph.ainvoke(Command(resume="yes"), config("p/waiting"))
    assert (await graph.aget_state(config("p/waiting"))).values["answer"] == "yes"


async def test_ttl_forgets_the_requests_events_traces_and_rows_of_expired_threads(backend: Backend):
    graph = build_graph(backend.saver)
    store, threads = backend.store, ThreadStore(backend.store)
    for thread in ("p/old", "p/paused"):
        await turns(graph, thread, 1)
    old = [await logged(store, "p/old", "completed"), await logged(store, "p/old", "failed")]
    paused = await logged(store, "p/paused", "paused")
    await threads.create("p", "old", {})
    await threads.create("p", "never-run", {})  # a thread row with no checkpoint and no request
    await asyncio.sleep(0.01)
    cutoff = time.time()
    await asyncio.sleep(0.01)
    await turns(graph, "p/recent", 1)
    recent = await logged(store, "p/recent", "completed")
    await threads.create("p", "new", {})

    policy = RetentionPolicy(ttl_seconds=1)
    planned = await prune(backend.pruner, policy, store=store, dry_run=True, moment=cutoff + 1)
    assert planned.forgotten == Forgotten(threads=2, requests=2, events=2, traces=2)
    assert all([await store.get(r.request_key) for r in old])  # a dry run removes nothing
    done = await prune(backend.pruner, policy, store=store, moment=cutoff + 1)

    assert done.forgotten == planned.forgotten and done.expired == 1
    for request in old:
        assert await store.get(request.request_key) is None
        assert await store.events_after(request.request_key, 0) == []
        assert await store.trace(request.request_key) == []
    assert await threads.get("p", "old") is None and await threads.get("p", "never-run") is None
    for request in (paused, recent):  # a paused request's thread is never expired; a recent one is young
        assert await store.get(request.request_key) is not None
        assert len(await store.events_after(request.request_key, 0)) == 1
        assert len(await store.trace(request.request_key)) == 1
    assert await threads.get("p", "new") is not None
    again = await prune(backend.pruner, policy, store=store, moment=cutoff + 1)
    assert again.forgotten == Forgotten() and not again.changed


async def test_a_running_thread_is_left_alone_and_a_paused_one_keeps_its_newest(backend: Backend):
    graph = build_graph(backend.saver)
    for thread in ("p/paused", "p/running"):
        await turns(graph, thread, 2)
    await record(backend.store, "p/paused", "paused")
    await record(backend.store, "p/running", "running")
    running = await backend.checkpoints("p/running")
    latest = (await graph.aget_state(config("p/paused"))).values

    done = await prune(backend.pruner, RetentionPolicy(keep_latest=1), store=backend.store)

    assert (done.busy, done.trimmed) == (1, 1)
    assert await backend.checkpoints("p/running") == running
    # its newest checkpoint; the helper's last call started from the one before, removed now
    assert {ns: len(ids) for ns, ids in (await backend.checkpoints("p/paused")).items()} == {"": 1}
    assert (await graph.aget_state(config("p/paused"))).values == latest


async def test_an_expiring_thread_that_came_back_is_not_removed(backend: Backend):
    graph = build_graph(backend.saver)
    await turns(graph, "p/back", 1)
    await turns(graph, "p/resumable", 1)
    await record(backend.store, "p/resumable", "paused")
    before = await backend.raw("p/back")
    # a checkpoint newer than the cutoff, saved after the pass decided the thread was idle
    assert await backend.pruner.expire("p/back", id_at(time.time() - 3600), dry_run=False) is None
    assert await backend.raw("p/back") == before
    if backend.kind != "memory":  # the request store shares the database: checked in the transaction
        resumable = await backend.raw("p/resumable")
        assert await backend.pruner.expire("p/resumable", id_at(time.time() + 60), dry_run=False) is None
        assert await backend.raw("p/resumable") == resumable
    assert await backend.pruner.expire("p/back", id_at(time.time() + 60), dry_run=False) is not None
    assert (await backend.raw("p/back"))["checkpoints"] == 0


async def test_a_rolled_back_run_leaves_the_thread_as_it_was_before_it(backend: Backend):
    graph = build_graph(backend.saver)
    await turns(graph, "p/rolled", 1)  # the turn before: it stays
    before_values = (await graph.aget_state(config("p/rolled"))).values
    before, rows = await backend.checkpoints("p/rolled"), await backend.raw("p/rolled")
    run = {"configurable": {"thread_id": "p/rolled"}, "metadata": {"run_id": "doomed"}}
    await graph.ainvoke({"items": ["turn-x"], "count": 0, "limit": 3, "ask": True}, run)  # asks, writes
    assert await backend.checkpoints("p/rolled") != before

    removed = await backend.pruner.remove_run("p/rolled", "doomed")

    assert removed.checkpoints > 0 and removed.writes > 0
    assert await backend.checkpoints("p/rolled") == before  # every namespace, the helper's call too
    assert await backend.raw("p/rolled") == rows  # no write or blob of the run is left behind
    state = await graph.aget_state(config("p/rolled"))
    assert state.values == before_values and not state.interrupts


async def test_checkpoint_ids_tell_when_they_were_made():
    started = time.time()
    async with open_checkpointer("memory") as saver:
        await turns(build_graph(saver), "p/clock", 1)
        ids = [
            saved.config["configurable"]["checkpoint_id"] async for saved in saver.alist(config("p/clock"))
        ]
    assert all(started - 1 < (made_at(i) or 0) < time.time() + 1 for i in ids)
    assert id_at(started - 1) < min(ids) and max(ids) < id_at(time.time() + 1)
    assert made_at("not-a-uuid") is None and made_at(str(uuid4())) is None


# -- the background task --------------------------------------------------------------------------


async def test_the_background_task_survives_a_failed_round_and_stops_with_the_app(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
):
    store = RequestStore.for_checkpointer("memory")
    await store.setup()
    async with open_checkpointer("memory") as saver:
        graph = build_graph(saver)
        await turns(graph, "p/busy", 2)
        real_prune, calls = phasegraph.server.storage.retention.prune, []

        async def flaky(*args: Any, **kwargs: Any) -> Any:
            calls.append(time.monotonic())
            if len(calls) == 1:
                raise OSError("the database went away")
            return await real_prune(*args, **kwargs)

        monkeypatch.setattr(phasegraph.server.storage.retention, "prune", flaky)
        caplog.set_level(logging.INFO, logger="phasegraph.server.storage.retention")
        task = Retention(RetentionPolicy(keep_latest=1), 0.05, saver, store).start()
        deadline = time.monotonic() + 10
        while len(calls) < 3 and time.monotonic() < deadline:
            await asyncio.sleep(0.02)
        await task.stop()
        stopped = len(calls)
        await asyncio.sleep(0.15)
    await store.close()
    assert stopped >= 3 and len(calls) == stopped  # it went on after the failure, and stopped when told
    assert "checkpoint retention round failed" in caplog.text and "the database went away" in caplog.text
    assert "checkpoint retention (keep_latest=1) removed" in caplog.text
    left = await Backend("memory", saver, store, pruner_for(saver, requests=False)).checkpoints("p/busy")
    assert {ns: len(ids) for ns, ids in left.items()} == {"": 1}


async def test_retention_off_starts_no_task():
    async with open_checkpointer("memory") as saver:
        task = Retention(None, 0.01, saver, RequestStore.for_checkpointer("memory")).start()
        assert task._task is None
        await task.stop()
