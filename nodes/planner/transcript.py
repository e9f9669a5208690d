"""The planner's thread as a chat shows it, and the session its model reads.

The thread's ``messages`` hold the planner's own steps (AI messages with their tool calls), one
``ToolMessage`` per call saying how it ended (its output only when ``show_tool_outputs`` is on),
and after a plan ran, its steps as calls of the plan executor. The model's session is the same
conversation with every result in full (``tool_outputs``) and without the executor's calls, which
the plan call's result already sums up.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, ToolMessage

from phasegraph.nodes.conversation import HIDDEN_OUTPUT, call_message, refused_message

#: Name of the AI message that carries a plan's steps as tool calls (the executor made them).
PLAN_EXECUTOR = "plan_executor"


def tool_answer(
    call: Mapping[str, Any], text: str, *, show_output: bool, error: str | None = None
) -> ToolMessage:
    """How ``call`` ended: ``text`` (what the model reads) when outputs are shown, else a sentence."""
    name = call["name"] or "unknown"
    status = "ok" if error is None else f"error ({error})"
    return ToolMessage(
        text if show_output else HIDDEN_OUTPUT.format(name=name, status=status),
        tool_call_id=call["id"],
        name=name,
        status="success" if error is None else "error",
    )


def not_run(call: Mapping[str, Any], why: str) -> ToolMessage:
    """The answer to a call that did not run (a guardrail, a confirmation, a broken call): why."""
    return refused_message({"id": call["id"], "name": call["name"] or "unknown"}, why)


def executor_calls(calls: Sequence[dict[str, Any]]) -> AIMessage:
    """The plan's steps as the tool calls the executor made (``{"id", "name", "args"}`` each)."""
    message = call_message(calls)
    message.name = PLAN_EXECUTOR
    return message


def session(messages: Sequence[BaseMessage], outputs: Mapping[str, str]) -> list[BaseMessage]:
    """The conversation the planner's model reads: full results, the executor's calls left out."""
    executed = {
        call["id"]
        for m in messages
        if isinstance(m, AIMessage) and m.name == PLAN_EXECUTOR
        for call in m.tool_calls
    }
    read: list[BaseMessage] = []
    for message in messages:
        if isinstance(message, AIMessage) and message.name == PLAN_EXECUTOR:
            continue
        if isinstance(message, ToolMessage):
            if message.tool_call_id in executed:
                continue
            if message.tool_call_id in outputs:
                message = message.model_copy(update={"content": outputs[message.tool_call_id]})
        read.append(message)
    return read
