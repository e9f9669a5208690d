"""Thread edits as Studio and the JS SDK make them, against ``phasegraph serve`` and ``langgraph dev``.

What each test asserts is what the reference server does with the same graphs: renaming a thread
(``threads.update``), a sorted and trimmed search, a state edit (``threads.update_state``), a copy
(``threads.copy``) and the planner's subgraph (``assistants.get_subgraphs``). What phasegraph adds
(refusals naming the field, projects, tokens) is in tests/server/test_langgraph_api_threads.py.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from langgraph_sdk import get_sync_client
from langgraph_sdk.client import SyncLangGraphClient
from langgraph_sdk.errors import UnprocessableEntityError

from tests.server.conftest import demo_server

ASK = {"messages": [{"role": "user", "content": "Summarise the roadmap in the docs folder."}]}
SCHEMAS = {"input_schema", "output_schema", "state_schema", "config_schema", "context_schema"}


@pytest.fixture(scope="module", params=["phasegraph", "langgraph-dev"])
def api(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The URL of one of the two servers."""
    if request.param == "langgraph-dev":
        yield request.getfixturevalue("studio")
        return
    with demo_server(tmp_path_factory, "lgedits") as server:
        yield server.url


@pytest.fixture
def client(api: str) -> Iterator[SyncLangGraphClient]:
    sdk = get_sync_client(url=api, timeout=60)
    yield sdk
    sdk.http.client.close()


def _assistant(client: SyncLangGraphClient, protocol: str) -> str:
    return str(client.assistants.search(graph_id=protocol)[0]["assistant_id"])


def _stopped(client: SyncLangGraphClient, **metadata: Any) -> str:
    """A triggered_phase thread stopped before its action phase."""
    thread_id = str(client.threads.create(metadata=metadata)["thread_id"])
    client.runs.wait(
        thread_id, _assistant(client, "triggered_phase"), input=ASK, interrupt_before=["action_phase"]
    )
    return thread_id


def test_update_merges_metadata(client: SyncLangGraphClient) -> None:
    thread_id = client.threads.create(metadata={"owner": "ann"})["thread_id"]
    updated = client.threads.update(thread_id, metadata={"title": "Roadmap"})
    assert updated["thread_id"] == thread_id and updated["metadata"] == {"owner": "ann", "title": "Roadmap"}
    assert client.threads.update(thread_id, metadata={"draft": None}, return_minimal=True) is None
    assert client.threads.get(thread_id)["metadata"] == {"owner": "ann", "title": "Roadmap", "draft": None}


def test_search_sorts_and_keeps_the_selected_fields(client: SyncLangGraphClient) -> None:
    tag = f"batch-{time.monotonic_ns()}"
    made = [client.threads.create(metadata={"batch": tag})["thread_id"] for _ in range(3)]
    selected = client.threads.search(
        metadata={"batch": tag}, sort_by="thread_id", sort_order="asc", select=["thread_id", "status"]
    )
    assert selected == [{"thread_id": t, "status": "idle"} for t in sorted(made)]
    oldest = client.threads.search(metadata={"batch": tag}, sort_by="created_at", sort_order="asc")
    assert [t["thread_id"] for t in oldest] == made
    newest = client.threads.search(metadata={"batch": tag}, sort_by="created_at", sort_order="desc")
    assert [t["thread_id"] for t in newest] == made[::-1]
    with pytest.raises(UnprocessableEntityError):
        client.threads.search(select=["context"])  # not a field of a thread


def test_update_state_writes_a_checkpoint(client: SyncLangGraphClient) -> None:
    thread_id = _stopped(client)
    before = client.threads.get_state(thread_id)
    written = client.threads.update_state(thread_id, {"draft": "edited"})
    checkpoint = written["checkpoint"]
    assert set(checkpoint) == {"thread_id", "checkpoint_ns", "checkpoint_id"}
    assert (checkpoint["thread_id"], checkpoint["checkpoint_ns"]) == (thread_id, "")
    assert written["configurable"] == checkpoint  # what the JS SDK's updateState returns
    after = client.threads.get_state(thread_id)
    assert after["checkpoint_id"] == checkpoint["checkpoint_id"]
    assert after["parent_checkpoint"]["checkpoint_id"] == before["checkpoint_id"]
    assert after["metadata"]["source"] == "update"
    assert (after["values"]["draft"], after["next"]) == ("edited", ["action_phase"])
    client.threads.update_state(thread_id, {"draft": "nothing to do"}, as_node="action_phase")
    assert client.threads.get_state(thread_id)["next"] == ["complete_turn"]


def test_copy_has_the_same_checkpoints_under_a_new_thread(client: SyncLangGraphClient) -> None:
    thread_id = _stopped(client, title="Original")
    copy = client.threads.copy(thread_id)
    assert copy["thread_id"] != thread_id
    assert copy["metadata"]["title"] == "Original" and copy["metadata"]["graph_id"] == "triggered_phase"
    original = client.threads.get_history(thread_id, limit=100)
    copied = client.threads.get_history(copy["thread_id"], limit=100)
    assert [s["checkpoint_id"] for s in copied] == [s["checkpoint_id"] for s in original]
    assert [(s["values"], s["next"]) for s in copied] == [(s["values"], s["next"]) for s in original]
    assert {s["checkpoint"]["thread_id"] for s in copied} == {copy["thread_id"]}
    client.runs.wait(copy["thread_id"], _assistant(client, "triggered_phase"), input=None)
    assert client.threads.get_state(copy["thread_id"])["next"] == []
    assert client.threads.get_state(thread_id)["next"] == ["action_phase"]  # the original stays


def test_the_planner_has_its_executor_subgraph(client: SyncLangGraphClient) -> None:
    planner = _assistant(client, "planner")
    found = client.assistants.get_subgraphs(planner)
    assert list(found) == ["execute_plan"] and set(found["execute_plan"]) == SCHEMAS
    assert "plan" in found["execute_plan"]["state_schema"]["properties"]
    assert list(client.assistants.get_subgraphs(planner, namespace="execute_plan", recurse=True)) == [
        "execute_plan"
    ]
    assert client.assistants.get_subgraphs(planner, namespace="nothing_here") == {}
    assert client.assistants.get_subgraphs(_assistant(client, "triggered_phase"), recurse=True) == {}
