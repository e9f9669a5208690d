"""Planner (seed 002): one streaming planner session over every tool plus a plan meta-tool."""

from __future__ import annotations

from typing import Any

from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import Checkpointer

from phasegraph.nodes.planner.context import PlannerContext
from phasegraph.nodes.planner.plan_draft import draft_plan, route_after_draft
from phasegraph.nodes.planner.plan_execution import build_plan_executor
from phasegraph.nodes.planner.plan_review import review_plan, route_after_review
from phasegraph.nodes.planner.planner_step import call_planner, route_after_planner
from phasegraph.nodes.planner.state import PlannerInput, PlannerOutput, PlannerState
from phasegraph.nodes.planner.tool_execution import route_after_tools, run_tools
from phasegraph.nodes.planner.turn import (
    clarify,
    finish_turn,
    route_turn,
    start_turn,
    stop_at_tool_cap,
    stop_at_watchdog,
)

NAME = "planner"
Context = PlannerContext


def build_graph() -> StateGraph[PlannerState, PlannerContext, PlannerInput, PlannerOutput]:
    """Planner steps and tool runs alternate; plans are drafted, reviewed and run; guardrails end turns.

    A call that waits for a person's approval waits inside the node that runs it (``run_tools``, or the
    plan executor's ``run_step``), in an ``interrupt`` asked before that node emits or runs anything.
    """
    builder = StateGraph(
        PlannerState, context_schema=PlannerContext, input_schema=PlannerInput, output_schema=PlannerOutput
    )
    for name, node in (
        ("start_turn", start_turn),
        ("clarify", clarify),
        ("call_planner", call_planner),
        ("run_tools", run_tools),
        ("draft_plan", draft_plan),
        ("review_plan", review_plan),
        ("execute_plan", build_plan_executor()),
        ("finish_turn", finish_turn),
        ("stop_at_tool_cap", stop_at_tool_cap),
        ("stop_at_watchdog", stop_at_watchdog),
    ):
        builder.add_node(name, node)
    builder.add_edge(START, "start_turn")
    builder.add_conditional_edges("start_turn", route_turn, {"blank": "clarify", "plan": "call_planner"})
    builder.add_conditional_edges(
        "call_planner",
        route_after_planner,
        {"tools": "run_tools", "answer": "finish_turn", "watchdog": "stop_at_watchdog"},
    )
    builder.add_conditional_edges(
        "run_tools",
        route_after_tools,
        {
            "next": "call_planner",
            "tool_cap": "stop_at_tool_cap",
            "watchdog": "stop_at_watchdog",
            "plan": "draft_plan",
            "run_plan": "execute_plan",
        },
    )
    builder.add_conditional_edges(
        "draft_plan",
        route_after_draft,
        {"auto_execute": "execute_plan", "agent_review": "review_plan", "answered": "call_planner"},
    )
    builder.add_conditional_edges(
        "review_plan", route_after_review, {"approved": "execute_plan", "sent_back": "call_planner"}
    )
    builder.add_edge("execute_plan", "call_planner")
    for end in ("clarify", "finish_turn", "stop_at_tool_cap", "stop_at_watchdog"):
        builder.add_edge(end, END)
    return builder


def event_meta(values: dict[str, Any]) -> dict[str, Any]:
    """Planner fields of a state snapshot, for events the server adds (paused, resumed, cancelled)."""
    if "context_type" not in values:
        return {}
    plan = values.get("plan")
    return {"context_type": values["context_type"], "plan_id": plan["plan_id"] if plan else None}


def compile_graph(
    checkpointer: Checkpointer = None, *, interrupt_after: list[str] | None = None
) -> CompiledStateGraph[Any, Any, Any, Any]:
    """Compile with an optional checkpointer and pause points (the server passes both)."""
    return build_graph().compile(checkpointer=checkpointer, interrupt_after=interrupt_after, name=NAME)


graph = compile_graph()
