"""Two messages on one thread through the LangGraph API, for goal_pursuit, agent_network and planner.

A real ``phasegraph serve`` on sqlite and the Python ``langgraph_sdk``: the second message continues the
conversation (the demo scripts answer it from their follow-ups), and the thread's messages are what a
chat renders: the user's messages, tool calls answered by ToolMessages without their output, the answers.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from langgraph_sdk import get_sync_client
from langgraph_sdk.client import SyncLangGraphClient

from tests.server.conftest import Server, demo_server

CONVERSATIONS = {
    "goal_pursuit": (
        "The Grey Fox found her compass at the lighthouse in chapter 3: give it back and note it there.",
        "Where is the compass now?",
        ["human", "ai[move_item]", "tool", "ai[add_chapter_note]", "tool", "ai", "human", "ai"],
    ),
    "agent_network": (
        "Who works on streaming, and when is it due?",
        "What is planned for June?",
        ["human", "ai[search_files]", "tool", "ai[read_file]", "tool", "ai",
         "human", "ai[read_file]", "tool", "ai"],
    ),
    "planner": (
        "Set up the Spring Launch project",
        "What tasks does it have?",
        ["human", "ai[list_templates]", "tool", "ai[agent_create_plan]", "tool",
         "ai[list_templates,create_project,publish_context_document]", "tool", "tool", "tool", "ai",
         "human", "ai[list_tasks]", "tool", "ai"],
    ),
}  # fmt: skip
HIDDEN = "Its output is not shown (show_tool_outputs is off)."


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    with demo_server(tmp_path_factory, "conversations") as started:
        yield started


@pytest.fixture
def client(server: Server) -> Iterator[SyncLangGraphClient]:
    sdk = get_sync_client(url=server.url, timeout=120)
    yield sdk
    sdk.http.client.close()


def _tag(message: dict[str, Any]) -> str:
    calls = message.get("tool_calls") or []
    if message["type"] == "ai" and calls:
        return f"ai[{','.join(c['name'] for c in calls)}]"
    return str(message["type"])


@pytest.mark.parametrize("protocol", list(CONVERSATIONS))
def test_a_second_message_continues_the_thread(client: SyncLangGraphClient, protocol: str):
    first, second, shape = CONVERSATIONS[protocol]
    thread_id = client.threads.create()["thread_id"]
    answers = []
    for text in (first, second):
        said = {"messages": [{"role": "user", "content": text}]}
        values = client.runs.wait(thread_id, protocol, input=said)
        assert isinstance(values, dict) and "__error__" not in values, values
        answers.append(values["answer"])
    assert client.threads.get(thread_id)["status"] == "idle"
    messages = client.threads.get_state(thread_id)["values"]["messages"]
    assert [_tag(m) for m in messages] == shape
    assert [m["content"] for m in messages if m["type"] == "human"] == [first, second]
    assert [m["content"] for m in messages if m["type"] == "ai" and not m.get("tool_calls")] == answers
    called = [c["id"] for m in messages for c in m.get("tool_calls") or []]
    answered = [m for m in messages if m["type"] == "tool"]
    assert sorted(m["tool_call_id"] for m in answered) == sorted(called) and len(set(called)) == len(called)
    assert all(m["status"] == "success" and HIDDEN in m["content"] for m in answered)
    runs = client.runs.list(thread_id)
    assert len(runs) == 2 and all(r["status"] == "success" for r in runs)
