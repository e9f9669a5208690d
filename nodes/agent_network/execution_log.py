"""The execution log (ordered entries with previews) and the tool execution log (full payloads).

Entries are JSON-safe dicts in the seed's two shapes, so they go into state, events, the
request's trace and the ``/run`` answer unchanged. Previews are cut at fixed lengths; full tool
payloads live only in the tool execution log, keyed by ``execution_id``.
"""

from __future__ import annotations

import json
import time
from typing import Annotated, Any, Literal, NotRequired

from pydantic import Field
from typing_extensions import TypedDict

from phasegraph.nodes.agent_network.schemas import Action
from phasegraph.nodes.tool_calls import ran
from phasegraph.tools import ToolResult

INPUT_PREVIEW = 80
REASONING_PREVIEW = 120
DETAILS_PREVIEW = 120
REQUEST_PREVIEW = 50
RESPONSE_PREVIEW = 100


class DecisionPreview(TypedDict):
    """An agent entry's decision, its reasoning and details cut to previews."""

    action: Action
    action_reasoning: str
    action_details: str


class AgentEntry(TypedDict):
    """An agent step of the execution log (``agent_entry``)."""

    type: Literal["agent"]
    step: int
    epoch: int
    agent_key: str
    input_preview: str
    decision: DecisionPreview
    prompt_chars: NotRequired[int]
    refused: NotRequired[str]  # why the decision was not executed


class ToolEntry(TypedDict):
    """A tool step of the execution log (``tool_entry``)."""

    type: Literal["tool"]
    step: int
    epoch: int
    agent_key: str
    tool_key: str
    execution_id: str
    request_preview: str
    response_preview: str
    status: Literal["ok", "error"]
    duration_ms: int


class ToolPayload(TypedDict):
    """A call's full record in the tool execution log (``tool_payload``)."""

    agent_key: str
    tool_key: str
    step: int
    epoch: int
    merged_params: dict[str, Any]
    result: str
    status: Literal["ok", "error"]
    duration_ms: int
    timestamp: float


#: An execution log entry, told apart by its ``type``.
LogEntry = Annotated[AgentEntry | ToolEntry, Field(discriminator="type")]


def preview(value: Any, limit: int) -> str:
    """One line of at most ``limit`` characters (JSON for anything but text)."""
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def agent_entry(
    step: int, epoch: int, agent: str, input_preview: str, decision: dict[str, Any], **extra: Any
) -> dict[str, Any]:
    """An agent step: who decided what, with previews (``extra``: prompt size, refusal)."""
    return {
        "type": "agent",
        "step": step,
        "epoch": epoch,
        "agent_key": agent,
        "input_preview": preview(input_preview, INPUT_PREVIEW),
        "decision": {
            "action": decision["action"],
            "action_reasoning": preview(decision["action_reasoning"], REASONING_PREVIEW),
            "action_details": preview(_given(decision["action_details"]), DETAILS_PREVIEW),
        },
        **extra,
    }


def _given(details: dict[str, Any]) -> dict[str, Any]:
    """The details the decision filled in (the preview spends no characters on empty fields)."""
    return {key: value for key, value in details.items() if value not in (None, "", {}, [])}


def tool_entry(
    step: int,
    epoch: int,
    agent: str,
    tool: str,
    execution_id: str,
    params: dict[str, Any],
    result: ToolResult,
) -> dict[str, Any]:
    """A tool step: previews of the request and the response; the payload goes to the tool log."""
    return {
        "type": "tool",
        "step": step,
        "epoch": epoch,
        "agent_key": agent,
        "tool_key": tool,
        "execution_id": execution_id,
        "request_preview": preview(params, REQUEST_PREVIEW),
        "response_preview": preview(result.as_text(), RESPONSE_PREVIEW),
        "status": result.status,
        "duration_ms": round(result.duration_ms),
    }


def tool_payload(
    step: int, epoch: int, agent: str, tool: str, params: dict[str, Any], result: ToolResult
) -> dict[str, Any]:
    """The full record of one tool call, as the tool execution log keeps it."""
    return {
        "agent_key": agent,
        "tool_key": tool,
        "step": step,
        "epoch": epoch,
        "merged_params": params,
        "result": result.as_text(),
        "status": result.status,
        "ran": ran(result),  # False: refused unrun (a person rejected it, past its per-turn limit)
        "duration_ms": round(result.duration_ms),
        "timestamp": time.time(),
    }


def current_segment(log: list[dict[str, Any]], agent: str, epoch: int) -> list[dict[str, Any]]:
    """Entries of ``agent``'s current continuous control: its epoch, after any other agent's last step.

    Epochs change only when control passes to another agent, so this is the tail of the log
    that belongs to ``epoch``; older epochs (other agents', or this agent's earlier turns) are
    never part of it.
    """
    segment: list[dict[str, Any]] = []
    for entry in reversed(log):
        if entry["epoch"] != epoch or entry["agent_key"] != agent:
            break
        segment.append(entry)
    return segment[::-1]


def summary(log: list[dict[str, Any]], limit: int) -> str:
    """The log as numbered lines of previews, newest kept when it must be cut to ``limit`` characters."""
    return newest_lines([_line(entry) for entry in log], limit, "entries")


def newest_lines(lines: list[str], limit: int, noun: str) -> str:
    """``lines`` joined, the oldest left out (and counted) when they exceed ``limit`` characters."""
    kept: list[str] = []
    size = 0
    for line in reversed(lines):
        if size + len(line) + 1 > limit:
            break
        kept.append(line)
        size += len(line) + 1
    omitted = len(lines) - len(kept)
    head = [f"({omitted} earlier {noun} omitted)"] if omitted else []
    return "\n".join([*head, *reversed(kept)])


def _line(entry: dict[str, Any]) -> str:
    where = f"step {entry['step']}, epoch {entry['epoch']}, {entry['agent_key']}"
    if entry["type"] == "tool":
        return (
            f"[{where}] tool {entry['tool_key']} ({entry['execution_id']}) {entry['status']}: "
            f"{entry['request_preview']} -> {entry['response_preview']}"
        )
    decision = entry["decision"]
    refused = f" REFUSED: {entry['refused']}" if entry.get("refused") else ""
    return f"[{where}] {decision['action']}: {decision['action_details']}{refused}"
