"""Phase 2, context refinement: exclude, filter, collapse and sort so the decision reads what matters."""

from __future__ import annotations

from typing import Any, Literal

from langgraph.runtime import Runtime

from phasegraph.nodes.emit import Emitter, reports_errors
from phasegraph.nodes.goal_pursuit.context import GoalPursuitContext
from phasegraph.nodes.goal_pursuit.phases import report_changes, run_phase
from phasegraph.nodes.goal_pursuit.resource_context import ContextEditor, change_tools, tool_names
from phasegraph.nodes.goal_pursuit.schemas import DiscoveryPlan, RefinementPlan
from phasegraph.nodes.goal_pursuit.state import GoalPursuitState, progress


@reports_errors
async def refine_context(state: GoalPursuitState, runtime: Runtime[GoalPursuitContext]) -> dict[str, Any]:
    """Ask for a RefinementPlan and apply it in the seed's order: exclude, filter, collapse, sort."""
    context = runtime.context
    plan, update = await run_phase(runtime, state, "context_refinement", RefinementPlan)
    editor = ContextEditor(state["resources"], context.repository())
    editor.exclude(plan.exclude_resources)
    editor.filter_properties(plan.exclude_properties, plan.include_properties)
    asked = tool_names(await context.open_tools(), plan.collapse_tools)
    expanded, change = change_tools("collapsed", asked, state["expanded_tools"], state["expanded_tools"])
    if change is not None:
        editor.record(change)
    editor.sort(plan.sorted_segments)
    report_changes(Emitter(context, runtime.stream_writer), editor.changes, progress({**state, **update}))
    return update | {"resources": editor.dump(), "context_chars": editor.size(), "expanded_tools": expanded}


async def route_after_refinement(
    state: GoalPursuitState, runtime: Runtime[GoalPursuitContext]
) -> Literal["next_round", "decide"]:
    """Discover again while discovery still wanted more and rounds remain; else decide."""
    done = DiscoveryPlan.model_validate(state["discovery"]).is_empty()
    return "decide" if done or state["context_round"] >= runtime.context.max_context_rounds else "next_round"
