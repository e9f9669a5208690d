"""Agent network (seed 003): agents of a published network hand control around until one responds."""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any, cast

from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import Checkpointer

from phasegraph.nodes.agent_network.agent_routing import (
    respond,
    route_to_agent,
    stop_at_max_steps,
    stop_at_max_tool_errors,
)
from phasegraph.nodes.agent_network.agent_step import route_after_step, run_agent_step
from phasegraph.nodes.agent_network.context import AgentNetworkContext
from phasegraph.nodes.agent_network.edits import check_edit as check_edit  # ProtocolSpec.check_edit's
from phasegraph.nodes.agent_network.network import open_network
from phasegraph.nodes.agent_network.state import (
    AgentNetworkInput,
    AgentNetworkOutput,
    AgentNetworkState,
    progress,
)
from phasegraph.nodes.agent_network.tool_execution import route_after_action, use_tool

NAME = "agent_network"
Context = AgentNetworkContext


def build_graph() -> StateGraph[
    AgentNetworkState, AgentNetworkContext, AgentNetworkInput, AgentNetworkOutput
]:
    """An agent decides; tools keep control with it, handoffs pass it on, RESPOND ends; budgets stop it."""
    builder = StateGraph(
        AgentNetworkState,
        context_schema=AgentNetworkContext,
        input_schema=AgentNetworkInput,
        output_schema=AgentNetworkOutput,
    )
    builder.add_node("open_network", open_network)
    builder.add_node("run_agent_step", run_agent_step)
    builder.add_node("use_tool", use_tool)
    builder.add_node("route_to_agent", route_to_agent)
    builder.add_node("respond", respond)
    builder.add_node("stop_at_max_steps", stop_at_max_steps)
    builder.add_node("stop_at_max_tool_errors", stop_at_max_tool_errors)
    builder.add_edge(START, "open_network")
    builder.add_edge("open_network", "run_agent_step")
    builder.add_conditional_edges(
        "run_agent_step",
        route_after_step,
        {
            "use_tool": "use_tool",
            "handoff": "route_to_agent",
            "respond": "respond",
            "refused": "run_agent_step",
            "steps_spent": "stop_at_max_steps",
            "errors_spent": "stop_at_max_tool_errors",
        },
    )
    after_action: dict[Hashable, str] = {
        "next_step": "run_agent_step",
        "steps_spent": "stop_at_max_steps",
        "errors_spent": "stop_at_max_tool_errors",
    }
    builder.add_conditional_edges("use_tool", route_after_action, after_action)
    builder.add_conditional_edges("route_to_agent", route_after_action, after_action)
    builder.add_edge("respond", END)
    builder.add_edge("stop_at_max_steps", END)
    builder.add_edge("stop_at_max_tool_errors", END)
    return builder


def event_meta(values: dict[str, Any]) -> dict[str, Any]:
    """Progress fields of a state snapshot, for events the server adds (paused, resumed, cancelled)."""
    return progress(cast(AgentNetworkState, values)) if "phase_index" in values else {}


def compile_graph(
    checkpointer: Checkpointer = None, *, interrupt_after: list[str] | None = None
) -> CompiledStateGraph[Any, Any, Any, Any]:
    """Compile with an optional checkpointer and pause points (the server passes both)."""
    return build_graph().compile(checkpointer=checkpointer, interrupt_after=interrupt_after, name=NAME)


graph = compile_graph()
