"""Events of tool calls: a call about to run, its result, and calls refused or not executed.

``execution_id`` belongs to agent_network, ``step_index`` and ``group`` to xml_contract; the other
protocols leave them None. Refused and ignored calls are reported by the protocols whose rules
turn them away.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from phasegraph.nodes.events_base import EventBase


class ToolCall(EventBase):
    """A tool call that is about to run."""

    type: Literal["tool_call"] = "tool_call"
    call_id: str
    name: str
    args: dict[str, Any]
    signature: str
    #: agent_network: the key of the call's full payload in the tool execution log.
    execution_id: str | None = None
    #: xml_contract: the call's step in its block (from 1) and the block it belongs to.
    step_index: int | None = None
    group: str | None = None


class ToolResultEvent(EventBase):
    """A tool call finished; ``output`` only when the client asked for tool outputs."""

    type: Literal["tool_result"] = "tool_result"
    call_id: str
    name: str
    status: Literal["ok", "error"]
    duration_ms: float
    output: str | None = None
    error: str | None = None
    #: Set when the call never ran: a person ``rejected`` it, or it was ``refused`` (a limit, its arguments).
    not_run: Literal["rejected", "refused"] | None = None
    execution_id: str | None = None
    step_index: int | None = None
    group: str | None = None


class DuplicateToolCall(EventBase):
    """A call whose signature already ran this turn was refused."""

    type: Literal["duplicate_tool_call"] = "duplicate_tool_call"
    name: str
    args: dict[str, Any]
    signature: str
    attempts: int
    limit: int


class IgnoredToolCall(EventBase):
    """A tool call that was seen but deliberately not executed."""

    type: Literal["ignored_tool_call"] = "ignored_tool_call"
    name: str
    args: dict[str, Any] = Field(default_factory=dict)
    reason: Literal["after_first_call", "tools_unbound", "incomplete", "too_large"]


class ApprovalRequested(EventBase):
    """A call waits for a person's approval before it runs (its tool's policy says ``confirm``)."""

    type: Literal["approval_requested"] = "approval_requested"
    call_id: str
    name: str
    args: dict[str, Any]
    reason: str
    #: Why the last answer was not taken (an edit that breaks the tool's schema, an unknown decision).
    problem: str | None = None


class ApprovalAnswered(EventBase):
    """A person answered an approval: the call runs (maybe with edited arguments) or is rejected."""

    type: Literal["approval_answered"] = "approval_answered"
    call_id: str
    name: str
    decision: Literal["approve", "edit", "reject"]
    args: dict[str, Any]
    reason: str = ""
