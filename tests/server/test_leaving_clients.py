"""A client that stops reading an event stream and then leaves ends the stream quietly, whatever route it is.

The app is driven as uvicorn drives it (an ASGI call) with a client whose socket is full: each write of
the answer waits, and meanwhile the client goes (``http.disconnect``). FastAPI's own SSE streaming (a
route that yields events) failed there with ``BrokenResourceError`` in an ``ExceptionGroup``, which
uvicorn logs as "Exception in ASGI application" with its traceback: its keep-alive task was writing to a
stream the response had closed. Every streaming route answers through the one SSE writer
(``server/http/sse.py``), whose reader is cancelled when the client goes.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient
from starlette.types import Message

from phasegraph.nodes.models import DEMO_WORKSPACE
from phasegraph.nodes.settings import ServerSettings
from phasegraph.server.app import create_app

#: The routes that streamed through FastAPI's SSE, and how each is asked for (method, path, body).
FINISHED = "leaving-1"


@pytest.fixture(scope="module")
def client() -> Iterator[TestClient]:
    settings = ServerSettings(checkpointer="memory", workspace=str(DEMO_WORKSPACE))
    with TestClient(create_app(settings)) as test_client:
        body = {"message": "Summarise the roadmap", "projectId": "p", "requestId": FINISHED}
        with test_client.stream("POST", "/api/runs/triggered_phase/stream", json=body) as answer:
            assert "event: final" in answer.read().decode()
        yield test_client


async def _leave_while_writes_wait(app: Any, path: str) -> None:
    """GET ``path`` as a client whose writes wait: it leaves while the answer is being written."""
    left = asyncio.Event()

    async def receive() -> Message:
        await asyncio.sleep(0.3)  # the answer has started and its writes wait
        left.set()
        return {"type": "http.disconnect"}

    async def send(message: Message) -> None:
        if message["type"] == "http.response.body" and message.get("body"):
            await left.wait()  # a full socket: the write returns only once the client is gone, and then
            # (as uvicorn's does for a closed connection) writes nothing

    scope = {
        "type": "http", "asgi": {"version": "3.0", "spec_version": "2.3"}, "http_version": "1.1",
        "method": "GET", "scheme": "http", "path": path, "raw_path": path.encode(), "root_path": "",
        "query_string": b"projectId=p", "headers": [(b"host", b"testserver")],
        "client": ("127.0.0.1", 50000), "server": ("testserver", 80),
    }  # fmt: skip
    await asyncio.wait_for(app(scope, receive, send), timeout=30)


def test_a_client_leaving_a_stream_it_stopped_reading_ends_it_without_an_error(client: TestClient):
    path = f"/api/requests/{FINISHED}/stream"
    for _ in range(5):  # the keep-alive task and the response race: each round is one chance to lose
        client.portal.call(_leave_while_writes_wait, client.app, path)
    assert client.get(f"/api/requests/{FINISHED}", params={"projectId": "p"}).json()["status"] == "completed"
