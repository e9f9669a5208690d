"""Checks of what a thread's ``messages`` must be: a conversation a chat UI renders and a provider accepts."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver

from phasegraph.graphs.registry import get_protocol

HIDDEN = "Its output is not shown (show_tool_outputs is off)."


async def thread_messages(protocol: str, saver: InMemorySaver, thread_id: str = "t") -> list[BaseMessage]:
    """The thread's messages as its last checkpoint holds them."""
    graph = get_protocol(protocol).compile(saver)
    state = await graph.aget_state({"configurable": {"thread_id": thread_id}})
    messages: list[BaseMessage] = state.values["messages"]
    return messages


def check_shape(messages: Sequence[BaseMessage], *, shown: bool) -> list[ToolMessage]:
    """Every AI tool call is answered right after it, once, by id; returns the ToolMessages.

    Tool call ids are unique in the thread; a ToolMessage that ran ``success`` holds the output only
    when ``shown``; an ``error`` one says why. Only user, AI and tool messages are stored.
    """
    answers: list[ToolMessage] = []
    seen: set[str] = set()
    at = 0
    while at < len(messages):
        message = messages[at]
        assert isinstance(message, HumanMessage | AIMessage | ToolMessage), type(message)
        assert not isinstance(message, ToolMessage), f"a ToolMessage answers no call: {message}"
        at += 1
        if not isinstance(message, AIMessage) or not message.tool_calls:
            continue
        ids = [c["id"] for c in message.tool_calls]
        assert all(ids) and not seen & set(ids) and len(set(ids)) == len(ids), ids
        seen |= set(ids)
        following = messages[at : at + len(ids)]  # in any order, as providers accept them
        answered = [m.tool_call_id for m in following if isinstance(m, ToolMessage)]
        assert sorted(answered) == sorted(ids), following
        answers.extend(m for m in following if isinstance(m, ToolMessage))
        at += len(ids)
    for answer in answers:
        assert answer.status in ("success", "error") and answer.name
        if answer.status == "success":
            assert (HIDDEN not in answer.text) == shown, answer.text
    return answers


def shape(messages: Sequence[BaseMessage]) -> list[str]:
    """Each message as a short tag: human, ai, ai[calls...], tool:name:status."""
    tags = []
    for m in messages:
        if isinstance(m, ToolMessage):
            tags.append(f"tool:{m.name}:{m.status}")
        elif isinstance(m, AIMessage) and m.tool_calls:
            tags.append(f"ai[{','.join(c['name'] for c in m.tool_calls)}]")
        else:
            tags.append("ai" if isinstance(m, AIMessage) else "human")
    return tags


def turns(messages: Sequence[BaseMessage]) -> list[list[BaseMessage]]:
    """The thread cut at each user message."""
    cut: list[list[BaseMessage]] = []
    for m in messages:
        if isinstance(m, HumanMessage) or not cut:
            cut.append([])
        cut[-1].append(m)
    return cut


def calls_answered(prompt: Sequence[Any]) -> bool:
    """A prompt a provider accepts: each AI message's calls answered by the ToolMessages right after it."""
    for at, message in enumerate(prompt):
        if isinstance(message, AIMessage) and message.tool_calls:
            ids = [c["id"] for c in message.tool_calls]
            after = [m.tool_call_id for m in prompt[at + 1 : at + 1 + len(ids)] if isinstance(m, ToolMessage)]
            if sorted(after) != sorted(ids):
                return False
    return True
