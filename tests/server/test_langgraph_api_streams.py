"""The LangGraph API's streams as the ecosystem's clients read them.

Stream modes ``messages`` (``messages/metadata``, ``/partial``, ``/complete``), ``messages-tuple`` and
``events`` (``astream_events`` v2 dicts, as CopilotKit's LangGraph agent reads them), joins asking for
several modes the JS SDK's way, stateless runs whose thread is gone when their client hears the end,
and keep-alives that no client parser turns into an event. Driven through ``langgraph-sdk`` and raw
HTTP against a real ``phasegraph serve``.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from langgraph_sdk import get_sync_client
from langgraph_sdk.client import SyncLangGraphClient

from phasegraph.nodes.emit import EVENT_KEY
from tests.helpers import turn, write_script
from tests.server.conftest import Server, demo_server, slow_script

ASK = {"messages": [{"role": "user", "content": "Summarise the roadmap in the docs folder."}]}
#: What ``@ag-ui/langgraph``'s agent (CopilotKit's ``LangGraphAgent``) asks for on every run.
COPILOTKIT_MODES = ["events", "values", "updates", "messages-tuple"]


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    folder = tmp_path_factory.mktemp("lgstream-scripts")
    (folder / "quiet").mkdir()
    # one chunk, after a silence longer than a keep-alive interval (5 s)
    quiet = write_script(folder / "quiet", turn("Done."), chunk_delay_ms=6_500)
    return {"slow": slow_script(folder, 80), "quiet": quiet}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, models: dict[str, str]) -> Iterator[Server]:
    with demo_server(tmp_path_factory, "lgstream", PHASEGRAPH_ALLOWED_MODELS=",".join(models.values())) as s:
        yield s


@pytest.fixture
def client(server: Server) -> Iterator[SyncLangGraphClient]:
    sdk = get_sync_client(url=server.url, timeout=60)
    yield sdk
    sdk.http.client.close()


def _parts(client: SyncLangGraphClient, thread_id: str | None, **kwargs: Any) -> list[Any]:
    return list(client.runs.stream(thread_id, kwargs.pop("assistant", "unified"), **kwargs))


def _texts(parts: list[Any]) -> str:
    return "".join(
        p.data[EVENT_KEY]["text"]
        for p in parts
        if p.event == "custom" and p.data[EVENT_KEY]["type"] == "text"
    )


def test_messages_mode_sends_metadata_then_the_message_so_far_then_whole_messages(
    client: SyncLangGraphClient,
):
    thread_id = client.threads.create()["thread_id"]
    parts = _parts(client, thread_id, input=ASK, stream_mode=["messages", "custom"])
    kinds = {p.event for p in parts}
    assert {"messages/metadata", "messages/partial", "messages/complete"} <= kinds
    introduced: set[str] = set()
    so_far: dict[str, str] = {}
    for part in parts:
        if part.event == "messages/metadata":
            ((message_id, meta),) = part.data.items()
            assert message_id not in introduced  # once per message, before its content
            introduced.add(message_id)
            assert meta["metadata"]["langgraph_node"] in ("model", "tools")
            assert meta["metadata"]["run_id"] == parts[0].data["run_id"]
        elif part.event in ("messages/partial", "messages/complete"):
            (message,) = part.data
            assert message["id"] in introduced
            if part.event == "messages/partial":  # the model's message so far: it only grows
                assert message["type"] == "ai" and message["content"].startswith(
                    so_far.get(message["id"], "")
                )
                so_far[message["id"]] = message["content"]
    assert "".join(so_far.values()) == _texts(parts)  # every streamed chunk, in order, once
    state = client.threads.get_state(thread_id)["values"]["messages"]
    whole = [p.data[0] for p in parts if p.event == "messages/complete"]
    stored = {m["id"]: m for m in state}
    assert whole and all(stored[m["id"]] == m for m in whole)  # whole messages are the thread's own
    assert {m["type"] for m in whole} == {"ai", "tool"}
    calls = [c["name"] for m in whole if m["type"] == "ai" for c in m["tool_calls"]]
    assert calls == ["list_files", "read_file", "read_file"]


def test_messages_tuple_still_streams_chunks_with_their_node(client: SyncLangGraphClient):
    parts = _parts(client, None, input=ASK, stream_mode=["messages-tuple", "custom"])
    tuples = [p.data for p in parts if p.event == "messages"]
    chunks = [chunk for chunk, _ in tuples if chunk["type"] == "AIMessageChunk"]
    assert "".join(c["content"] for c in chunks) == _texts(parts)
    assert {meta["langgraph_node"] for chunk, meta in tuples if chunk["type"] == "AIMessageChunk"} == {
        "model"
    }
    assert {chunk["type"] for chunk, _ in tuples} == {"AIMessageChunk", "ai", "tool"}  # then whole messages


def test_events_mode_is_astream_events_v2_from_the_run(client: SyncLangGraphClient):
    thread_id = client.threads.create()["thread_id"]
    parts = _parts(client, thread_id, input=ASK, stream_mode=["events", "custom"])
    events = [p.data for p in parts if p.event == "events"]
    run_id = parts[0].data["run_id"]
    assert set(events[0]) == {"event", "name", "run_id", "tags", "metadata", "data", "parent_ids"}
    assert (events[0]["event"], events[0]["name"], events[0]["run_id"]) == (
        "on_chain_start",
        "unified",
        run_id,
    )
    assert (events[-1]["event"], events[-1]["run_id"]) == ("on_chain_end", run_id)
    assert (
        events[-1]["data"]["output"]["messages"] == client.threads.get_state(thread_id)["values"]["messages"]
    )
    streamed = [e for e in events if e["event"] == "on_chat_model_stream"]
    assert "".join(e["data"]["chunk"]["content"] for e in streamed) == _texts(parts)
    for event in streamed:  # what CopilotKit's agent reads off each chunk
        chunk = event["data"]["chunk"]
        assert chunk["type"] == "AIMessageChunk" and chunk["response_metadata"] == {}
        assert chunk["tool_call_chunks"] == [] and chunk["id"].startswith("lc_run--")
        assert event["metadata"]["langgraph_node"] == "model" and event["metadata"]["thread_id"] == thread_id
        assert event["parent_ids"][0] == run_id
    models = {e["run_id"] for e in streamed}
    for model in models:  # each model call starts, streams, ends
        mine = [e["event"] for e in events if e["run_id"] == model]
        assert mine[0] == "on_chat_model_start" and mine[-1] == "on_chat_model_end"
    nodes = [e for e in events if e["event"] in ("on_chain_start", "on_chain_end") and e["run_id"] != run_id]
    for started in [e for e in nodes if e["event"] == "on_chain_start"]:
        ended = [e for e in nodes if e["event"] == "on_chain_end" and e["run_id"] == started["run_id"]]
        assert len(ended) == 1 and started["metadata"]["langgraph_node"] == started["name"]
        assert started["tags"] == [f"graph:step:{started['metadata']['langgraph_step']}"]
    tools = [e for e in events if e["event"] == "on_tool_end"]
    calls = [
        p.data[EVENT_KEY] for p in parts if p.event == "custom" and p.data[EVENT_KEY]["type"] == "tool_call"
    ]
    assert [(t["name"], t["data"]["input"]) for t in tools] == [(c["name"], c["args"]) for c in calls]
    assert [t["data"]["output"]["tool_call_id"] for t in tools] == [c["callId"] for c in calls]
    assert {t["data"]["output"]["type"] for t in tools} == {"tool"}
    assert {t["metadata"]["langgraph_node"] for t in tools} == {"tools"}


def test_a_subgraphs_events_belong_to_the_node_that_runs_it(client: SyncLangGraphClient):
    # the planner's plan runs in a subgraph (execute_plan): its steps' tools come from that node
    parts = _parts(client, None, assistant="planner", input=ASK, stream_mode="events", stream_subgraphs=True)
    events = [p.data for p in parts if p.event == "events"]
    tools = [(e["name"], e["metadata"]["langgraph_node"]) for e in events if e["event"] == "on_tool_start"]
    assert ("create_project", "execute_plan") in tools
    assert {node for _, node in tools} == {"run_tools", "execute_plan"}
    executing = [
        e["run_id"] for e in events if e["event"] == "on_chain_start" and e["name"] == "execute_plan"
    ]
    for event in events:
        if event["event"] == "on_tool_start" and event["metadata"]["langgraph_node"] == "execute_plan":
            assert event["parent_ids"] == [parts[0].data["run_id"], *executing]


def test_the_chat_model_events_reach_the_client_as_the_model_streams(server: Server, models: dict[str, str]):
    body = {
        "assistant_id": "unified",
        "input": ASK,
        "stream_mode": "events",
        "context": {"model": models["slow"]},
    }
    arrivals: list[tuple[float, dict[str, Any]]] = []
    with httpx.stream("POST", f"{server.url}/runs/stream", json=body, timeout=60) as answer:
        for line in answer.iter_lines():
            if line.startswith("data: {") and '"event":' in line:
                arrivals.append((time.monotonic(), json.loads(line[6:])))
    streamed = [at for at, e in arrivals if e["event"] == "on_chat_model_stream"]
    answer_chunks = streamed[-5:]  # "The roadmap has two milestones."
    # its five chunks come 80 ms apart from the model: a client gets them spread out, not at the end
    assert answer_chunks[-1] - answer_chunks[0] >= 0.2
    ended = next(at for at, e in arrivals if e["event"] == "on_chain_end" and e["name"] == "unified")
    assert ended - answer_chunks[0] >= 0.2


def test_copilotkits_run_request_is_taken_and_holds_a_conversation(
    server: Server, client: SyncLangGraphClient
):
    thread_id = client.threads.create()["thread_id"]
    for n, question in enumerate(["Summarise the roadmap in the docs folder.", "And the team?"]):
        body = {
            "assistant_id": "unified",
            "input": {
                "messages": [{"id": f"m{n}", "type": "human", "role": "user", "content": question}],
                "tools": [],
                "copilotkit": {"actions": [], "context": []},
            },
            "stream_mode": COPILOTKIT_MODES,
            "stream_subgraphs": True,
        }
        with httpx.stream(
            "POST", f"{server.url}/threads/{thread_id}/runs/stream", json=body, timeout=60
        ) as answer:
            assert answer.status_code == 200, answer.read()
            names = [line[7:] for line in answer.iter_lines() if line.startswith("event: ")]
        assert {"metadata", "events", "values", "updates", "messages", "end"} <= set(names)
    humans = [m for m in client.threads.get_state(thread_id)["values"]["messages"] if m["type"] == "human"]
    assert [m["content"] for m in humans] == ["Summarise the roadmap in the docs folder.", "And the team?"]


@pytest.mark.parametrize(
    ("extra", "says"),
    [
        ({"tools": [{"name": "confirm", "description": "ask the user"}]}, "input.tools: client-side tools"),
        ({"copilotkit": {"actions": [{"name": "x"}], "context": []}}, "input.copilotkit.actions"),
        ({"secret": 1}, "input.secret is not an input"),
    ],
)
def test_client_tools_the_protocols_would_not_run_are_refused(
    server: Server, extra: dict[str, Any], says: str
):
    body = {"assistant_id": "unified", "input": {**ASK, **extra}}
    answer = httpx.post(f"{server.url}/runs/wait", json=body, timeout=30)
    assert answer.status_code == 422 and says in answer.json()["message"], answer.text


@pytest.mark.parametrize(
    "query",
    [
        'stream_mode=["values","custom"]',  # the JS SDK's runs.joinStream
        "stream_mode=values&stream_mode=custom",  # langgraph-sdk's
    ],
)
def test_a_join_takes_several_modes_either_way(server: Server, client: SyncLangGraphClient, query: str):
    thread_id = client.threads.create()["thread_id"]
    run_id = client.runs.create(thread_id, "unified", input=ASK, stream_mode="custom")["run_id"]
    with httpx.stream(
        "GET", f"{server.url}/threads/{thread_id}/runs/{run_id}/stream?{query}", timeout=60
    ) as answer:
        assert answer.status_code == 200, answer.read()
        names = [line[7:] for line in answer.iter_lines() if line.startswith("event: ")]
    assert {"values", "custom"} <= set(names) and names[-1] == "end"
    for refused in ('stream_mode=["values","debug"]', "stream_mode=[values"):  # and what it cannot serve
        answer = httpx.get(f"{server.url}/threads/{thread_id}/runs/{run_id}/stream?{refused}", timeout=30)
        assert answer.status_code == 422 and "stream_mode" in answer.json()["detail"][0]["loc"], answer.text


def _listed(server: Server, thread_id: str) -> bool:
    found = httpx.post(f"{server.url}/threads/search", json={"ids": [thread_id]}, timeout=30).json()
    return bool(found) or httpx.get(f"{server.url}/threads/{thread_id}", timeout=30).status_code != 404


def test_a_stateless_runs_thread_is_gone_when_its_stream_ends(server: Server, models: dict[str, str]):
    body = {
        "assistant_id": "unified",
        "input": ASK,
        "stream_mode": "values",
        "context": {"model": models["slow"]},
    }
    with httpx.stream("POST", f"{server.url}/runs/stream", json=body, timeout=60) as answer:
        thread_id = answer.headers["content-location"].split("/")[2]
        assert _listed(server, thread_id)  # there while the run runs
        for line in answer.iter_lines():
            if line == "event: end":
                assert not _listed(server, thread_id)  # already gone when the end is heard
                break
        else:
            pytest.fail("no end part")


def test_a_stateless_runs_thread_is_gone_when_wait_answers(server: Server):
    answer = httpx.post(f"{server.url}/runs/wait", json={"assistant_id": "unified", "input": ASK}, timeout=60)
    assert answer.status_code == 200 and answer.json()["messages"]
    assert not _listed(server, answer.headers["content-location"].split("/")[2])


def _js_sdk_parts(raw: bytes) -> list[dict[str, Any]]:
    """The parts ``@langchain/langgraph-sdk``'s SSE decoder (libs/sdk/src/utils/sse.ts) yields.

    A blank line dispatches a part when an event, data, a retry *or an id seen before* is pending:
    it never forgets the last ``id``, so a blank line after a comment gives a part with no event.
    """
    parts, event, data, last_id = [], "", [], ""
    for line in raw.decode().splitlines():
        if not line:
            if event or data or last_id:
                parts.append({"id": last_id, "event": event, "data": "\n".join(data) or None})
            event, data = "", []
        elif not line.startswith(":"):
            name, _, value = line.partition(":")
            value = value.removeprefix(" ")
            if name == "event":
                event = value
            elif name == "data":
                data.append(value)
            elif name == "id":
                last_id = value
    return parts


def test_keepalives_are_comment_lines_no_client_reads_as_a_part(server: Server, models: dict[str, str]):
    body = {"assistant_id": "unified", "input": ASK, "stream_mode": ["values", "custom"],
            "context": {"model": models["quiet"]}}  # fmt: skip
    with httpx.stream("POST", f"{server.url}/runs/stream", json=body, timeout=60) as answer:
        raw = answer.read()
    assert b": heartbeat\n" in raw and b": heartbeat\n\n" not in raw  # a comment, then the next part's lines
    parts = _js_sdk_parts(raw)
    assert parts and all(p["event"] for p in parts), [p for p in parts if not p["event"]]
    assert parts[0]["event"] == "metadata" and parts[-1]["event"] == "end"
