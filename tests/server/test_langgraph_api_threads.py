"""Thread routes of the LangGraph API that Studio and the JS clients call, driven by ``langgraph-sdk``.

Renaming a thread (``threads.update``), sorting and trimming a search, editing state
(``threads.update_state``), copying a thread, and an assistant's subgraphs: each against a real
``phasegraph serve`` with tokens, each kept to the caller's project.
"""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from langgraph_sdk import get_sync_client
from langgraph_sdk.client import SyncLangGraphClient
from langgraph_sdk.errors import NotFoundError

from tests.server.conftest import Server, demo_server

ASK = {"messages": [{"role": "user", "content": "Summarise the roadmap in the docs folder."}]}
TOKENS = "token-a:alpha;token-b:beta"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    with demo_server(tmp_path_factory, "lgthreads", PHASEGRAPH_API_TOKENS=TOKENS) as s:
        yield s


def _client(server: Server, token: str = "token-a") -> SyncLangGraphClient:
    return get_sync_client(url=server.url, headers={"Authorization": f"Bearer {token}"}, timeout=60)


@pytest.fixture
def client(server: Server) -> Iterator[SyncLangGraphClient]:
    sdk = _client(server)
    yield sdk
    sdk.http.client.close()


@pytest.fixture
def other(server: Server) -> Iterator[SyncLangGraphClient]:
    """A client whose token covers another project only."""
    sdk = _client(server, "token-b")
    yield sdk
    sdk.http.client.close()


def _raw(server: Server, method: str, path: str, **kwargs: object) -> httpx.Response:
    return httpx.request(
        method, f"{server.url}{path}", headers={"Authorization": "Bearer token-a"}, timeout=30, **kwargs
    )


def test_update_merges_metadata_and_renames(client: SyncLangGraphClient) -> None:
    thread = client.threads.create(metadata={"graph_id": "triggered_phase", "owner": "ann"})
    updated = client.threads.update(thread["thread_id"], metadata={"title": "Roadmap questions"})
    assert updated["metadata"] == {"graph_id": "triggered_phase", "owner": "ann", "title": "Roadmap questions"}
    assert updated["updated_at"] >= thread["updated_at"]
    client.threads.update(thread["thread_id"], metadata={"title": "Renamed"})
    again = client.threads.get(thread["thread_id"])
    assert again["metadata"]["title"] == "Renamed" and again["metadata"]["owner"] == "ann"
    found = client.threads.search(metadata={"title": "Renamed"})
    assert [t["thread_id"] for t in found] == [thread["thread_id"]]


def test_update_of_a_thread_that_had_a_run(client: SyncLangGraphClient) -> None:
    thread = client.threads.create()
    client.runs.wait(thread["thread_id"], "triggered_phase", input=ASK)
    updated = client.threads.update(thread["thread_id"], metadata={"title": "After a run"})
    assert updated["metadata"]["graph_id"] == "triggered_phase"  # the run's own keys stay
    assert updated["metadata"]["title"] == "After a run"
    assert updated["values"]["messages"][-1]["type"] == "ai"  # the thread as it stands, with its state


def test_update_minimal_answers_204(client: SyncLangGraphClient) -> None:
    thread = client.threads.create()
    assert client.threads.update(thread["thread_id"], metadata={"n": 1}, return_minimal=True) is None
    assert client.threads.get(thread["thread_id"])["metadata"] == {"n": 1}


def test_update_refuses_what_it_cannot_do(server: Server, client: SyncLangGraphClient) -> None:
    thread = client.threads.create()
    refused = _raw(server, "PATCH", f"/threads/{thread['thread_id']}", json={"metadata": {}, "ttl": 5})
    assert refused.status_code == 422 and "ttl" in refused.text
    assert _raw(server, "PATCH", "/threads/nope", json={"metadata": {"a": 1}}).status_code == 404


def test_update_stays_in_its_project(client: SyncLangGraphClient, other: SyncLangGraphClient) -> None:
    thread = client.threads.create(metadata={"title": "mine"})
    with pytest.raises(NotFoundError):
        other.threads.update(thread["thread_id"], metadata={"title": "theirs"})
    assert client.threads.get(thread["thread_id"])["metadata"] == {"title": "mine"}
