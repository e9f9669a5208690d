"""Phase 4, refinement analysis: approve the decision, or refine the assessment and iterate."""

from __future__ import annotations

from typing import Any, Literal

from langgraph.runtime import Runtime

from phasegraph.nodes.emit import Emitter, reports_errors
from phasegraph.nodes.events import BudgetExhaustedEvent, Verdict
from phasegraph.nodes.goal_pursuit.context import GoalPursuitContext
from phasegraph.nodes.goal_pursuit.phases import run_phase
from phasegraph.nodes.goal_pursuit.schemas import AssessmentUpdate, PursuitAssessment, RefinementDecision
from phasegraph.nodes.goal_pursuit.state import GoalPursuitState, progress

DEFERRED_HINT = (
    "The last decision was approved but not run: execution is allowed from iteration {iteration}. "
    "Check its context again and decide anew."
)


@reports_errors
async def analyze_refinement(state: GoalPursuitState, runtime: Runtime[GoalPursuitContext]) -> dict[str, Any]:
    """Ask for a RefinementDecision; approval returns the planned action unless ``min_iter`` defers it."""
    verdict, update = await run_phase(runtime, state, "refinement_analysis", RefinementDecision)
    planned = state["last_planned_action"] or {}
    approved = verdict.verdict == "approve"
    deferred = (
        approved
        and planned.get("kind") == "operation_plan"
        and state["iteration"] <= runtime.context.min_iter
    )
    assessment, delta = PursuitAssessment.model_validate(state["assessment"]), dict[str, Any]()
    if verdict.refinement is not None and not approved:
        assessment, delta = evolve(assessment, verdict.refinement.assessment)
    Emitter(runtime.context, runtime.stream_writer).emit(
        Verdict,
        verdict=verdict.verdict,
        confidence=verdict.approval.confidence if verdict.approval and approved else None,
        assessment_delta=delta,
        deferred=deferred,
        **progress({**state, **update}),
    )
    return update | {
        "verdict": verdict.model_dump(mode="json"),
        "assessment": assessment.model_dump(mode="json"),
        "hints": verdict.refinement.exploration_hints if verdict.refinement and not approved else [],
        "approved": planned if approved and not deferred else None,
        "exit": "approved" if approved and not deferred else "",
        "context_round": 0,  # whatever comes next starts afresh
    }


def evolve(
    assessment: PursuitAssessment, change: AssessmentUpdate
) -> tuple[PursuitAssessment, dict[str, Any]]:
    """The assessment with the refinement's fields applied, and the fields that really changed."""
    current = assessment.model_dump()
    delta = {k: v for k, v in change.model_dump(exclude_none=True).items() if current.get(k) != v}
    return assessment.model_copy(update=delta), delta


async def route_after_analysis(
    state: GoalPursuitState, runtime: Runtime[GoalPursuitContext]
) -> Literal["execute", "finish", "refine", "deferred", "iterations_spent"]:
    """Approved plans run (pursue) or are returned; otherwise iterate until ``max_iter``."""
    approved = state["approved"]
    if approved is not None:
        runs = approved["kind"] == "operation_plan" and runtime.context.mode == "pursue"
        return "execute" if runs else "finish"
    if state["iteration"] >= runtime.context.max_iter:
        return "iterations_spent"
    verdict = state["verdict"] or {}
    return "deferred" if verdict.get("verdict") == "approve" else "refine"


async def defer_execution(state: GoalPursuitState, runtime: Runtime[GoalPursuitContext]) -> dict[str, Any]:
    """An approval came before ``min_iter`` allows execution: tell the next iteration why nothing ran."""
    allowed_from = runtime.context.min_iter + 1
    return {"hints": [*state["hints"], DEFERRED_HINT.format(iteration=allowed_from)]}


@reports_errors
async def return_last_planned(
    state: GoalPursuitState, runtime: Runtime[GoalPursuitContext]
) -> dict[str, Any]:
    """``max_iter`` reached: the last planned action becomes the determination's result."""
    Emitter(runtime.context, runtime.stream_writer).emit(
        BudgetExhaustedEvent,
        budget="iterations",
        limit=runtime.context.max_iter,
        used=state["iteration"],
        **progress(state),
    )
    return {"approved": state["last_planned_action"], "exit": "max_iterations"}


async def route_after_fallback(
    state: GoalPursuitState, runtime: Runtime[GoalPursuitContext]
) -> Literal["execute", "finish"]:
    """The returned plan runs in pursue mode like an approved one; a Resolution finishes."""
    plan = state["approved"] or {}
    return (
        "execute" if plan.get("kind") == "operation_plan" and runtime.context.mode == "pursue" else "finish"
    )
