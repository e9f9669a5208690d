"""Checks of a thread's ``messages`` as a chat UI renders them (issue 24), for graph and server tests."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage, convert_to_messages
from langgraph.checkpoint.memory import InMemorySaver

from phasegraph.graphs.registry import get_protocol
from phasegraph.graphs.run import RunResult
from phasegraph.nodes.conversation import HIDDEN_OUTPUT


def split_turns(messages: Sequence[BaseMessage]) -> list[list[BaseMessage]]:
    """The conversation cut before each user message."""
    turns: list[list[BaseMessage]] = []
    for message in messages:
        if isinstance(message, HumanMessage) or not turns:
            turns.append([])
        turns[-1].append(message)
    return turns


def chat_turns(messages: Sequence[BaseMessage | dict[str, Any]]) -> list[list[BaseMessage]]:
    """Check the chat shape of every turn and return the turns.

    Each turn is the user's message, then for every model step that called tools an ``AIMessage``
    with ``tool_calls`` followed by one ``ToolMessage`` per call (same id, same name, in order, a
    LangChain status), then the answer as a plain ``AIMessage``. Call ids are unique in the thread.
    """
    turns = split_turns(convert_to_messages(messages))
    ids: list[str] = []
    for turn in turns:
        assert isinstance(turn[0], HumanMessage), turn[0]
        answer = turn[-1]
        assert isinstance(answer, AIMessage) and not answer.tool_calls and answer.text, answer
        at = 1
        while at < len(turn) - 1:
            asked = turn[at]
            assert isinstance(asked, AIMessage) and asked.tool_calls, asked
            answered = turn[at + 1 : at + 1 + len(asked.tool_calls)]
            assert all(isinstance(m, ToolMessage) for m in answered), answered
            assert [(m.tool_call_id, m.name) for m in answered] == [  # type: ignore[union-attr]
                (c["id"], c["name"]) for c in asked.tool_calls
            ]
            assert all(m.status in ("success", "error") for m in answered)  # type: ignore[union-attr]
            ids += [c["id"] for c in asked.tool_calls]
            at += 1 + len(asked.tool_calls)
    assert len(ids) == len(set(ids)), ids
    return turns


def tool_messages(turn: Sequence[BaseMessage]) -> list[ToolMessage]:
    """The turn's tool messages."""
    return [m for m in turn if isinstance(m, ToolMessage)]


def calls(turn: Sequence[BaseMessage]) -> list[tuple[str, dict[str, Any]]]:
    """The turn's tool calls as (name, args), in order."""
    return [(c["name"], c["args"]) for m in turn if isinstance(m, AIMessage) for c in m.tool_calls]


def hidden(message: ToolMessage) -> bool:
    """The message says only that its call ran successfully: its output is not in it."""
    return message.status == "success" and message.text == HIDDEN_OUTPUT.format(
        name=message.name, status="ok"
    )


async def chat(
    collect: Any, protocol: str, messages: Sequence[str], **fields: Any
) -> tuple[list[RunResult], list[BaseMessage]]:
    """Send ``messages`` one after the other on one thread (MemorySaver).

    Returns each turn's result, and the thread's messages at the end.
    """
    saver, thread = InMemorySaver(), f"chat-{protocol}"
    results = [
        await collect(protocol, text, checkpointer=saver, thread_id=thread, **fields) for text in messages
    ]
    state = await get_protocol(protocol).compile(saver).aget_state({"configurable": {"thread_id": thread}})
    return results, list(state.values["messages"])
