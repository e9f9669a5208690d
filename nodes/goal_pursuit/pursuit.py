"""Start and end of a pursuit: per-turn counters reset, one final answer with its structured result."""

from __future__ import annotations

from typing import Any

from langchain_core.messages import AIMessage, HumanMessage
from langgraph.runtime import Runtime

from phasegraph.nodes.answers import all_tools_failed, format_args
from phasegraph.nodes.emit import Emitter, reports_errors
from phasegraph.nodes.errors import ConfigurationError
from phasegraph.nodes.events import BudgetExhaustedEvent, Final
from phasegraph.nodes.goal_pursuit.context import GoalPursuitContext
from phasegraph.nodes.goal_pursuit.repository import open_repository
from phasegraph.nodes.goal_pursuit.resource_context import ResourceContext
from phasegraph.nodes.goal_pursuit.schemas import OperationPlan, PursuitAssessment, Resolution, read_action
from phasegraph.nodes.goal_pursuit.state import GoalPursuitState, progress, steps_used
from phasegraph.nodes.tool_calls import trace_tool_registration

STEP_BUDGET_ANSWER = (
    "I stopped after {steps} executed step(s), the most one turn may run, before the goal was resolved. Done:"
)
PLANNED_ANSWER = "Next action: {tool}({args}). {reason}"


@reports_errors
async def start_pursuit(state: GoalPursuitState, runtime: Runtime[GoalPursuitContext]) -> dict[str, Any]:
    """Take the user's message as the goal and reset the turn; the context carries over between turns."""
    messages = state.get("messages") or []
    if not messages or not isinstance(messages[-1], HumanMessage) or not messages[-1].text.strip():
        raise ConfigurationError("a turn must end with the user's message, which states the goal")
    registry = await runtime.context.open_tools()  # a Python tool that does not load fails here
    trace_tool_registration(Emitter(runtime.context, runtime.stream_writer), registry)
    await open_repository(runtime.context, state)  # one that cannot load fails here, before any model call
    goal = messages[-1].text.strip()
    return {
        "goal": goal,
        "resources": state.get("resources") or ResourceContext().model_dump(mode="json"),
        "context_chars": state.get("context_chars") or 0,
        "expanded_tools": state.get("expanded_tools") or [],
        "assessment": PursuitAssessment(remaining_work_summary=goal).model_dump(mode="json"),
        "hints": [],
        "discovery": None,
        "decision": None,
        "verdict": None,
        "last_planned_action": None,
        "approved": None,
        "exit": "",
        "results": [],
        "resource_changes": state.get("resource_changes") or [],
        "executed": [],
        "iteration": 0,
        "context_round": 0,
        "step": 0,
        "rejected_steps": 0,
        "model_calls": 0,
        "phase": "context_discovery",
        "phase_index": 0,
        "answer": "",
        "resolution": None,
        "operation_plan": None,
    }


async def finish_pursuit(state: GoalPursuitState, runtime: Runtime[GoalPursuitContext]) -> dict[str, Any]:
    """Emit the ``final`` event: the Resolution's response, the planned call, or the step-budget summary."""
    emitter = Emitter(runtime.context, runtime.stream_writer)
    meta = progress(state) | {"phase": "complete"}
    resolution = plan = None
    if state["approved"] is None:  # the step budget ended a pursue turn
        steps = steps_used(state)
        emitter.emit(
            BudgetExhaustedEvent, budget="steps", limit=runtime.context.max_steps, used=steps, **meta
        )
        done = PursuitAssessment.model_validate(state["assessment"]).finished_tasks
        answer = "\n".join([STEP_BUDGET_ANSWER.format(steps=steps), *(f"- {task}" for task in done)])
        exit_reason = "step_budget"
    else:
        action, exit_reason = read_action(state["approved"]), state["exit"] or "approved"
        if isinstance(action, Resolution):
            resolution, answer = action.model_dump(mode="json"), action.response
        else:
            plan, answer = action.model_dump(mode="json"), _planned_answer(action)
    emitter.emit(
        Final,
        answer=answer,
        fallback=state["approved"] is None,
        all_tools_failed=all_tools_failed(state["results"]),
        resolution=resolution,
        operation_plan=plan,
        exit=exit_reason,
        **meta,
    )
    await runtime.context.close_tools()  # the turn ends: no MCP session outlives it
    return {
        "messages": [AIMessage(answer)],
        "answer": answer,
        "resolution": resolution,
        "operation_plan": plan,
        "exit": exit_reason,
        "phase": "complete",
    }


def _planned_answer(plan: OperationPlan) -> str:
    return PLANNED_ANSWER.format(tool=plan.tool, args=format_args(plan.params), reason=plan.reason).strip()
