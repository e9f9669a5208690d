"""What a thread's ``messages`` holds, in every protocol: the conversation a chat UI renders.

The user's messages, the assistant's text, and for every tool that ran an ``AIMessage`` carrying
the call followed by a ``ToolMessage`` saying how it ended. Raw tool output stays out of it unless
the run's ``show_tool_outputs`` is on (seed 000); each protocol still hands the output to its model
as it specifies, from its own state. Protocol-internal text lives in the protocol's own fields.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from phasegraph.tools import ToolResult

#: ``response_metadata`` key of a ToolMessage answering a call that never ran.
NOT_RUN = "phasegraph_not_run"
#: ``response_metadata`` key of a ToolMessage answering a call a person rejected (it never ran either).
REJECTED = "phasegraph_rejected"
#: What a ToolMessage says in place of the tool's output when outputs are hidden.
HIDDEN_OUTPUT = "{name} ran: {status}. Its output is not shown (show_tool_outputs is off)."


def user_turn(messages: Sequence[BaseMessage]) -> int:
    """Which user message of the thread is being answered (0: the first), from the conversation."""
    return max(0, sum(isinstance(m, HumanMessage) for m in messages) - 1)


def turn_messages(messages: Sequence[BaseMessage]) -> list[BaseMessage]:
    """The current turn: the last user message and everything after it."""
    for at in range(len(messages) - 1, -1, -1):
        if isinstance(messages[at], HumanMessage):
            return list(messages[at:])
    return list(messages)


def tool_counts(messages: Sequence[BaseMessage]) -> Counter[str]:
    """How many calls of each tool the current turn answered so far (for per-turn call limits)."""
    return Counter(
        m.name
        for m in turn_messages(messages)
        if isinstance(m, ToolMessage) and m.name and not m.response_metadata.get(NOT_RUN)
    )


def dialogue(messages: Sequence[BaseMessage]) -> list[BaseMessage]:
    """The conversation without its tool exchanges: the user's messages and the assistant's answers.

    What a protocol that hands its model tool results its own way (notes, ``<result>`` tags) shows
    it of the thread: valid for every provider, with tools bound or not.
    """
    return [
        m
        for m in messages
        if not isinstance(m, ToolMessage) and not (isinstance(m, AIMessage) and m.tool_calls)
    ]


def call_message(calls: Sequence[dict[str, Any]], text: str = "") -> AIMessage:
    """The assistant's message asking for ``calls`` (each ``{"id", "name", "args"}``)."""
    return AIMessage(
        content=text,
        tool_calls=[
            {"id": c["id"], "name": c["name"], "args": c["args"], "type": "tool_call"} for c in calls
        ],
    )


def result_message(call: dict[str, Any], result: ToolResult, *, show_output: bool) -> ToolMessage:
    """How the call ended, as the chat shows it: its output only when outputs are shown.

    ``status`` is ``success`` or ``error`` (LangChain's ToolMessage statuses); an error keeps its
    message, which names no secret (results are redacted before this).
    """
    ok = result.status == "ok"
    if show_output:
        content = result.as_text()
    else:
        content = HIDDEN_OUTPUT.format(name=call["name"], status="ok" if ok else f"error ({result.error})")
    return ToolMessage(
        content=content,
        tool_call_id=call["id"],
        name=call["name"],
        status="success" if ok else "error",
    )


def refused_message(call: dict[str, Any], why: str, *, rejected: bool = False) -> ToolMessage:
    """The answer to a call that was not run (a duplicate, past a budget, rejected, ...): why, as an error.

    Marked as not run, so per-turn call limits do not count it; a call a person rejected is marked
    ``rejected`` too, so no tool budget counts it (it is no tool error either).
    """
    return ToolMessage(
        content=why,
        tool_call_id=call["id"],
        name=call["name"],
        status="error",
        response_metadata={NOT_RUN: True, **({REJECTED: True} if rejected else {})},
    )


def is_rejected(message: BaseMessage) -> bool:
    """Whether ``message`` answers a call a person rejected."""
    return isinstance(message, ToolMessage) and bool(message.response_metadata.get(REJECTED))
