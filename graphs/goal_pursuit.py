"""Goal pursuit (seed 001): context discovery → refinement → action decision → refinement analysis."""

from __future__ import annotations

from typing import Any, cast

from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import Checkpointer

from phasegraph.nodes.goal_pursuit.action_decision import decide_action
from phasegraph.nodes.goal_pursuit.context import GoalPursuitContext
from phasegraph.nodes.goal_pursuit.context_discovery import discover_context, route_after_discovery
from phasegraph.nodes.goal_pursuit.context_refinement import refine_context, route_after_refinement
from phasegraph.nodes.goal_pursuit.execution import execute_action, route_after_execution
from phasegraph.nodes.goal_pursuit.pursuit import finish_pursuit, start_pursuit
from phasegraph.nodes.goal_pursuit.refinement_analysis import (
    analyze_refinement,
    defer_execution,
    return_last_planned,
    route_after_analysis,
    route_after_fallback,
)
from phasegraph.nodes.goal_pursuit.state import (
    GoalPursuitInput,
    GoalPursuitOutput,
    GoalPursuitState,
    progress,
)

NAME = "goal_pursuit"
Context = GoalPursuitContext


def build_graph() -> StateGraph[GoalPursuitState, GoalPursuitContext, GoalPursuitInput, GoalPursuitOutput]:
    """Wire the four phases; context loop, min/max iterations and step budget are conditional edges."""
    builder = StateGraph(
        GoalPursuitState,
        context_schema=GoalPursuitContext,
        input_schema=GoalPursuitInput,
        output_schema=GoalPursuitOutput,
    )
    builder.add_node("start_pursuit", start_pursuit)
    builder.add_node("discover_context", discover_context)
    builder.add_node("refine_context", refine_context)
    builder.add_node("decide_action", decide_action)
    builder.add_node("analyze_refinement", analyze_refinement)
    builder.add_node("defer_execution", defer_execution)
    builder.add_node("return_last_planned", return_last_planned)
    builder.add_node("execute_action", execute_action)
    builder.add_node("finish_pursuit", finish_pursuit)
    builder.add_edge(START, "start_pursuit")
    builder.add_edge("start_pursuit", "discover_context")
    builder.add_conditional_edges(
        "discover_context",
        route_after_discovery,
        {"refine": "refine_context", "next_round": "discover_context", "decide": "decide_action"},
    )
    builder.add_conditional_edges(
        "refine_context",
        route_after_refinement,
        {"next_round": "discover_context", "decide": "decide_action"},
    )
    builder.add_edge("decide_action", "analyze_refinement")
    builder.add_conditional_edges(
        "analyze_refinement",
        route_after_analysis,
        {
            "execute": "execute_action",
            "finish": "finish_pursuit",
            "refine": "discover_context",
            "deferred": "defer_execution",
            "iterations_spent": "return_last_planned",
        },
    )
    builder.add_edge("defer_execution", "discover_context")
    builder.add_conditional_edges(
        "return_last_planned", route_after_fallback, {"execute": "execute_action", "finish": "finish_pursuit"}
    )
    builder.add_conditional_edges(
        "execute_action",
        route_after_execution,
        {"next_step": "discover_context", "steps_spent": "finish_pursuit"},
    )
    builder.add_edge("finish_pursuit", END)
    return builder


def event_meta(values: dict[str, Any]) -> dict[str, Any]:
    """Progress fields of a state snapshot, for events the server adds (paused, resumed, cancelled)."""
    return progress(cast(GoalPursuitState, values)) if "phase_index" in values else {}


def compile_graph(
    checkpointer: Checkpointer = None, *, interrupt_after: list[str] | None = None
) -> CompiledStateGraph[Any, Any, Any, Any]:
    """Compile with an optional checkpointer and pause points (the server passes both)."""
    return build_graph().compile(checkpointer=checkpointer, interrupt_after=interrupt_after, name=NAME)


graph = compile_graph()
