"""The JS ``@langchain/langgraph-sdk`` Client (tests/js/sdk.mjs, the version pinned in tests/js) against
``phasegraph serve``: every protocol holds a two-turn conversation streamed with ``values``, ``messages``
and ``custom``, and the calls a chat UI or Studio makes (state, history, search with sorting, update,
update_state, copy, subgraphs, joinStream with several modes, a stateless wait) answer as the SDK expects.
One script run per module; each test reads its own steps of the report."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.server.conftest import demo_server
from tests.server.js import PROTOCOLS, SECOND, Report, run_script

FIRST = {
    "triggered_phase": "Summarise the roadmap in the docs folder.",
    "unified": "Summarise the roadmap in the docs folder.",
    "goal_pursuit": "The Grey Fox found her compass at the lighthouse in chapter 3: give it back to her "
    "and note it in that chapter.",
    "agent_network": "Who works on the streaming server, and which roadmap milestone covers streaming?",
    "xml_contract": "Summarise the roadmap and say who is on the team.",
    "planner": "Set up a project for our spring launch",
}


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Report]:
    with demo_server(tmp_path_factory, "js-sdk") as server:
        yield run_script("sdk.mjs", server.url)


def _turn_messages(messages: list[dict[str, Any]], user_text: str) -> list[dict[str, Any]]:
    """The messages after the user's message ``user_text`` (that turn's part of the thread)."""
    index = max(i for i, m in enumerate(messages) if m["type"] == "human" and m["text"] == user_text)
    return messages[index + 1 :]


def _assert_renderable(turn: list[dict[str, Any]], tools: bool) -> None:
    """A chat UI's view of one turn: AI tool calls (``tools``: some), each answered by its ToolMessage,
    then the answer."""
    assert turn and turn[-1]["type"] == "ai" and turn[-1]["text"] and not turn[-1]["tool_calls"], turn
    assert all(m["type"] in ("ai", "tool") for m in turn), turn  # no tool output posing as a user message
    assert not any("<result" in m["text"] for m in turn), turn  # protocol-internal text stays in state
    calls = [name for m in turn if m["type"] == "ai" for name in m["tool_calls"]]
    results = [m["name"] for m in turn if m["type"] == "tool"]
    assert calls or not tools, f"no tool call visible in the thread's messages: {turn}"
    assert results == calls, (calls, results)
    assert all(m["status"] in ("success", "error") for m in turn if m["type"] == "tool"), turn


def test_assistants_search_lists_every_protocol(report: Report) -> None:
    assert sorted(report.ok("assistants.search")) == sorted(PROTOCOLS)


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_two_turns_stream_values_messages_and_custom(report: Report, protocol: str) -> None:
    previous: list[dict[str, Any]] = []
    for number, user_text in ((1, FIRST[protocol]), (2, SECOND)):
        turn = report.ok(f"{protocol}.runs.stream.turn{number}")
        assert turn["order"][0] == "metadata" and turn["order"][-1] == "end", turn["order"]
        assert "" not in turn["counts"], "a keep-alive reached the client as a chunk with no event name"
        assert turn["errors"] == [] and "error" not in turn["custom"], turn["errors"]
        assert turn["custom"].count("final") == 1, turn["custom"]
        assert turn["counts"].get("values", 0) >= 1 and turn["counts"].get("messages/metadata", 0) >= 1
        messages = turn["messages"]
        assert [m["text"] for m in messages if m["type"] == "human"] == [FIRST[protocol], SECOND][:number]
        assert messages[: len(previous)] == previous  # the thread goes on: turn 1 is kept as it was
        answer = messages[-1]["text"]
        streamed = set(turn["partial"]) | {m["text"] for m in turn["complete"]}
        assert answer in streamed, f"the answer never came on the messages stream: {answer!r} {streamed}"
        # every demo runs tools for its first message; goal_pursuit answers its follow-up from what it knows
        _assert_renderable(_turn_messages(messages, user_text), tools=number == 1)
        previous = messages


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_state_and_history_hold_the_conversation(report: Report, protocol: str) -> None:
    state = report.ok(f"{protocol}.threads.getState")
    assert state["next"] == []
    assert state["messages"] == report.ok(f"{protocol}.runs.stream.turn2")["messages"]
    history = report.ok(f"{protocol}.threads.getHistory")
    assert history["count"] == 5 and history["messages"][0] == len(state["messages"])


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_get_subgraphs(report: Report, protocol: str) -> None:
    subgraphs = report.ok(f"{protocol}.assistants.getSubgraphs")
    assert isinstance(subgraphs, list)
    if protocol == "planner":
        assert subgraphs, "the planner's plan steps run in a subgraph"


def test_threads_search_sorts_and_selects(report: Report) -> None:
    found = report.ok("threads.search.sorted")
    assert found["asc"] == list(PROTOCOLS)
    assert found["desc"] == list(reversed(PROTOCOLS))
    assert set(found["keys"]) <= {"thread_id", "created_at", "metadata"}, found["keys"]


def test_threads_update_merges_metadata(report: Report) -> None:
    updated = report.ok("threads.update")
    assert updated["title"] == "Roadmap chat" and updated["suite"]


def test_update_state_edits_a_message_as_studio_does(report: Report) -> None:
    edit = report.ok("threads.updateState")
    assert edit["after"]["last_ai"] == "An edited answer."
    assert edit["after"]["count"] == edit["before"]["count"]  # replaced by id, not appended
    assert edit["after"]["checkpoint_id"] != edit["before"]["checkpoint_id"]
    assert edit["written_checkpoint"] == edit["after"]["checkpoint_id"]


def test_threads_copy_copies_the_conversation(report: Report) -> None:
    copy = report.ok("threads.copy")
    assert not copy["same_id"] and copy["copied"] == copy["original"]


def test_join_stream_with_several_modes(report: Report) -> None:
    joined = report.ok("runs.joinStream")
    assert joined["counts"].get("values", 0) >= 1 and "final" in joined["custom"], joined["counts"]
    assert joined["order"][-1] == "end" and "" not in joined["counts"]
    assert not any(mode.startswith("messages") for mode in joined["counts"])  # only what was asked


def test_stateless_wait_leaves_no_thread(report: Report) -> None:
    waited = report.ok("runs.wait.stateless")
    assert waited["answer"] and waited["run"]["thread_id"]
    assert waited["new_threads"] == [], "the temporary thread is still listed after the run"
