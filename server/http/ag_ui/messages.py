"""A thread's LangChain messages in AG-UI's message format (``MESSAGES_SNAPSHOT``, the state's ``messages``).

``HumanMessage`` → ``UserMessage``, ``AIMessage`` → ``AssistantMessage`` (its ``tool_calls`` as
``toolCalls``, arguments as a JSON string), ``ToolMessage`` → ``ToolMessage`` (``toolCallId``; a failed
call's text as ``error`` too), ``SystemMessage`` → ``SystemMessage``; content is the message's text.
Ids are the checkpointed messages' own (LangGraph's ``add_messages`` gives every message one when it is
stored), so a message keeps its id from run to run; a message stored without one is named after its
thread and position, which a thread that only appends keeps stable too.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from ag_ui.core import AssistantMessage, FunctionCall, SystemMessage, ToolCall, UserMessage
from ag_ui.core import Message as AgUiMessage
from ag_ui.core import ToolMessage as AgUiToolMessage
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.messages import SystemMessage as LcSystemMessage
from langchain_core.messages import ToolCall as LcToolCall


def message_id(message: Any, thread_id: str, index: int) -> str:
    """The AG-UI id of the thread's ``index``-th message: its own id, else one made from its place."""
    own = getattr(message, "id", None)
    return str(own) if own else f"{thread_id}-message-{index}"


def agui_messages(messages: Sequence[Any], thread_id: str) -> list[dict[str, Any]]:
    """The thread's messages as AG-UI message objects (JSON, camelCase, no nulls), in order.

    Anything that is not a chat message AG-UI has a role for (a ``RemoveMessage``, a function
    message) is left out.
    """
    out = []
    for index, message in enumerate(messages):
        converted = agui_message(message, message_id(message, thread_id, index))
        if converted is not None:
            out.append(converted.model_dump(mode="json", by_alias=True, exclude_none=True))
    return out


def agui_message(message: Any, id_: str) -> AgUiMessage | None:
    """One LangChain message as AG-UI's message of the same role (``None``: AG-UI has none)."""
    if not isinstance(message, BaseMessage):
        return None
    text = str(message.text)
    name = message.name or None
    if isinstance(message, HumanMessage):
        return UserMessage(id=id_, content=text, name=name)
    if isinstance(message, AIMessage):
        calls = [_call(call, f"{id_}-call-{n}") for n, call in enumerate(message.tool_calls)]
        return AssistantMessage(id=id_, content=text or None, tool_calls=calls or None, name=name)
    if isinstance(message, ToolMessage):
        error = (text or "error") if message.status == "error" else None
        return AgUiToolMessage(id=id_, content=text, tool_call_id=message.tool_call_id, error=error)
    if isinstance(message, LcSystemMessage):
        return SystemMessage(id=id_, content=text, name=name)
    return None


def _call(call: LcToolCall, fallback_id: str) -> ToolCall:
    """A LangChain tool call as AG-UI's: the call's id, the tool's name, the arguments as JSON text."""
    arguments = json.dumps(call.get("args") or {}, ensure_ascii=False, default=str)
    return ToolCall(
        id=call.get("id") or fallback_id, type="function",
        function=FunctionCall(name=call["name"], arguments=arguments),
    )  # fmt: skip
