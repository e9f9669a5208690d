"""Processes on one sqlite file wake each other: a commit or a control request reaches the others' sockets."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from phasegraph.nodes.events import TextChunk
from phasegraph.server.runs.socket_wakeups import SocketWakeups, wake_folder
from phasegraph.server.storage.records import RequestRecord
from phasegraph.server.storage.store import Append, RequestStore

Woken = asyncio.Queue[tuple[str, str, str]]


@pytest.fixture
async def database(tmp_path: Path) -> AsyncIterator[Path]:
    path = tmp_path / "state.db"
    store = RequestStore.for_checkpointer(f"sqlite:{path}")
    await store.setup()
    await store.close()
    yield path


def _wakeups(database: Path, owner: str, woken: Woken) -> SocketWakeups:
    async def on_control(key: str) -> None:
        woken.put_nowait((owner, "control", key))

    wakeups = SocketWakeups(database, owner, lambda key: woken.put_nowait((owner, "events", key)), on_control)
    wakeups.start()
    return wakeups


async def _store_of(database: Path, wakeups: SocketWakeups) -> RequestStore:
    store = RequestStore.for_checkpointer(f"sqlite:{database}")
    store.announce = wakeups.announce
    return store


async def test_a_commit_and_a_control_request_wake_every_other_process_on_the_file(database: Path):
    woken: Woken = asyncio.Queue()
    a, b, c = (_wakeups(database, owner, woken) for owner in ("a", "b", "c"))
    store = await _store_of(database, a)
    try:
        assert sorted(p.name for p in wake_folder(database).iterdir()) == sorted(
            w.path.name for w in (a, b, c)
        )
        record = RequestRecord(request_id="r1", project_id="p", protocol="triggered_phase", thread_id="t",
                               status="running", owner="a")  # fmt: skip
        await store.create(record)
        event = TextChunk(request_id="r1", project_id="p", protocol="triggered_phase", seq=1, text="x")
        await store.write_batch([Append(record.request_key, [event], guarded=True)], "a")
        got = {await asyncio.wait_for(woken.get(), 5) for _ in range(2)}
        assert got == {("b", "events", record.request_key), ("c", "events", record.request_key)}

        await store.request_control(record.request_key, pause_requested=True)
        got = {await asyncio.wait_for(woken.get(), 5) for _ in range(2)}
        assert got == {("b", "control", record.request_key), ("c", "control", record.request_key)}
        await asyncio.sleep(0.2)
        assert woken.empty()  # the sender is not woken by its own messages
    finally:
        await store.close()
        for wakeups in (a, b, c):
            await wakeups.close()
    assert not wake_folder(database).exists()  # the last one out removes the folder


async def test_a_dead_process_socket_is_removed_and_a_malformed_message_is_ignored(database: Path):
    woken: Woken = asyncio.Queue()
    a, b = _wakeups(database, "a", woken), _wakeups(database, "b", woken)
    dead = wake_folder(database) / "999999-dead.sock"
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
        sock.bind(str(dead))  # bound, then closed without removing its file: what a SIGKILL leaves
    try:
        b.announce("phasegraph_events", "{not json")
        a.announce("phasegraph_events", '{"owner": "a", "heads": {"p/r2": 3}}')
        assert await asyncio.wait_for(woken.get(), 5) == ("b", "events", "p/r2")
        assert not dead.exists()
        assert woken.empty()  # the malformed one woke nobody
    finally:
        await a.close()
        await b.close()


async def test_a_folder_that_is_not_private_leaves_the_process_polling_instead_of_failing_to_start(
    database: Path, caplog: pytest.LogCaptureFixture
):
    folder = wake_folder(database)
    folder.mkdir(mode=0o755)
    folder.chmod(0o755)  # as another user's, or a careless umask's, would be: others may read it
    woken: Woken = asyncio.Queue()
    try:
        wakeups = _wakeups(database, "a", woken)
        assert not wakeups.path.exists()
        assert "they poll it instead" in caplog.text and "not a private folder" in caplog.text
        wakeups.announce("phasegraph_events", '{"owner": "a", "heads": {"p/r": 1}}')  # nothing to send with
        await wakeups.close()
    finally:
        folder.rmdir()
