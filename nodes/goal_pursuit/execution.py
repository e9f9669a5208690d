"""pursue mode: run the determined OperationPlan, record it as a finished task, determine again."""

from __future__ import annotations

from typing import Any, Literal

from langgraph.runtime import Runtime

from phasegraph.nodes.answers import GatheredResult, format_args
from phasegraph.nodes.approval import ask, needs_approval
from phasegraph.nodes.conversation import (
    call_message,
    refused_message,
    result_message,
    tool_counts,
    user_turn,
)
from phasegraph.nodes.emit import Emitter, reports_errors
from phasegraph.nodes.events import DuplicateToolCall, PhaseEnd, PhaseStart
from phasegraph.nodes.goal_pursuit.context import GoalPursuitContext
from phasegraph.nodes.goal_pursuit.repository import open_repository
from phasegraph.nodes.goal_pursuit.schemas import OperationPlan, PursuitAssessment
from phasegraph.nodes.goal_pursuit.state import GoalPursuitState, progress, steps_used
from phasegraph.nodes.tool_calls import NotRun, execute_tool_call, ran
from phasegraph.tools import ToolResult

#: Characters of a tool result the finished-task line keeps.
TASK_RESULT_CHARS = 200
ALREADY_RAN = "not run again: the same call already ran this turn (its result is above)"
#: What the thread shows for that call.
DUPLICATE_NOTE = "{name} did not run: the same call already ran this turn."


@reports_errors
async def execute_action(state: GoalPursuitState, runtime: Runtime[GoalPursuitContext]) -> dict[str, Any]:
    """Run the plan through the shared tool call (a call already made this turn is not repeated).

    A tool whose policy says ``confirm`` asks a person first, before anything is emitted (a resumed
    run starts this node again): a rejected call never runs and its reason becomes the step's
    result, an edited one runs with the edited arguments.
    """
    context, emitter = runtime.context, Emitter(runtime.context, runtime.stream_writer)
    if state["approved"] is None:  # the routers only come here with a plan; anything else is a wiring bug
        raise RuntimeError("execute_action entered without an approved plan")
    plan = OperationPlan.model_validate(state["approved"])
    registry = await context.open_tools()
    step = state["step"] + 1
    opened = {"phase": "execution", "phase_index": state["phase_index"] + 1, "step": step}
    meta = progress({**state, **opened})
    found = registry.get(plan.tool)  # the tool's own name, whichever spelling the plan used
    call: dict[str, Any] = {"id": call_id(state, step), "name": found.name if found else plan.tool}
    call["args"] = dict(plan.params)
    planned = registry.signature(call["name"], plan.params, context.project_id)
    verdict = None
    if planned not in state["executed"] and needs_approval(registry, call["name"]):
        verdict = await ask(context, emitter, registry, call, meta)
        call["args"] = verdict.args  # an edit runs with its arguments
    signature = registry.signature(call["name"], call["args"], context.project_id)
    repository = await open_repository(context, state)
    emitter.emit(PhaseStart, **meta)
    emitter.trace("orchestration_phase_start", **meta)
    duplicate = signature in state["executed"]
    if duplicate:
        emitter.emit(
            DuplicateToolCall,
            name=call["name"],
            args=call["args"],
            signature=signature,
            attempts=1,
            limit=0,
            **meta,
        )
        result: ToolResult = NotRun(status="error", error=ALREADY_RAN)
    else:
        result = await execute_tool_call(
            context, emitter, registry, call, signature, meta, verdict=verdict,
            turn_calls=tool_counts(state["messages"]),
        )  # fmt: skip
    text = result.as_text()
    reason = "executed" if result.status == "ok" else "tool_error"
    emitter.emit(PhaseEnd, reason=reason, **meta)
    emitter.trace("orchestration_phase_end", reason=reason, **meta)
    assessment = PursuitAssessment.model_validate(state["assessment"])
    task = f"{call['name']}({format_args(call['args'])}) [{result.status}]: {text[:TASK_RESULT_CHARS]}"
    assessment.finished_tasks.append(task)
    rejected = not duplicate and verdict is not None and not verdict.runs
    refusal = DUPLICATE_NOTE.format(name=call["name"]) if duplicate else None if ran(result) else result.error
    answer = (
        refused_message(call, refusal, rejected=rejected)
        if refusal
        else result_message(call, result, show_output=context.show_tool_outputs)
    )
    # only the call as it ran is a repeat from now on: a rejected plan, the one an edit replaced, or one past
    # its per-turn limit never ran, so proposing it again asks again (or is refused again)
    executed = list(dict.fromkeys([*state["executed"], *([signature] if ran(result) else [])]))
    return opened | {
        "messages": [call_message([call]), answer],
        "results": [
            *state["results"],
            GatheredResult(
                name=call["name"], args=call["args"], status=result.status, text=text, ran=ran(result)
            ),
        ],
        "executed": executed,
        "rejected_steps": state.get("rejected_steps", 0) + rejected,  # a rejection uses none of max_steps
        "assessment": assessment.model_dump(mode="json"),
        "resource_changes": repository.changes,
        # the next determination starts from scratch; the context and expanded tools stay
        "iteration": 0,
        "context_round": 0,
        "decision": None,
        "verdict": None,
        "last_planned_action": None,
        "approved": None,
        "exit": "",
    }


def call_id(state: GoalPursuitState, step: int) -> str:
    """The id of the turn's ``step``-th call, unique in the thread (later user messages add their number)."""
    turn = user_turn(state["messages"])
    return f"m{turn + 1}_step_{step}" if turn else f"step_{step}"


async def route_after_execution(
    state: GoalPursuitState, runtime: Runtime[GoalPursuitContext]
) -> Literal["next_step", "steps_spent"]:
    """Determine the next action until the step budget is spent."""
    return "steps_spent" if steps_used(state) >= runtime.context.max_steps else "next_step"
