"""Phase 1, context discovery: search, load and expand until the context is enough to decide."""

from __future__ import annotations

import asyncio
from typing import Any, Literal

from langgraph.runtime import Runtime

from phasegraph.nodes.emit import Emitter, reports_errors
from phasegraph.nodes.goal_pursuit.context import GoalPursuitContext
from phasegraph.nodes.goal_pursuit.phases import report_changes, run_phase
from phasegraph.nodes.goal_pursuit.resource_context import ContextEditor, change_tools, tool_names
from phasegraph.nodes.goal_pursuit.schemas import DiscoveryPlan
from phasegraph.nodes.goal_pursuit.state import GoalPursuitState, progress


@reports_errors
async def discover_context(state: GoalPursuitState, runtime: Runtime[GoalPursuitContext]) -> dict[str, Any]:
    """Ask for a DiscoveryPlan and apply it: searches are listed, resources loaded, tools expanded.

    A round opened after a decision starts the next iteration.
    """
    context = runtime.context
    starts_iteration = state["context_round"] == 0
    rounds: dict[str, Any] = {
        "iteration": state["iteration"] + 1 if starts_iteration else state["iteration"],
        "context_round": state["context_round"] + 1,
    }
    current: GoalPursuitState = {**state, **rounds}  # type: ignore[typeddict-item]
    plan, update = await run_phase(runtime, current, "context_discovery", DiscoveryPlan)
    editor = ContextEditor(state["resources"], context.repository())
    for query in plan.search_queries:  # SQLite: off the event loop
        await asyncio.to_thread(editor.search, query, context.search_limit)
    editor.load(plan.query_resources)
    registry = await context.open_tools()
    asked = tool_names(registry, plan.expand_tools)
    expanded, change = change_tools("expanded", asked, registry.names(), state["expanded_tools"])
    if change is not None:
        editor.record(change)
    update |= rounds
    report_changes(Emitter(context, runtime.stream_writer), editor.changes, progress({**current, **update}))
    return update | {
        "resources": editor.dump(),
        "context_chars": editor.size(),
        "expanded_tools": expanded,
        "discovery": plan.model_dump(mode="json"),
    }


async def route_after_discovery(
    state: GoalPursuitState, runtime: Runtime[GoalPursuitContext]
) -> Literal["refine", "next_round", "decide"]:
    """Refine when the context is over its budget or discovery flagged irrelevant parts; else go on.

    Discovery that asks for nothing more ends the context loop, as does the round limit.
    """
    plan, context = DiscoveryPlan.model_validate(state["discovery"]), runtime.context
    if plan.refinement_needed or state["context_chars"] > context.context_budget_chars:
        return "refine"
    if plan.is_empty() or state["context_round"] >= context.max_context_rounds:
        return "decide"
    return "next_round"
