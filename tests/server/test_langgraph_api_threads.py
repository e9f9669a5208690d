"""Thread routes of the LangGraph API that Studio and the JS clients call, driven by ``langgraph-sdk``.

Renaming a thread (``threads.update``), sorting and trimming a search, editing state
(``threads.update_state``), copying a thread, and an assistant's subgraphs: each against a real
``phasegraph serve`` with tokens, each kept to the caller's project.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from langgraph_sdk import get_sync_client
from langgraph_sdk.client import SyncLangGraphClient
from langgraph_sdk.errors import ConflictError, NotFoundError, UnprocessableEntityError

from tests.server.conftest import Server, demo_server, slow_script

ASK = {"messages": [{"role": "user", "content": "Summarise the roadmap in the docs folder."}]}
TOKENS = "token-a:alpha;token-b:beta"
UNKNOWN_CHECKPOINT = "1f000000-0000-6000-8000-000000000000"


@pytest.fixture(scope="module")
def slow(tmp_path_factory: pytest.TempPathFactory) -> str:
    return slow_script(tmp_path_factory.mktemp("lgthreads-scripts"), 200)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, slow: str) -> Iterator[Server]:
    with demo_server(
        tmp_path_factory, "lgthreads", PHASEGRAPH_API_TOKENS=TOKENS, PHASEGRAPH_ALLOWED_MODELS=slow
    ) as s:
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
    assert updated["metadata"] == {
        "graph_id": "triggered_phase",
        "owner": "ann",
        "title": "Roadmap questions",
    }
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


def _latest_id(client: SyncLangGraphClient, thread_id: str) -> str:
    """The id of the thread's latest checkpoint."""
    return str(client.threads.get_state(thread_id)["checkpoint_id"])


def _ran(client: SyncLangGraphClient, **kwargs: Any) -> str:
    """A thread of triggered_phase with one finished turn (or stopped where ``kwargs`` say)."""
    thread_id: str = client.threads.create()["thread_id"]
    client.runs.wait(thread_id, "triggered_phase", input=ASK, **kwargs)
    return thread_id


# threads.search: sort_by, sort_order, select


def test_search_sorts_and_selects(client: SyncLangGraphClient) -> None:
    tag = {"batch": f"sort-{time.monotonic_ns()}"}
    made = [client.threads.create(metadata=tag)["thread_id"] for _ in range(3)]
    client.threads.update(made[0], metadata={"touched": True})  # the oldest is now the latest updated
    newest_first = client.threads.search(metadata=tag)
    assert [t["thread_id"] for t in newest_first] == made[::-1]  # created_at, desc: as before
    oldest_first = client.threads.search(metadata=tag, sort_by="created_at", sort_order="asc")
    assert [t["thread_id"] for t in oldest_first] == made
    by_update = client.threads.search(metadata=tag, sort_by="updated_at", sort_order="desc", limit=1)
    assert [t["thread_id"] for t in by_update] == [made[0]]
    by_id = client.threads.search(metadata=tag, sort_by="thread_id", sort_order="asc")
    assert [t["thread_id"] for t in by_id] == sorted(made)
    trimmed = client.threads.search(metadata=tag, select=["thread_id", "status"], sort_order="asc")
    assert trimmed == [{"thread_id": t, "status": "idle"} for t in made]


def test_search_sorts_by_status(client: SyncLangGraphClient) -> None:
    tag = {"batch": f"status-{time.monotonic_ns()}"}
    idle = client.threads.create(metadata=tag)["thread_id"]
    stopped = client.threads.create(metadata=tag)["thread_id"]
    client.runs.wait(stopped, "triggered_phase", input=ASK, interrupt_before=["action_phase"])
    found = client.threads.search(metadata=tag, sort_by="status", sort_order="asc", select=["thread_id"])
    assert found == [{"thread_id": idle}, {"thread_id": stopped}]  # "idle" < "interrupted"


def test_search_refuses_unknown_sorts_and_fields(server: Server) -> None:
    for body, field in (
        ({"sort_by": "name"}, "sort_by"),
        ({"sort_order": "up"}, "sort_order"),
        ({"select": ["thread_id", "secret"]}, "select"),
        ({"values": {"a": 1}}, "values"),
    ):
        refused = _raw(server, "POST", "/threads/search", json=body)
        assert refused.status_code == 422 and field in refused.text, (body, refused.text)


# threads.update_state


def test_update_state_writes_the_new_latest_checkpoint(client: SyncLangGraphClient) -> None:
    thread_id = _ran(client)
    before = client.threads.get_state(thread_id)
    written = client.threads.update_state(
        thread_id, {"messages": [{"role": "user", "content": "Edited in Studio."}], "draft": "x"}
    )
    checkpoint = written["checkpoint"]
    latest = _latest_id(client, thread_id)
    assert checkpoint == {"thread_id": thread_id, "checkpoint_ns": "", "checkpoint_id": latest}
    assert written["configurable"] == checkpoint  # what the JS SDK's updateState returns
    after = client.threads.get_state(thread_id)
    assert after["checkpoint_id"] == checkpoint["checkpoint_id"]
    assert after["parent_checkpoint_id"] == before["checkpoint_id"]
    assert after["metadata"]["source"] == "update"
    assert after["values"]["messages"][-1]["content"] == "Edited in Studio."
    assert after["values"]["messages"][-1]["type"] == "human"  # a message, not a raw dict
    assert after["values"]["draft"] == "x"
    assert client.threads.get_history(thread_id, limit=1)[0]["checkpoint_id"] == checkpoint["checkpoint_id"]


def test_update_state_as_a_node_sets_what_runs_next(client: SyncLangGraphClient) -> None:
    thread_id = _ran(client, interrupt_before=["action_phase"])
    assert client.threads.get_state(thread_id)["next"] == ["action_phase"]
    # as if the action phase had run and chosen nothing: the router after it reads the protocol's limits
    client.threads.update_state(thread_id, {"draft": "Nothing to do."}, as_node="action_phase")
    assert client.threads.get_state(thread_id)["next"] != ["action_phase"]
    client.threads.update_state(thread_id, None, as_node="__end__")  # clear what was left to run
    assert client.threads.get_state(thread_id)["next"] == []
    assert client.threads.get(thread_id)["status"] == "idle"


def test_update_state_forks_from_a_named_checkpoint(client: SyncLangGraphClient) -> None:
    thread_id = _ran(client)
    history = client.threads.get_history(thread_id, limit=100)
    older = history[-2]
    written = client.threads.update_state(thread_id, {"draft": "forked"}, checkpoint=older["checkpoint"])
    state = client.threads.get_state(thread_id)
    assert state["checkpoint_id"] == written["checkpoint"]["checkpoint_id"]
    assert state["parent_checkpoint_id"] == older["checkpoint_id"]
    deprecated = client.threads.update_state(
        thread_id, {"draft": "again"}, checkpoint_id=older["checkpoint_id"]
    )
    assert client.threads.get_state(thread_id)["parent_checkpoint_id"] == older["checkpoint_id"]
    assert deprecated["checkpoint"]["checkpoint_id"] != written["checkpoint"]["checkpoint_id"]


@pytest.mark.parametrize(
    ("values", "as_node", "named"),
    [
        ({"nope": 1}, None, "values.nope"),
        ({"cycles_used": "3"}, None, "values.cycles_used"),  # strictly: "3" is not 3
        ({"notes": ["a", 1]}, None, "values.notes[1]"),
        ({"proposed": {"id": 3}}, None, "values.proposed.id"),
        ({"messages": [{"role": "robot"}]}, None, "values.messages"),
        ({"draft": "x"}, "no_such_node", "as_node"),
    ],
)
def test_update_state_refuses_values_that_do_not_fit(
    client: SyncLangGraphClient, values: dict[str, Any], as_node: str | None, named: str
) -> None:
    thread_id = _ran(client)
    before = client.threads.get_state(thread_id)["checkpoint_id"]
    with pytest.raises(UnprocessableEntityError) as refused:
        client.threads.update_state(thread_id, values, as_node=as_node)
    assert named in refused.value.response.json()["message"]
    assert client.threads.get_state(thread_id)["checkpoint_id"] == before  # nothing was written


def test_update_state_refusals_by_thread(server: Server, client: SyncLangGraphClient, slow: str) -> None:
    thread_id = _ran(client)
    with pytest.raises(NotFoundError):  # a checkpoint the thread does not have
        client.threads.update_state(thread_id, {"draft": "x"}, checkpoint_id=UNKNOWN_CHECKPOINT)
    fresh = client.threads.create()["thread_id"]
    with pytest.raises(ConflictError):  # no run yet, no graph named: nothing says what the state is
        client.threads.update_state(fresh, {"draft": "x"})
    refused = _raw(server, "POST", f"/threads/{thread_id}/state", json={"values": [{"draft": "x"}]})
    assert refused.status_code == 422 and "values" in refused.text
    running = client.runs.create(thread_id, "triggered_phase", input=ASK, context={"model": slow})
    try:
        with pytest.raises(ConflictError):  # busy: the run would write over it
            client.threads.update_state(thread_id, {"draft": "x"})
    finally:
        client.runs.cancel(thread_id, running["run_id"], wait=True)


def test_update_state_of_a_thread_made_for_a_graph(client: SyncLangGraphClient) -> None:
    # no run yet: its metadata says whose state it holds; the first update acts as the graph's input
    thread_id = client.threads.create(metadata={"graph_id": "triggered_phase"})["thread_id"]
    client.threads.update_state(thread_id, {"messages": [{"role": "user", "content": "Seeded."}]})
    state = client.threads.get_state(thread_id)
    assert [m["content"] for m in state["values"]["messages"]] == ["Seeded."]
    assert client.threads.get(thread_id)["values"]["messages"][0]["type"] == "human"


# threads.copy


def test_copy_has_the_same_history_and_goes_its_own_way(client: SyncLangGraphClient) -> None:
    thread_id = _ran(client, interrupt_before=["action_phase"])
    client.threads.update(thread_id, metadata={"title": "Original"})
    copy = client.threads.copy(thread_id)
    assert copy["thread_id"] != thread_id
    assert copy["metadata"]["title"] == "Original" and copy["metadata"]["graph_id"] == "triggered_phase"
    assert copy["status"] == "interrupted"
    original_history = client.threads.get_history(thread_id, limit=100)
    copied_history = client.threads.get_history(copy["thread_id"], limit=100)
    assert [s["checkpoint_id"] for s in copied_history] == [s["checkpoint_id"] for s in original_history]
    assert [s["values"] for s in copied_history] == [s["values"] for s in original_history]
    assert {s["checkpoint"]["thread_id"] for s in copied_history} == {copy["thread_id"]}
    # the copy goes on from where the original stopped; the original stays where it was
    client.runs.wait(copy["thread_id"], "triggered_phase", input=None)
    assert client.threads.get(copy["thread_id"])["status"] == "idle"
    assert client.threads.get_state(copy["thread_id"])["values"]["answer"]
    assert client.threads.get_state(thread_id)["next"] == ["action_phase"]
    assert len(client.threads.get_history(thread_id, limit=100)) == len(original_history)


def test_a_copy_is_its_protocols_thread_before_any_run(server: Server, client: SyncLangGraphClient) -> None:
    copy = client.threads.copy(_ran(client))["thread_id"]
    for path, body in [  # another protocol's turn on it, by the LangGraph API and by phasegraph's route
        (f"/threads/{copy}/runs/wait", {"assistant_id": "unified", "input": ASK}),
        ("/api/runs/unified/stream", {"message": "Hi", "threadId": copy, "projectId": "alpha"}),
    ]:
        refused = _raw(server, "POST", path, json=body)
        assert refused.status_code == 409 and "belongs to protocol 'triggered_phase'" in refused.text
    assert client.threads.get(copy)["metadata"]["graph_id"] == "triggered_phase"
    asked = {"messages": [{"role": "user", "content": "Who is on the team?"}]}
    assert client.runs.wait(copy, "triggered_phase", input=asked)["answer"]  # its own protocol goes on


def test_copy_of_a_thread_with_no_run_and_of_nothing(server: Server, client: SyncLangGraphClient) -> None:
    empty = client.threads.create(metadata={"title": "empty"})["thread_id"]
    copy = client.threads.copy(empty)
    assert copy["metadata"]["title"] == "empty" and copy["values"] is None
    assert client.threads.get_history(copy["thread_id"]) == []
    assert _raw(server, "POST", "/threads/nope/copy").status_code == 404


# assistants.get_subgraphs


def test_the_planner_has_its_executor_subgraph(client: SyncLangGraphClient) -> None:
    found = client.assistants.get_subgraphs("planner")
    assert list(found) == ["execute_plan"]
    executor = found["execute_plan"]
    assert set(executor) == {
        "input_schema",
        "output_schema",
        "state_schema",
        "config_schema",
        "context_schema",
    }
    assert "plan" in executor["state_schema"]["properties"]
    assert set(client.assistants.get_subgraphs("planner", recurse=True)) == {"execute_plan"}
    assert set(client.assistants.get_subgraphs("planner", namespace="execute_plan")) == {"execute_plan"}
    assert client.assistants.get_subgraphs("planner", namespace="nothing_here") == {}
    assert client.assistants.get_subgraphs("triggered_phase", recurse=True) == {}
    with pytest.raises(NotFoundError):
        client.assistants.get_subgraphs("no_such_protocol")


# the state at a checkpoint given as an object (the JS SDK's getState(thread, checkpoint))


def test_state_at_a_checkpoint_object(server: Server, client: SyncLangGraphClient) -> None:
    thread_id = _ran(client)
    older = client.threads.get_history(thread_id, limit=100)[-2]
    at = f"/threads/{thread_id}/state/checkpoint"
    state = _raw(server, "POST", at, json={"checkpoint": older["checkpoint"]})
    assert state.status_code == 200 and state.json()["checkpoint_id"] == older["checkpoint_id"]
    latest = _raw(server, "POST", at, json={})
    assert latest.json()["checkpoint_id"] == client.threads.get_state(thread_id)["checkpoint_id"]
    unknown = {"checkpoint": {"checkpoint_id": UNKNOWN_CHECKPOINT}}
    assert _raw(server, "POST", at, json=unknown).status_code == 404
    elsewhere = {"checkpoint": {**older["checkpoint"], "thread_id": "another-thread"}}
    assert _raw(server, "POST", at, json=elsewhere).status_code == 404  # not a checkpoint of this thread


# every route above: in the caller's project only, with a token


def test_another_projects_thread_is_not_found_anywhere(
    server: Server, client: SyncLangGraphClient, other: SyncLangGraphClient
) -> None:
    thread_id = _ran(client)
    before = client.threads.get_state(thread_id)["checkpoint_id"]
    with pytest.raises(NotFoundError):
        other.threads.update_state(thread_id, {"draft": "theirs"})
    with pytest.raises(NotFoundError):
        other.threads.copy(thread_id)
    assert thread_id not in [t["thread_id"] for t in other.threads.search(limit=1000)]
    assert client.threads.get_state(thread_id)["checkpoint_id"] == before
    copy = client.threads.copy(thread_id)
    with pytest.raises(NotFoundError):
        other.threads.get(copy["thread_id"])  # the copy is in the same project as its original


@pytest.mark.parametrize(
    ("method", "path", "body"),
    [
        ("PATCH", "/threads/{t}", {"metadata": {"a": 1}}),
        ("POST", "/threads/{t}/state", {"values": {"draft": "x"}}),
        ("POST", "/threads/{t}/copy", None),
        ("POST", "/threads/{t}/state/checkpoint", {}),
        ("GET", "/assistants/planner/subgraphs", None),
        ("POST", "/threads/search", {"sort_by": "thread_id"}),
    ],
)
def test_every_new_route_needs_a_token(
    server: Server, client: SyncLangGraphClient, method: str, path: str, body: dict[str, Any] | None
) -> None:
    thread_id = client.threads.create()["thread_id"]
    answer = httpx.request(method, f"{server.url}{path.format(t=thread_id)}", json=body, timeout=30)
    assert answer.status_code == 401
