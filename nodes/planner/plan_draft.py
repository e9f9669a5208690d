"""``agent_create_plan``: draft a plan by structured output, store it, and branch on its execution mode."""

from __future__ import annotations

import json
import time
from typing import Any, Literal, cast

from langchain_core.messages import HumanMessage, SystemMessage
from langgraph.runtime import Runtime
from pydantic import ValidationError

from phasegraph.nodes.emit import Emitter, reports_errors
from phasegraph.nodes.events import PlanCreated, PlanReadyForReview
from phasegraph.nodes.planner.asking import ask_accounted
from phasegraph.nodes.planner.context import PlannerContext
from phasegraph.nodes.planner.guidance import guidance_text
from phasegraph.nodes.planner.ledger import record_error, session_id
from phasegraph.nodes.planner.plan_rules import plan_problem
from phasegraph.nodes.planner.prompts import PLAN_PROMPT, CreatePlanArgs
from phasegraph.nodes.planner.schemas import PlanDraft
from phasegraph.nodes.planner.state import (
    ExecutionMode,
    PendingCall,
    Plan,
    PlannerState,
    PlanStep,
    meta,
    model_position,
    public_plan,
)
from phasegraph.nodes.planner.transcript import tool_answer
from phasegraph.tools import ToolRegistry
from phasegraph.tools.planning import PlanRecord, is_destructive

OPERATION = "plan_create"
#: The first status each execution mode stores a drafted plan with.
FIRST_STATUS: dict[ExecutionMode, str] = {
    "auto_execute": "approved",
    "draft_only": "pending_review",
    "agent_review": "draft",
}


@reports_errors
async def draft_plan(state: PlannerState, runtime: Runtime[PlannerContext]) -> dict[str, Any]:
    """Turn the plan call into a stored plan; a draft that cannot be used is an error the planner reads."""
    context, emitter = runtime.context, Emitter(runtime.context, runtime.stream_writer)
    call = state["plan_request"]
    assert call is not None  # routed here only with a request
    update: dict[str, Any] = {"plan_request": None}
    try:
        args = CreatePlanArgs.model_validate(call["args"])
    except ValidationError as exc:
        return update | await _refuse(
            state, context, call, f"invalid arguments: {exc.errors()[0]['msg']}", None
        )
    mode, registry = execution_mode(args), await context.open_tools()
    asked = await ask_accounted(
        context,
        state["model_calls"],
        state["usage"],
        _prompt(context, registry, args),
        PlanDraft,
        profile=context.session_profile,
        operation=OPERATION,
        execution_mode=mode,
        position=model_position(state),
        check=lambda draft: plan_problem(draft, registry, context.context_type, context.max_plan_steps),
    )
    update |= {"model_calls": asked.model_calls, "usage": asked.usage}
    if asked.value is None:
        return update | await _refuse(state, context, call, asked.problem or "no plan", mode)
    plan = _plan(context, registry, state, call, args, asked.value, mode)
    store = await context.planning()
    if (superseded := state["pending_plan"]) is not None:
        await store.plans.set_status(context.project_id, superseded["plan_id"], "superseded")
    await store.plans.save(_record(context, plan))
    fields = meta(cast(PlannerState, {**state, "plan": plan}), context.context_type)
    emitter.emit(PlanCreated, plan=public_plan(plan), **fields)
    update |= {"plans_made": state["plans_made"] + 1, "pending_plan": None}
    if plan["execution_mode"] != "draft_only":
        return update | {"plan": plan}
    emitter.emit(PlanReadyForReview, plan=public_plan(plan), reasoning=plan["reasoning"] or None, **fields)
    payload = {
        "status": "pending_review",
        "plan": public_plan(plan),
        "message": "Not run: the plan waits for the user's review. Show it and ask whether to run it.",
    }
    return update | {"pending_plan": plan} | _result(state, context, call, payload)


async def route_after_draft(state: PlannerState) -> Literal["auto_execute", "agent_review", "answered"]:
    """A plan to run goes to the executor, one to review to the reviewer; drafts and failures are answered."""
    plan = state["plan"]
    if plan is None:
        return "answered"
    return "agent_review" if plan["execution_mode"] == "agent_review" else "auto_execute"


def execution_mode(args: CreatePlanArgs) -> ExecutionMode:
    """The mode asked for; legacy ``auto_execute: false`` means draft_only; auto_execute by default."""
    if args.execution_mode is not None:
        return args.execution_mode
    return "draft_only" if args.auto_execute is False else "auto_execute"


def _prompt(context: PlannerContext, registry: ToolRegistry, args: CreatePlanArgs) -> list[Any]:
    tools = "\n".join(
        f"- {t.name}: {(t.description or t.name).splitlines()[0]} args {json.dumps(_params(s))}"
        for t, s in zip(registry, registry.schemas(), strict=True)
    )
    system = PLAN_PROMPT.format(
        objective=args.objective,
        context_type=context.context_type,
        guidance=guidance_text(context.context_type, context.entity_id),
        outputs=", ".join(args.requested_outputs) or "none named",
        entities=", ".join(args.priority_entities) or "none named",
        tools=tools,
        max_steps=context.max_plan_steps,
    )
    return [SystemMessage(system), HumanMessage(f"Draft the plan for: {args.objective}")]


def _params(schema: dict[str, Any]) -> dict[str, Any]:
    properties: dict[str, Any] = schema["function"]["parameters"].get("properties", {})
    return properties


def _plan(
    context: PlannerContext,
    registry: ToolRegistry,
    state: PlannerState,
    call: PendingCall,
    args: CreatePlanArgs,
    draft: PlanDraft,
    mode: ExecutionMode,
) -> Plan:
    reasoning = draft.reasoning
    destructive = [
        s.tool for s in draft.steps if (t := registry.get(s.tool)) is not None and is_destructive(t)
    ]
    if destructive and context.context_type == "project" and mode != "draft_only":
        mode = "draft_only"  # destructive steps in a project wait for the user's approval
        reasoning += f" (Held for review: {', '.join(destructive)} cannot be undone.)"
    return Plan(
        plan_id=f"plan-{context.request_id[:12]}-{state['plans_made'] + 1}",
        call_id=call["id"],
        objective=args.objective,
        context_type=context.context_type,
        execution_mode=mode,
        status=FIRST_STATUS[mode],
        steps=[cast(PlanStep, s.model_dump()) for s in draft.steps],
        reasoning=reasoning.strip(),
        requested_outputs=args.requested_outputs,
        priority_entities=args.priority_entities,
    )


def _record(context: PlannerContext, plan: Plan) -> PlanRecord:
    now = time.time()
    fields = {
        key: plan[key]
        for key in ("plan_id", "context_type", "execution_mode", "objective", "status", "steps")
    }
    return PlanRecord.model_validate(
        {
            **fields,
            "scope": context.project_id,
            "session_id": session_id(context),
            "request_id": context.request_id,
            "created_at": now,
            "updated_at": now,
        }
    )


async def _refuse(
    state: PlannerState, context: PlannerContext, call: PendingCall, problem: str, mode: str | None
) -> dict[str, Any]:
    """The plan call fails: the planner reads why, and the error is logged."""
    logged = await record_error(
        context,
        state["errors_logged"],
        stage="plan_create",
        kind="plan_invalid",
        message=problem,
        tool_name="agent_create_plan",
        execution_mode=mode,
    )
    payload = {"status": "error", "error": problem}
    return {"errors_logged": logged, "plan": None} | _result(state, context, call, payload, problem)


def _result(
    state: PlannerState,
    context: PlannerContext,
    call: PendingCall,
    payload: dict[str, Any],
    problem: str | None = None,
) -> dict[str, Any]:
    """The plan call's answer: the payload for the model, the chat's message of how it ended."""
    text = json.dumps(payload)
    message = tool_answer(call, text, show_output=context.show_tool_outputs, error=problem)
    return {"messages": [message], "tool_outputs": {**(state.get("tool_outputs") or {}), call["id"]: text}}
