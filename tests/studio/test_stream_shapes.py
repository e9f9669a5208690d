"""Stream modes ``events``, ``messages`` and ``messages-tuple``: phasegraph serve against langgraph dev.

The same unified run (the bundled demo script: text, tool calls, an answer) is streamed from both servers
and what a client reads is compared: the graph's and the nodes' chain events in order, the model's text
as chunks and as the message so far, the whole messages each node wrote, the tools' starts. phasegraph
builds these parts from its stored events and checkpoints, where the reference runs ``astream_events``;
the differences docs/clients.md names (no chunk for a call that only asks for a tool, ``data.input`` of
a start, ``on_tool_end``'s output a ToolMessage) are left out of the comparison.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from langgraph_sdk import get_sync_client

from tests.server.conftest import demo_server

ASK = {"messages": [{"role": "user", "content": "Summarise the roadmap in the docs folder."}]}
#: Two runs per server: asked for both, the reference sends ``messages-tuple`` parts only.
MODES = (["events", "messages"], ["messages", "messages-tuple"])


def _stream(url: str) -> list[tuple[str, Any]]:
    client = get_sync_client(url=url, timeout=120)
    try:
        parts: list[tuple[str, Any]] = []
        for modes in MODES:
            thread_id = client.threads.create()["thread_id"]
            run = client.runs.stream(thread_id, "unified", input=ASK, stream_mode=modes)
            parts += [(p.event, p.data) for p in run]
        return parts
    finally:
        client.http.client.close()


@pytest.fixture(scope="module")
def streams(
    studio: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, list[tuple[str, Any]]]]:
    with demo_server(tmp_path_factory, "shapes") as ours:
        yield {"phasegraph": _stream(ours.url), "reference": _stream(studio)}


def _events(parts: list[tuple[str, Any]], kind: str | None = None) -> list[dict[str, Any]]:
    return [data for event, data in parts if event == "events" and (kind is None or data["event"] == kind)]


def _texts(parts: list[tuple[str, Any]]) -> list[str]:
    """Each model call's text, from its ``on_chat_model_stream`` chunks (calls that wrote text)."""
    calls: dict[str, str] = {}
    for event in _events(parts, "on_chat_model_stream"):
        calls[event["run_id"]] = calls.get(event["run_id"], "") + event["data"]["chunk"]["content"]
    return [text for text in calls.values() if text]


def test_the_chain_events_are_the_references(streams: dict[str, list[tuple[str, Any]]]) -> None:
    ours, reference = streams["phasegraph"], streams["reference"]
    for parts in (ours, reference):
        events = _events(parts)
        assert (events[0]["event"], events[0]["name"], events[0]["parent_ids"]) == (
            "on_chain_start",
            "unified",
            [],
        )
        assert (events[-1]["event"], events[-1]["name"]) == ("on_chain_end", "unified")
    assert {frozenset(e) for e in _events(ours)} == {frozenset(e) for e in _events(reference)}

    def nodes(parts: list[tuple[str, Any]], kind: str) -> list[tuple[Any, ...]]:
        return [
            (
                e["name"],
                e["tags"],
                e["metadata"]["langgraph_node"],
                e["metadata"]["langgraph_step"],
                len(e["parent_ids"]),
            )
            for e in _events(parts, kind)
            if e["parent_ids"]
            and "langgraph_node" in e["metadata"]
            and e["name"] == e["metadata"]["langgraph_node"]
        ]

    assert nodes(ours, "on_chain_start") == nodes(reference, "on_chain_start")
    assert nodes(ours, "on_chain_end") == nodes(reference, "on_chain_end")


def test_the_chat_model_and_tool_events_are_the_references(streams: dict[str, list[tuple[str, Any]]]) -> None:
    ours, reference = streams["phasegraph"], streams["reference"]
    assert _texts(ours) == _texts(reference)
    for parts in (ours, reference):
        for event in _events(parts, "on_chat_model_stream"):
            assert len(event["parent_ids"]) == 2 and event["metadata"]["langgraph_node"] == "model"
    chunk_keys = {frozenset(e["data"]["chunk"]) for e in _events(ours, "on_chat_model_stream")}
    assert chunk_keys == {frozenset(e["data"]["chunk"]) for e in _events(reference, "on_chat_model_stream")}

    def tools(parts: list[tuple[str, Any]]) -> list[tuple[Any, ...]]:
        return [
            (e["name"], e["data"]["input"], e["metadata"]["langgraph_node"])
            for e in _events(parts, "on_tool_start")
        ]

    assert tools(ours) == tools(reference)


def test_the_messages_are_the_references(streams: dict[str, list[tuple[str, Any]]]) -> None:
    def whole(parts: list[tuple[str, Any]]) -> list[tuple[Any, ...]]:
        return [
            (
                m["type"],
                m["content"] if m["type"] == "ai" else "",
                [c["name"] for c in m.get("tool_calls", [])],
            )
            for event, data in parts
            if event == "messages/complete"
            for m in data
        ]

    def partial(parts: list[tuple[str, Any]]) -> list[str]:
        last: dict[str, str] = {}
        for event, data in parts:
            if event == "messages/partial":
                last[data[0]["id"]] = data[0]["content"]
        return [text for text in last.values() if text]

    def introduced_first(parts: list[tuple[str, Any]]) -> bool:
        introduced: set[str] = set()
        for event, data in parts:
            if event == "messages/metadata":
                introduced |= set(data)
            elif event in ("messages/partial", "messages/complete") and data[0]["id"] not in introduced:
                return False
        return True

    def tuples(parts: list[tuple[str, Any]]) -> tuple[str, list[str]]:
        chunks = "".join(
            d[0]["content"] for e, d in parts if e == "messages" and d[0]["type"] == "AIMessageChunk"
        )
        return chunks, [
            d[0]["type"] for e, d in parts if e == "messages" and d[0]["type"] != "AIMessageChunk"
        ]

    ours, reference = streams["phasegraph"], streams["reference"]
    assert whole(ours) == whole(reference)
    assert partial(ours) == partial(reference) == _texts(reference)
    assert introduced_first(ours) and introduced_first(reference)
    assert tuples(ours) == tuples(reference)
