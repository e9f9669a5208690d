"""Triggered phases (seed 000): action phase → one-call tool phase → action phase ..., with hard budgets."""

from __future__ import annotations

from typing import Any, cast

from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import Checkpointer

from phasegraph.nodes.triggered_phase.action_phase import (
    route_after_action_phase,
    run_action_phase,
    run_final_phase,
)
from phasegraph.nodes.triggered_phase.context import TriggeredPhaseContext
from phasegraph.nodes.triggered_phase.duplicate_refusal import refuse_duplicate, route_after_refusal
from phasegraph.nodes.triggered_phase.state import (
    TriggeredPhaseInput,
    TriggeredPhaseOutput,
    TriggeredPhaseState,
    phase_meta,
)
from phasegraph.nodes.triggered_phase.tool_phase import route_after_tool_phase, run_tool_phase
from phasegraph.nodes.triggered_phase.turn import complete_turn, start_turn

NAME = "triggered_phase"
Context = TriggeredPhaseContext


def build_graph() -> StateGraph[
    TriggeredPhaseState, TriggeredPhaseContext, TriggeredPhaseInput, TriggeredPhaseOutput
]:
    """Wire the phases; every budget decision is a conditional edge."""
    builder = StateGraph(
        TriggeredPhaseState,
        context_schema=TriggeredPhaseContext,
        input_schema=TriggeredPhaseInput,
        output_schema=TriggeredPhaseOutput,
    )
    builder.add_node("start_turn", start_turn)
    builder.add_node("action_phase", run_action_phase)
    builder.add_node("tool_phase", run_tool_phase)
    builder.add_node("refuse_duplicate", refuse_duplicate)
    builder.add_node("final_phase", run_final_phase)
    builder.add_node("complete_turn", complete_turn)
    builder.add_edge(START, "start_turn")
    builder.add_edge("start_turn", "action_phase")
    builder.add_conditional_edges(
        "action_phase",
        route_after_action_phase,
        {"new_call": "tool_phase", "duplicate": "refuse_duplicate", "answered": "complete_turn"},
    )
    builder.add_conditional_edges(
        "tool_phase", route_after_tool_phase, {"within_budget": "action_phase", "cycles_spent": "final_phase"}
    )
    builder.add_conditional_edges(
        "refuse_duplicate",
        route_after_refusal,
        {"retry": "action_phase", "duplicates_exceeded": "final_phase"},
    )
    builder.add_edge("final_phase", "complete_turn")
    builder.add_edge("complete_turn", END)
    return builder


def event_meta(values: dict[str, Any]) -> dict[str, Any]:
    """Phase metadata of a state snapshot, for events the server adds (paused, resumed, cancelled)."""
    return phase_meta(cast(TriggeredPhaseState, values)) if "phase_index" in values else {}


def compile_graph(
    checkpointer: Checkpointer = None, *, interrupt_after: list[str] | None = None
) -> CompiledStateGraph[Any, Any, Any, Any]:
    """Compile with an optional checkpointer and pause points (the server passes both)."""
    return build_graph().compile(checkpointer=checkpointer, interrupt_after=interrupt_after, name=NAME)


graph = compile_graph()
