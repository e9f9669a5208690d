"""Tool outputs of the unified loop: hidden in the thread's messages, handed to the model.

``create_agent`` feeds its model the thread's ``messages``, where a ``ToolMessage`` says only what
ran and how it ended unless ``show_tool_outputs`` is on (seed 000). What the model reads of each
call (the output, or ``ERROR: ...``) is kept by call id in the private ``tool_outputs`` field and
put back into the model's copy of the conversation at every model call, so the model reads exactly
what a plain tool loop would show it, in this turn and in the ones before.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Annotated, Any, NotRequired

from langchain.agents.middleware.types import AgentState, PrivateStateAttr
from langchain_core.messages import AnyMessage, BaseMessage, ToolMessage
from langgraph.types import Command

from phasegraph.nodes.conversation import refused_message, result_message
from phasegraph.tools import ToolResult


def merge_outputs(known: Mapping[str, str] | None, new: Mapping[str, str] | None) -> dict[str, str]:
    """Reducer: calls of one model message finish concurrently, each adds its own entry."""
    return {**(known or {}), **(new or {})}


class UnifiedState(AgentState[Any]):
    """``create_agent``'s state, with what the model reads of each tool call whose message hides it."""

    tool_outputs: NotRequired[Annotated[dict[str, str], PrivateStateAttr, merge_outputs]]  # reducer last


def answered_call(
    call: dict[str, Any],
    result: ToolResult,
    *,
    refusal: str | None,
    show_output: bool,
    rejected: bool = False,
) -> ToolMessage | Command[Any]:
    """The call's ``ToolMessage`` as the chat shows it, and what the model reads when that differs.

    ``rejected``: the refusal is a person's rejection (the message is marked so, see ``refused_message``).
    """
    if refusal is not None:
        message = refused_message(call, refusal, rejected=rejected)
    else:
        message = result_message(call, result, show_output=show_output)
    seen = result.as_text()
    if message.content == seen:
        return message
    return Command(update={"messages": [message], "tool_outputs": {call["id"]: seen}})


def model_view(messages: Sequence[AnyMessage], outputs: Mapping[str, str]) -> list[BaseMessage]:
    """The conversation as the model reads it: each tool message with the output kept for it."""
    return [
        m.model_copy(update={"content": outputs[m.tool_call_id]})
        if isinstance(m, ToolMessage) and m.tool_call_id in outputs
        else m
        for m in messages
    ]
