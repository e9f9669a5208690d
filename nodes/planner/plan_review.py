"""``agent_review``: a reviewer model (profile quality) approves a plan, or sends it back with notes.

The reviewer is the project file's ``[models] "planner.reviewer"`` when it names one, else the
quality profile's model, else the run's.
"""

from __future__ import annotations

import json
from typing import Any, Literal

from langchain_core.messages import HumanMessage, SystemMessage
from langgraph.runtime import Runtime

from phasegraph.nodes.emit import Emitter, reports_errors
from phasegraph.nodes.events import PlanReview
from phasegraph.nodes.planner.asking import ask_accounted
from phasegraph.nodes.planner.context import PlannerContext
from phasegraph.nodes.planner.ledger import record_error
from phasegraph.nodes.planner.prompts import REVIEW_PROMPT
from phasegraph.nodes.planner.schemas import PlanVerdict
from phasegraph.nodes.planner.state import Plan, PlannerState, meta, model_position, public_plan
from phasegraph.nodes.planner.transcript import tool_answer

OPERATION = "plan_review"
#: What a plan's stored status becomes after each verdict.
STATUS_AFTER = {"approved": "approved", "needs_changes": "draft", "rejected": "rejected"}


@reports_errors
async def review_plan(state: PlannerState, runtime: Runtime[PlannerContext]) -> dict[str, Any]:
    """Ask the reviewer; an approved plan goes on to run, any other verdict back to the planner."""
    context, emitter = runtime.context, Emitter(runtime.context, runtime.stream_writer)
    plan = state["plan"]
    assert plan is not None  # routed here only with a plan
    asked = await ask_accounted(
        context,
        state["model_calls"],
        state["usage"],
        _prompt(plan),
        PlanVerdict,
        profile="quality",
        role="reviewer",
        operation=OPERATION,
        execution_mode="agent_review",
        position=model_position(state),
    )
    update: dict[str, Any] = {"model_calls": asked.model_calls, "usage": asked.usage}
    if asked.value is None:  # no usable verdict: the plan is not run unreviewed
        verdict = PlanVerdict(verdict="needs_changes", notes=f"The review failed: {asked.problem}")
        update["errors_logged"] = await record_error(
            context,
            state["errors_logged"],
            stage="plan_review",
            kind="review_failed",
            message=asked.problem or "",
            tool_name="agent_create_plan",
            execution_mode="agent_review",
        )
    else:
        verdict = asked.value
    fields = meta(state, context.context_type)
    emitter.emit(PlanReview, verdict=verdict.verdict, notes=verdict.notes, **fields)
    outcomes = dict(state["review_outcomes"])
    outcomes[verdict.verdict] = outcomes.get(verdict.verdict, 0) + 1
    status = STATUS_AFTER[verdict.verdict]
    review = verdict.model_dump()
    await (await context.planning()).plans.set_status(
        context.project_id, plan["plan_id"], status, review=review
    )
    update |= {"review_outcomes": outcomes, "plan": {**plan, "status": status}}
    if verdict.verdict == "approved":
        return update
    payload = {
        "status": verdict.verdict,
        "notes": verdict.notes,
        "plan": public_plan(plan),
        "message": "Not run. Revise the plan (agent_create_plan again) or answer the user.",
    }
    text, call = json.dumps(payload), {"id": plan["call_id"], "name": "agent_create_plan"}
    why = f"not run: the reviewer's verdict is {verdict.verdict}"
    message = tool_answer(call, text, show_output=context.show_tool_outputs, error=why)
    outputs = {**(state.get("tool_outputs") or {}), plan["call_id"]: text}
    return update | {"plan": None, "messages": [message], "tool_outputs": outputs}


async def route_after_review(state: PlannerState) -> Literal["approved", "sent_back"]:
    """Approved plans run; rejected ones and those needing changes go back to the planner."""
    return "approved" if state["plan"] is not None else "sent_back"


def _prompt(plan: Plan) -> list[Any]:
    steps = "\n".join(
        f"{s['id']}. {s['tool']}({json.dumps(s['args'])}) — {s['rationale']}"
        + (f" [after {', '.join(s['depends_on'])}]" if s["depends_on"] else "")
        for s in plan["steps"]
    )
    system = REVIEW_PROMPT.format(objective=plan["objective"], context_type=plan["context_type"], steps=steps)
    return [SystemMessage(system), HumanMessage("Give your verdict.")]
