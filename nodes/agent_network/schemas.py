"""What an agent answers with (AgentDecision) and what a decision becomes when it runs (Instruction)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

Action = Literal["USE_TOOL", "ROUTE_TO_AGENT", "RESPOND"]


class ActionDetails(BaseModel):
    """The particulars of a decision; which fields count depends on the action."""

    tool: str | None = Field(default=None, description="USE_TOOL: the tool to call.")
    params: dict[str, Any] = Field(
        default_factory=dict, description="USE_TOOL: the tool's parameters you may provide."
    )
    target_agent: str | None = Field(
        default=None, description="ROUTE_TO_AGENT: the agent to hand control to."
    )
    message: str | None = Field(
        default=None,
        description="RESPOND: the answer to the user. ROUTE_TO_AGENT: a note for the next agent.",
    )


class AgentDecision(BaseModel):
    """One agent's decision: call a tool, hand control to another agent, or respond to the user."""

    action: Action = Field(description="USE_TOOL, ROUTE_TO_AGENT or RESPOND.")
    action_reasoning: str = Field(description="Why this action, in a sentence or two.")
    action_details: ActionDetails


def incomplete(decision: AgentDecision) -> str | None:
    """What a decision lacks for its action (a corrective retry asks for it), or None."""
    details = decision.action_details
    if decision.action == "USE_TOOL" and not details.tool:
        return "USE_TOOL needs action_details.tool (and its params)"
    if decision.action == "ROUTE_TO_AGENT" and not details.target_agent:
        return "ROUTE_TO_AGENT needs action_details.target_agent"
    if decision.action == "RESPOND" and not (details.message or "").strip():
        return "RESPOND needs the answer in action_details.message"
    return None


class Instruction(BaseModel):
    """An executed decision, as the run performed it (system parameters merged in)."""

    step: int
    epoch: int
    agent: str
    action: Action
    tool: str | None = None
    params: dict[str, Any] = Field(default_factory=dict)  # merged: agent's and system parameters
    target_agent: str | None = None
    message: str | None = None
    execution_id: str | None = None
