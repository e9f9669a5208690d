"""Graph state of the goal-pursuit protocol. Counters live here; their limits live in the Context."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any

from langchain_core.messages import AnyMessage
from langgraph.graph.message import add_messages
from pydantic import Field
from typing_extensions import TypedDict

from phasegraph.nodes.answers import GatheredResult
from phasegraph.nodes.events import Phase
from phasegraph.nodes.goal_pursuit.resource_context import ResourceContext
from phasegraph.nodes.goal_pursuit.schemas import (
    ActionDecision,
    DiscoveryPlan,
    OperationPlan,
    PursuitAssessment,
    RefinementDecision,
    Resolution,
)
from phasegraph.nodes.state_shapes import Holds

#: A planned action as state keeps it: an OperationPlan or a Resolution, told apart by its ``kind``.
Planned = Holds(Annotated[OperationPlan | Resolution, Field(discriminator="kind")] | None)


class GoalPursuitInput(TypedDict):
    """What a caller sends: the conversation, ending with the goal as the user's message."""

    messages: Annotated[list[AnyMessage], add_messages]


class GoalPursuitOutput(TypedDict):
    """What a caller gets back: the answer, and the determination's structured result."""

    messages: Annotated[list[AnyMessage], add_messages]
    answer: str
    resolution: dict[str, Any] | None  # the Resolution, when the pursuit ended with one
    operation_plan: dict[str, Any] | None  # the OperationPlan, when it ended with one (determine mode)


class GoalPursuitState(TypedDict):
    """Everything one pursuit tracks."""

    messages: Annotated[list[AnyMessage], add_messages]  # conversation across turns
    goal: str  # the user's message this turn
    # the ResourceContext (queried, excluded, filters, searches, segments)
    resources: Annotated[dict[str, Any], Holds(ResourceContext)]
    context_chars: int  # characters of the context's resource segments
    expanded_tools: list[str]  # tools shown with their full schema
    assessment: Annotated[dict[str, Any], Holds(PursuitAssessment)]  # the PursuitAssessment
    hints: list[str]  # exploration hints of the last refine verdict
    # the last DiscoveryPlan (routes the context loop)
    discovery: Annotated[dict[str, Any] | None, Holds(DiscoveryPlan | None)]
    # the ActionDecision of this iteration
    decision: Annotated[dict[str, Any] | None, Holds(ActionDecision | None)]
    # the RefinementDecision of this iteration
    verdict: Annotated[dict[str, Any] | None, Holds(RefinementDecision | None)]
    # OperationPlan or Resolution, kept as the max_iter fallback
    last_planned_action: Annotated[dict[str, Any] | None, Planned]
    # what the determination returned (approved or the fallback)
    approved: Annotated[dict[str, Any] | None, Planned]
    exit: str  # why the determination ended: approved, max_iterations, step_budget
    results: list[GatheredResult]  # tool results of this turn (pursue)
    resource_changes: list[dict[str, Any]]  # every change the tools made to the repository, oldest first
    executed: list[str]  # canonical signatures executed this turn
    iteration: int  # iteration of the current determination (1..max_iter; 0 before the first)
    context_round: int  # context round within the iteration (0 when a new iteration starts)
    step: int  # plans taken to execution this turn (numbers their calls), rejected ones included
    rejected_steps: int  # of those, the plans a person rejected: they never ran and use no step budget
    model_calls: int  # model calls this turn, positions a scripted model
    phase: Phase  # the phase running or last run
    phase_index: int  # 1..N, incremented at each phase start
    answer: str  # the turn's final answer
    resolution: Annotated[dict[str, Any] | None, Holds(Resolution | None)]
    operation_plan: Annotated[dict[str, Any] | None, Holds(OperationPlan | None)]


def steps_used(state: Mapping[str, Any]) -> int:
    """The steps of ``max_steps`` this turn used: the plans that ran (a rejected one never did)."""
    return int(state["step"] - state.get("rejected_steps", 0))


def progress(state: Mapping[str, Any]) -> dict[str, Any]:
    """Progress fields every goal-pursuit event carries (from a state, or a state and its update)."""
    return {
        "phase": state["phase"],
        "phase_index": state["phase_index"],
        "iteration": state["iteration"] or None,
        "context_round": state["context_round"] or None,
        "step": state["step"],
    }
