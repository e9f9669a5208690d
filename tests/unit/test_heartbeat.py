"""The watcher's heartbeat: it refreshes the runs a replica drives and hands back only those to act on."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from phasegraph.server.storage.records import RequestRecord
from phasegraph.server.storage.store import RequestStore

#: Requests replica ``a`` drives, and what is stored on each besides.
STORED: dict[str, dict[str, Any]] = {
    "plain": {},
    "pause": {"pause_requested": True},
    "cancel": {"cancel_requested": True},
    "taken": {"owner": "b"},  # another replica took it over
    "cancelled": {"status": "cancelled"},
}


async def test_the_heartbeat_refreshes_the_owners_runs_and_returns_only_those_to_act_on(tmp_path: Path):
    store = RequestStore.for_checkpointer(f"sqlite:{tmp_path / 'state.db'}")
    await store.setup()
    try:
        keys = {}
        for name, fields in STORED.items():
            values = {"status": "running", "owner": "a", "heartbeat_at": 1.0, "thread_id": name, **fields}
            record = RequestRecord(request_id=name, project_id="p", protocol="triggered_phase", **values)
            await store.create(record)
            keys[name] = record.request_key
        acted = await store.heartbeat(list(keys.values()), "a")
        assert sorted(r.request_id for r in acted) == ["cancel", "cancelled", "pause", "taken"]
        records = {name: await store.get(key) for name, key in keys.items()}
        refreshed = {name for name, record in records.items() if record and (record.heartbeat_at or 0) > 1.0}
        assert refreshed == {"plain", "pause", "cancel"}  # its own running ones
    finally:
        await store.close()
