"""A checkpoint id the thread does not have is 404 on every route that takes one, never an empty 200.

The saver answers an unknown checkpoint with an empty snapshot of the config it was asked, so the
LangGraph API's state at a checkpoint answered 200 with no values, a run "from" it silently ran on
from the thread's latest state instead of forking, and a history page ``before`` it answered a page.
The native checkpoint routes (a timeline page, one checkpoint, a fork) answer the same 404.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.server.conftest import Server, stream, unique

#: Shaped like the saver's ids (time-ordered UUIDs), so only its absence makes it wrong.
UNKNOWN = "1f000000-0000-6000-8000-000000000000"
ASK = {"messages": [{"role": "user", "content": "Summarise the roadmap in the docs folder."}]}


@pytest.fixture(scope="module")
def server(shared_servers: Any) -> Server:
    """The session's server: threads here are the server's own (``POST /threads``) or ``unique``."""
    started: Server = shared_servers()
    return started


@pytest.fixture
def client(server: Server) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server.url, timeout=60) as http:
        yield http


def _not_found(answer: httpx.Response) -> None:
    assert answer.status_code == 404, answer.text
    assert UNKNOWN in answer.json()["message"]


def _thread_with_a_run(client: httpx.Client) -> tuple[str, str]:
    """A LangGraph API thread after one run, and its latest checkpoint id."""
    thread = client.post("/threads", json={}).json()["thread_id"]
    run = {"assistant_id": "triggered_phase", "input": ASK}
    assert "answer" in client.post(f"/threads/{thread}/runs/wait", json=run).json()
    return thread, client.get(f"/threads/{thread}/state").json()["checkpoint_id"]


def test_the_state_at_an_unknown_checkpoint_is_404(client: httpx.Client):
    thread, latest = _thread_with_a_run(client)
    assert client.get(f"/threads/{thread}/state/{latest}").json()["checkpoint_id"] == latest
    _not_found(client.get(f"/threads/{thread}/state/{UNKNOWN}"))
    fresh = client.post("/threads", json={}).json()["thread_id"]  # before its first run, too
    _not_found(client.get(f"/threads/{fresh}/state/{UNKNOWN}"))


@pytest.mark.parametrize(
    "where",
    [{"before": UNKNOWN}, {"before": {"checkpoint_id": UNKNOWN}}, {"checkpoint": {"checkpoint_id": UNKNOWN}}],
    ids=["before", "before-object", "checkpoint"],
)
def test_a_history_page_around_an_unknown_checkpoint_is_404(client: httpx.Client, where: dict[str, Any]):
    thread, latest = _thread_with_a_run(client)
    older = client.post(f"/threads/{thread}/history", json={"before": latest, "limit": 1}).json()
    assert len(older) == 1 and older[0]["checkpoint_id"] != latest
    _not_found(client.post(f"/threads/{thread}/history", json=where))
    fresh = client.post("/threads", json={}).json()["thread_id"]
    _not_found(client.post(f"/threads/{fresh}/history", json=where))


@pytest.mark.parametrize(
    "fork",
    [{"checkpoint_id": UNKNOWN}, {"checkpoint": {"checkpoint_id": UNKNOWN}}],
    ids=["checkpoint_id", "checkpoint"],
)
def test_a_run_from_an_unknown_checkpoint_is_404_and_starts_nothing(
    client: httpx.Client, fork: dict[str, Any]
):
    thread, latest = _thread_with_a_run(client)
    run = {"assistant_id": "triggered_phase", "input": ASK, **fork}
    _not_found(client.post(f"/threads/{thread}/runs/wait", json=run))
    assert len(client.get(f"/threads/{thread}/runs").json()) == 1
    assert client.get(f"/threads/{thread}/state").json()["checkpoint_id"] == latest  # nothing ran


def test_the_native_checkpoint_routes_answer_404_for_an_unknown_checkpoint(client: httpx.Client):
    thread = unique("native-cp")
    body = {"message": "Summarise the roadmap in the docs folder.", "threadId": thread}
    assert stream(client, "POST", "/api/runs/triggered_phase/stream", json=body)[-1].type == "final"
    timeline = client.get(f"/api/threads/{thread}/checkpoints").json()
    known = timeline[-1]["checkpointId"]
    assert client.get(f"/api/threads/{thread}/checkpoints/{known}").status_code == 200
    _not_found(client.get(f"/api/threads/{thread}/checkpoints", params={"before": UNKNOWN}))
    _not_found(client.get(f"/api/threads/{thread}/checkpoints/{UNKNOWN}"))
    _not_found(client.post(f"/api/threads/{thread}/checkpoints/{UNKNOWN}/fork"))
    assert client.get(f"/api/threads/{thread}/checkpoints").json() == timeline  # no fork ran
