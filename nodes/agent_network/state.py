"""Graph state of the agent-network protocol. Counters live here; their limits live in the Context."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any

from langchain_core.messages import AnyMessage
from langgraph.graph.message import add_messages
from typing_extensions import TypedDict

from phasegraph.nodes.events import Phase


class AgentNetworkInput(TypedDict):
    """What a caller sends: the conversation, ending with the user's message."""

    messages: Annotated[list[AnyMessage], add_messages]


class AgentNetworkOutput(TypedDict):
    """What a caller gets back: the answer, who gave it, and the logs that reproduce the run."""

    messages: Annotated[list[AnyMessage], add_messages]
    answer: str
    responder: str | None
    instructions: list[dict[str, Any]]
    execution_log: list[dict[str, Any]]
    tool_execution_log: dict[str, dict[str, Any]]


class AgentNetworkState(TypedDict):
    """Everything one run of a network tracks."""

    messages: Annotated[list[AnyMessage], add_messages]  # conversation across turns
    user_message: str  # the user's message this turn
    network: dict[str, Any]  # the NetworkSnapshot the run follows (pinned at its start)
    current_agent: str  # the agent in control
    control_epoch: int  # segment of continuous control (from 1; a handoff to another agent starts the next)
    handoff: str  # the note the last handoff left for the agent in control ("" when none)
    steps: int  # agent decisions made this turn
    tool_errors: int  # failed tool calls and refused decisions this turn
    decision: dict[str, Any] | None  # the last AgentDecision
    refusal: str | None  # why the last decision was not executed
    instructions: list[dict[str, Any]]  # each executed decision as an Instruction, in order
    execution_log: list[dict[str, Any]]  # ordered entries with previews (agent and tool steps)
    tool_execution_log: dict[str, dict[str, Any]]  # full tool payloads by execution_id
    model_calls: int  # model calls this turn, positions a scripted model
    phase: Phase  # the phase running or last run
    phase_index: int  # 1..N, incremented at each phase start
    answer: str  # the turn's answer
    responder: str | None  # the agent that responded


def progress(state: Mapping[str, Any]) -> dict[str, Any]:
    """Progress fields every agent-network event carries (from a state, or a state and its update)."""
    return {
        "phase": state["phase"],
        "phase_index": state["phase_index"],
        "step": state["steps"],
        "agent": state["current_agent"] or None,
        "epoch": state["control_epoch"] or None,
    }
