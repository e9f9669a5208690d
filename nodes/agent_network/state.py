"""Graph state of the agent-network protocol. Counters live here; their limits live in the Context."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any

from langchain_core.messages import AnyMessage
from langgraph.graph.message import add_messages
from typing_extensions import TypedDict

from phasegraph.nodes.agent_network.execution_log import LogEntry, ToolPayload
from phasegraph.nodes.agent_network.schemas import AgentDecision, Instruction
from phasegraph.nodes.events import Phase
from phasegraph.nodes.state_shapes import Holds
from phasegraph.tools.networks import NetworkSnapshot


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
    # the NetworkSnapshot the run follows (pinned at its start)
    network: Annotated[dict[str, Any], Holds(NetworkSnapshot)]
    current_agent: str  # the agent in control (a key of the network's agents; "" before the run opens one)
    control_epoch: int  # segment of continuous control (from 1; a handoff to another agent starts the next)
    handoff: str  # the note the last handoff left for the agent in control ("" when none)
    steps: int  # agent decisions made this turn
    tool_errors: int  # failed tool calls and refused decisions this turn
    decision: Annotated[dict[str, Any] | None, Holds(AgentDecision | None)]  # the last AgentDecision
    refusal: str | None  # why the last decision was not executed
    # each executed decision as an Instruction, in order
    instructions: Annotated[list[dict[str, Any]], Holds(list[Instruction])]
    # ordered entries with previews (agent and tool steps)
    execution_log: Annotated[list[dict[str, Any]], Holds(list[LogEntry])]
    # full tool payloads by execution_id
    tool_execution_log: Annotated[dict[str, dict[str, Any]], Holds(dict[str, ToolPayload])]
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
