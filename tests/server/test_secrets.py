"""Configured secrets never leave the server: not in events, traces, the database, or the log.

A real ``phasegraph serve`` process, a real OpenAI-compatible server on loopback that echoes the
API key in its 401 body, and a workspace file holding a bearer token that a tool reads.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import httpx

from tests.fake_openai import error, fake_openai
from tests.helpers import turn, write_script
from tests.server.conftest import stream

KEY = "sk-test-SECRET-4f9d2c81b7e6a035"
TOKEN = "bearer-SECRET-77a1c9e0d4b3"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


def _stored_bytes(tmp_path: Path) -> bytes:
    """Every byte of the server's SQLite database (main file, WAL and shared memory)."""
    return b"".join(p.read_bytes() for p in sorted(tmp_path.glob("state.db*")))


def _error_writes(tmp_path: Path) -> list[bytes]:
    """The errors LangGraph's checkpointer stored for failed tasks."""
    with sqlite3.connect(tmp_path / "state.db") as db:
        return [bytes(v) for (v,) in db.execute("select value from writes where channel = '__error__'")]


def _everything_the_api_shows(client: httpx.Client, request_id: str) -> str:
    replay = stream(client, "GET", f"/api/requests/{request_id}/stream", headers=AUTH)
    trace = client.get(f"/api/requests/{request_id}/trace", headers=AUTH)
    assert trace.status_code == 200
    return "\n".join([*(e.to_json() for e in replay), trace.text])


def test_a_provider_echoing_its_api_key_leaks_it_nowhere(servers, tmp_path: Path):
    with fake_openai(error(401, f"Incorrect API key provided: {KEY}. Check it.")) as fake:
        server = servers(
            OPENAI_API_KEY=KEY,
            OPENAI_BASE_URL=fake.url,
            PHASEGRAPH_MODEL="openai:test-model",
            PHASEGRAPH_API_TOKENS=f"{TOKEN}:*",
        )
        with httpx.Client(base_url=server.url) as client:
            events = stream(
                client, "POST", "/api/runs/triggered_phase/stream", headers=AUTH,
                json={"message": "Summarise the roadmap", "requestId": "leak-1"},
            )  # fmt: skip
            shown = _everything_the_api_shows(client, "leak-1")
        server.stop()  # flush the log and the database before reading them
    assert len(fake.requests) == 1  # a 401 is not retried
    failure = events[-1]
    assert failure.type == "error" and failure.kind == "provider"
    assert failure.message.startswith("openai model 'test-model' answered HTTP 401 after 1 attempt")
    assert "[REDACTED]" in failure.message  # the echoed key was there, and is masked
    sse = "\n".join(e.to_json() for e in events)
    assert KEY not in sse and KEY not in shown
    writes = _error_writes(tmp_path)
    assert writes and all(b"answered HTTP 401" in w and KEY.encode() not in w for w in writes)
    assert KEY.encode() not in _stored_bytes(tmp_path)
    log = server.log.read_text() if server.log else ""
    assert "Incorrect API key provided: [REDACTED]" in log  # the provider's words are logged, masked
    assert KEY not in log and TOKEN not in log


def test_a_bearer_token_read_by_a_tool_is_neither_shown_nor_stored(servers, tmp_path: Path):
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    (workspace / "notes.md").write_text(f"deploy with Authorization: Bearer {TOKEN}\n", encoding="utf-8")
    script = write_script(
        tmp_path, turn("Reading.", ("read_file", {"path": "notes.md"})), turn("The notes name a token.")
    )
    server = servers(
        PHASEGRAPH_MODEL=script, PHASEGRAPH_WORKSPACE=str(workspace), PHASEGRAPH_API_TOKENS=f"{TOKEN}:*"
    )
    with httpx.Client(base_url=server.url) as client:
        events = stream(
            client, "POST", "/api/runs/triggered_phase/stream", headers=AUTH,
            json={"message": "What do the notes say?", "requestId": "leak-2", "showToolOutputs": True},
        )  # fmt: skip
        shown = _everything_the_api_shows(client, "leak-2")
    server.stop()
    result = next(e for e in events if e.type == "tool_result")
    assert result.status == "ok" and result.output == "deploy with Authorization: Bearer [REDACTED]\n"
    assert events[-1].type == "final"
    assert TOKEN not in "\n".join(e.to_json() for e in events) and TOKEN not in shown
    assert "Bearer [REDACTED]" in json.dumps(json.loads(shown.rsplit("\n", 1)[-1]))  # the trace kept the rest
    assert TOKEN.encode() not in _stored_bytes(tmp_path)
    assert TOKEN not in (server.log.read_text() if server.log else "")
