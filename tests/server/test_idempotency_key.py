"""A tool call run again after a crash has the same idempotency key, so a tool can make its effect once.

A call whose server is killed before its result is saved runs again when the run is taken over (a
result that was saved is handed back instead: tests/server/test_finished_calls.py). The Python tool
``keyed_append`` writes the call's key to a ledger unless the key is there already, then works on for a
few seconds; the server is killed while it works. The call runs again on the restarted server under
the same key, so the ledger holds one line: ``project/request/call``.
"""

from __future__ import annotations

from pathlib import Path
from uuid import uuid4

import httpx
import pytest

from phasegraph.nodes.events import Event, Final
from tests.server.conftest import Server, read_sse
from tests.server.pausing import take_over, tool_events, wait_for
from tests.tool_projects import write_project, write_script

ROOT = Path(__file__).resolve().parents[2]


def _env(tmp_path: Path, ledger: Path) -> dict[str, str]:
    call = {"name": "keyed_append", "args": {"path": str(ledger), "seconds": 4}}
    script = write_script(tmp_path, [{"content": "Recording.", "tool_calls": [call]}, {"content": "Done."}])
    project = write_project(tmp_path, {"python_tools": {"keyed_append": "tests.user_tools:keyed_append"}})
    return {
        "PHASEGRAPH_MODEL": f"scripted:{script}",
        "PHASEGRAPH_CONFIG": str(project),
        "PYTHONPATH": str(ROOT),  # the server imports tests.user_tools
    }


def _kill_while_the_call_works(server: Server, request_id: str, ledger: Path) -> list[Event]:
    seen: list[Event] = []
    body = {"message": "Record it.", "projectId": "proj", "requestId": request_id}
    with (
        httpx.Client(base_url=server.url) as client,
        client.stream("POST", "/api/runs/unified/stream", json=body, timeout=60) as response,
    ):

        def on_event(event: Event) -> None:
            seen.append(event)
            if event.type == "tool_call":
                wait_for(lambda: ledger.read_text(encoding="utf-8") != "", "the call never made its effect")
                server.kill()

        with pytest.raises(httpx.HTTPError):  # the connection dies with the server
            read_sse(response, on_event=on_event)
    return seen


def test_a_call_run_again_after_a_crash_has_the_same_idempotency_key(servers, tmp_path: Path):
    ledger = tmp_path / "ledger.txt"
    ledger.touch()
    env = _env(tmp_path, ledger)
    request_id = f"req-{uuid4().hex}"
    before = _kill_while_the_call_works(servers(**env), request_id, ledger)
    calls, results = tool_events(before)
    assert len(calls) == 1 and not results  # killed mid-call: its result was never saved

    taken = take_over(servers(**env), request_id, before)
    assert isinstance(taken.events[-1], Final)
    rerun, results = tool_events(taken.rest)
    key = f"proj/{request_id}/{calls[0].call_id}"
    assert [e.call_id for e in rerun] == [calls[0].call_id]  # the same call, run again
    assert ledger.read_text(encoding="utf-8").splitlines() == [key]  # its effect, once
    assert [e.status for e in results] == ["ok"]
    assert taken.traced == ["keyed_append", "keyed_append"]  # it did run twice
