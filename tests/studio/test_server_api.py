"""The LangGraph Server API subset, driven by the real ``langgraph-sdk`` against both servers.

Every test runs twice: against ``phasegraph serve`` and against ``langgraph dev`` serving the same
graphs, so what it asserts is the reference server's behaviour, not our reading of it.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import pytest
from langgraph_sdk import get_sync_client
from langgraph_sdk.client import SyncLangGraphClient
from langgraph_sdk.errors import ConflictError, NotFoundError
from langgraph_sdk.schema import StreamPart

from phasegraph.nodes.emit import EVENT_KEY
from phasegraph.nodes.events import Event, parse_event
from tests.server.conftest import demo_server

#: A paced one-turn answer, so a test can act while the run is going.
SLOW = {"turns": [{"content": "The roadmap has two milestones, March and June. " * 4}], "chunk_delay_ms": 60}
ASK = "Summarise the roadmap in the docs folder."
PLANNER_ASK = "Create a project called Launch from the product launch template."
#: Per protocol: its first message, and a node the run passes through (stopped before it).
CASES = {
    "triggered_phase": (ASK, "action_phase"),
    "planner": (PLANNER_ASK, "call_planner"),
}
#: More parts than any run here produces: a stream that gets this far is not ending.
MAX_PARTS = 5_000


@pytest.fixture(scope="module")
def slow_model(tmp_path_factory: pytest.TempPathFactory) -> str:
    path = tmp_path_factory.mktemp("scripts") / "slow.json"
    path.write_text(json.dumps(SLOW), encoding="utf-8")
    return f"scripted:{path}"


@pytest.fixture(scope="module", params=["phasegraph", "langgraph-dev"])
def api(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, slow_model: str
) -> Iterator[str]:
    """The URL of one of the two servers (the slow script is an allowed model on ours)."""
    if request.param == "langgraph-dev":
        yield request.getfixturevalue("studio")
        return
    with demo_server(tmp_path_factory, "lgapi", PHASEGRAPH_ALLOWED_MODELS=slow_model) as server:
        yield server.url


@pytest.fixture
def client(api: str) -> Iterator[SyncLangGraphClient]:
    sdk = get_sync_client(url=api, timeout=60)
    yield sdk
    sdk.http.client.close()


def _ask(protocol: str) -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": CASES[protocol][0]}]}


def _parts(stream: Iterator[StreamPart]) -> list[StreamPart]:
    """Every part but ``end`` (the reference closes the stream instead of sending it)."""
    parts: list[StreamPart] = []
    for part in stream:
        if part.event != "end":
            parts.append(part)
        assert len(parts) < MAX_PARTS, "the run does not end"
    return parts


def _events(parts: list[StreamPart]) -> list[Event]:
    """Our events from the ``custom`` parts (a subgraph's come as ``custom|<namespace>``)."""
    return [
        parse_event(p.data[EVENT_KEY])
        for p in parts
        if p.event.split("|", 1)[0] == "custom" and EVENT_KEY in p.data
    ]


def _assistant(client: SyncLangGraphClient, protocol: str) -> str:
    found = client.assistants.search(graph_id=protocol)
    assert [a["graph_id"] for a in found] == [protocol]
    return str(found[0]["assistant_id"])


def _stream(
    client: SyncLangGraphClient, thread_id: str | None, protocol: str, **options: Any
) -> list[StreamPart]:
    options.setdefault("stream_mode", ["values", "updates", "custom"])
    return _parts(
        client.runs.stream(
            thread_id, _assistant(client, protocol), stream_subgraphs=True, context={}, **options
        )
    )


def _answer(values: dict[str, Any]) -> str:
    last = values["messages"][-1]
    assert last["type"] == "ai"
    return str(last["content"])


@pytest.mark.parametrize("protocol", CASES)
def test_assistants_give_schemas_and_a_drawable_graph(client: SyncLangGraphClient, protocol: str):
    assistant = client.assistants.get(_assistant(client, protocol))
    assert assistant["graph_id"] == protocol
    schemas = client.assistants.get_schemas(assistant["assistant_id"])
    assert "messages" in schemas["input_schema"]["properties"]
    assert "answer" in schemas["output_schema"]["properties"]
    assert "model" in schemas["context_schema"]["properties"]
    graph = client.assistants.get_graph(assistant["assistant_id"])
    assert CASES[protocol][1] in {node["id"] for node in graph["nodes"]}
    assert {"__start__", "__end__"} <= {node["id"] for node in graph["nodes"]} and graph["edges"]


@pytest.mark.parametrize("protocol", CASES)
def test_a_run_streams_metadata_then_steps_to_its_final_values(client: SyncLangGraphClient, protocol: str):
    thread_id = client.threads.create(metadata={"case": protocol})["thread_id"]
    parts = _stream(client, thread_id, protocol, input=_ask(protocol))
    assert parts[0].event == "metadata" and parts[0].data["run_id"]
    assert "error" not in [p.event for p in parts]
    events = _events(parts)
    assert [e.type for e in events].count("final") == 1
    final = next(e for e in events if e.type == "final")
    values = [p.data for p in parts if p.event == "values"]
    assert values[0]["messages"][0]["content"] == CASES[protocol][0]  # the input, applied
    assert parts[-1].event == "values" and _answer(parts[-1].data) == final.answer
    updated = {node for p in parts if p.event == "updates" for node in p.data}
    assert CASES[protocol][1] in updated
    thread = client.threads.get(thread_id)
    assert thread["status"] == "idle" and thread["metadata"]["case"] == protocol
    assert client.threads.search(metadata={"case": protocol}, limit=100)
    state = client.threads.get_state(thread_id)
    assert state["next"] == [] and _answer(state["values"]) == final.answer
    history = client.threads.get_history(thread_id, limit=100)
    assert history[0]["checkpoint_id"] == state["checkpoint_id"]
    assert [h["metadata"]["step"] for h in history] == sorted(
        (h["metadata"]["step"] for h in history), reverse=True
    )


@pytest.mark.parametrize("protocol", CASES)
def test_interrupt_before_a_node_then_resume_with_a_command(client: SyncLangGraphClient, protocol: str):
    node = CASES[protocol][1]
    thread_id = client.threads.create()["thread_id"]
    first = _stream(client, thread_id, protocol, input=_ask(protocol), interrupt_before=[node])
    assert "final" not in [e.type for e in _events(first)]
    assert [p.data for p in first if p.event == "updates"][-1] == {"__interrupt__": []}
    assert client.threads.get(thread_id)["status"] == "interrupted"
    assert client.threads.get_state(thread_id)["next"] == [node]
    rest = _stream(client, thread_id, protocol, command={"resume": "go on"})
    assert [e.type for e in _events(rest)].count("final") == 1
    assert client.threads.get_state(thread_id)["next"] == []
    assert client.threads.get(thread_id)["status"] == "idle"


def test_interrupt_after_a_node_stops_once_it_ran(client: SyncLangGraphClient):
    thread_id = client.threads.create()["thread_id"]
    first = _stream(
        client, thread_id, "triggered_phase", input=_ask("triggered_phase"), interrupt_after=["tool_phase"]
    )
    ran = [e for e in _events(first) if e.type == "tool_result"]
    assert len(ran) == 1 and "final" not in [e.type for e in _events(first)]  # stopped after the first tool
    assert client.threads.get_state(thread_id)["next"] == ["action_phase"]
    rest = _stream(client, thread_id, "triggered_phase", input=None)
    assert [e.type for e in _events(rest)].count("final") == 1


@pytest.mark.parametrize("protocol", CASES)
def test_a_run_from_an_earlier_checkpoint_forks_the_thread(client: SyncLangGraphClient, protocol: str):
    node = CASES[protocol][1]
    thread_id = client.threads.create()["thread_id"]
    _stream(client, thread_id, protocol, input=_ask(protocol))
    ended = client.threads.get_state(thread_id)
    before = [h for h in client.threads.get_history(thread_id, limit=100) if h["next"] == [node]][-1]
    forked = _stream(client, thread_id, protocol, checkpoint_id=before["checkpoint_id"])
    assert [e.type for e in _events(forked)].count("final") == 1
    now = client.threads.get_state(thread_id)
    assert now["checkpoint_id"] != ended["checkpoint_id"] and now["next"] == []
    history = client.threads.get_history(thread_id, limit=200)
    ids = {h["checkpoint_id"] for h in history}
    assert ended["checkpoint_id"] in ids  # the first branch is kept
    by_id = {h["checkpoint_id"]: h for h in history}
    chain, at = [], now["checkpoint_id"]
    while at in by_id:  # the new branch goes back through the checkpoint it started from
        chain.append(at)
        at = by_id[at]["parent_checkpoint_id"]
    assert before["checkpoint_id"] in chain and ended["checkpoint_id"] not in chain


@pytest.mark.parametrize("protocol", CASES)
def test_a_client_that_left_joins_the_run_after_its_last_event_id(
    client: SyncLangGraphClient, protocol: str, slow_model: str
):
    thread_id = client.threads.create()["thread_id"]
    seen: list[StreamPart] = []
    stream = client.runs.stream(
        thread_id, _assistant(client, protocol), input=_ask(protocol), context={"model": slow_model},
        stream_mode=["custom"], stream_resumable=True, on_disconnect="continue",
    )  # fmt: skip
    for part in stream:
        seen.append(part)
        if len(_events(seen)) == 3:
            break
    stream.close()  # the client goes away mid-run; the run goes on
    run_id = seen[0].data["run_id"]
    assert seen[-1].id
    rest = _parts(
        client.runs.join_stream(thread_id, run_id, stream_mode=["custom"], last_event_id=seen[-1].id)
    )
    assert {p.id for p in rest}.isdisjoint({p.id for p in seen})
    types = [e.type for e in _events(seen) + _events(rest)]
    assert types.count("final") == 1 and types[-1] == "final"
    assert client.runs.get(thread_id, run_id)["status"] == "success"


@pytest.mark.parametrize("protocol", CASES)
def test_cancel_a_running_run_and_reject_a_second_one(
    client: SyncLangGraphClient, protocol: str, slow_model: str
):
    thread_id = client.threads.create()["thread_id"]
    assistant = _assistant(client, protocol)
    run = client.runs.create(thread_id, assistant, input=_ask(protocol), context={"model": slow_model})
    deadline = time.monotonic() + 30
    while client.runs.get(thread_id, run["run_id"])["status"] != "running":
        assert time.monotonic() < deadline, "the run never started"
        time.sleep(0.05)
    with pytest.raises(ConflictError):
        client.runs.create(thread_id, assistant, input=_ask(protocol), multitask_strategy="reject")
    client.runs.cancel(thread_id, run["run_id"], wait=True)
    assert client.runs.get(thread_id, run["run_id"])["status"] == "interrupted"
    assert client.threads.get(thread_id)["status"] in ("interrupted", "idle")
    assert client.threads.get_state(thread_id)["values"]["messages"][0]["content"] == CASES[protocol][0]


@pytest.mark.parametrize("protocol", CASES)
def test_wait_returns_the_output_and_a_stateless_run_needs_no_thread(
    client: SyncLangGraphClient, protocol: str
):
    thread_id = client.threads.create()["thread_id"]
    output = client.runs.wait(thread_id, _assistant(client, protocol), input=_ask(protocol))
    assert isinstance(output, dict) and output["answer"] and _answer(output) == output["answer"]
    stateless = client.runs.wait(None, _assistant(client, protocol), input=_ask(protocol))
    assert isinstance(stateless, dict) and stateless["answer"] == output["answer"]
    parts = _stream(client, None, protocol, input=_ask(protocol), stream_mode="updates")
    assert parts[0].event == "metadata" and all(p.event.split("|")[0] == "updates" for p in parts[1:])


def test_deleting_a_thread_forgets_it(client: SyncLangGraphClient):
    thread_id = client.threads.create()["thread_id"]
    _stream(client, thread_id, "triggered_phase", input=_ask("triggered_phase"))
    client.threads.delete(thread_id)
    with pytest.raises(NotFoundError):
        client.threads.get(thread_id)
