"""Phase 3, action decision: execute one tool or finalize; the choice is kept as the last planned action."""

from __future__ import annotations

from typing import Any

from langgraph.runtime import Runtime

from phasegraph.nodes.emit import Emitter, reports_errors
from phasegraph.nodes.events import Decision
from phasegraph.nodes.goal_pursuit.context import GoalPursuitContext
from phasegraph.nodes.goal_pursuit.phases import run_phase
from phasegraph.nodes.goal_pursuit.schemas import ActionDecision, planned_action
from phasegraph.nodes.goal_pursuit.state import GoalPursuitState, progress
from phasegraph.tools import ToolRegistry
from phasegraph.tools.runner import argument_problem


@reports_errors
async def decide_action(state: GoalPursuitState, runtime: Runtime[GoalPursuitContext]) -> dict[str, Any]:
    """Ask for an ActionDecision; a call to an unknown tool or with bad parameters is corrected once."""
    registry = await runtime.context.open_tools()
    decision, update = await run_phase(
        runtime, state, "action_decision", ActionDecision, check=lambda d: unusable_call(d, registry)
    )
    planned = planned_action(decision)
    execution, final = decision.execution, decision.finalization
    Emitter(runtime.context, runtime.stream_writer).emit(
        Decision,
        decision_type=decision.decision_type,
        tool=execution.tool if execution and decision.decision_type == "execute" else None,
        params=execution.params if execution and decision.decision_type == "execute" else {},
        status=final.status if final and decision.decision_type == "finalize" else None,
        **progress({**state, **update}),
    )
    return update | {
        "decision": decision.model_dump(mode="json"),
        "last_planned_action": planned.model_dump(mode="json"),
        "verdict": None,
    }


def unusable_call(decision: ActionDecision, registry: ToolRegistry) -> str | None:
    """Why an execute decision cannot run as planned (unknown tool, wrong parameters), or None."""
    if decision.decision_type != "execute" or decision.execution is None:
        return None
    name, params = decision.execution.tool, decision.execution.params
    found = registry.get(name)
    if found is None:
        return f"there is no tool {name!r}; the tools are: {', '.join(registry.names())}"
    problem = argument_problem(found, params)
    return f"the parameters of {name} are wrong: {problem}" if problem is not None else None
