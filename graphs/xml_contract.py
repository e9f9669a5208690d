"""XML contract (seed 004): the model proposes calls as XML blocks; the system validates and runs them."""

from __future__ import annotations

from typing import Any, cast

from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import Checkpointer

from phasegraph.nodes.xml_contract.action_phase import propose_action, route_after_proposal
from phasegraph.nodes.xml_contract.answer import (
    answer_after_refusals,
    answer_without_tools,
    finish_turn,
    start_turn,
)
from phasegraph.nodes.xml_contract.context import XmlContractContext
from phasegraph.nodes.xml_contract.state import (
    XmlContractInput,
    XmlContractOutput,
    XmlContractState,
    progress,
)
from phasegraph.nodes.xml_contract.tool_phase import execute_blocks, route_after_tools

NAME = "xml_contract"
Context = XmlContractContext


def build_graph() -> StateGraph[XmlContractState, XmlContractContext, XmlContractInput, XmlContractOutput]:
    """Propose, execute, read the results, repeat; a final answer, the step budget or two refusals end it."""
    builder = StateGraph(
        XmlContractState,
        context_schema=XmlContractContext,
        input_schema=XmlContractInput,
        output_schema=XmlContractOutput,
    )
    builder.add_node("start_turn", start_turn)
    builder.add_node("propose_action", propose_action)
    builder.add_node("execute_blocks", execute_blocks)
    builder.add_node("finish_turn", finish_turn)
    builder.add_node("answer_without_tools", answer_without_tools)
    builder.add_node("answer_after_refusals", answer_after_refusals)
    builder.add_edge(START, "start_turn")
    builder.add_edge("start_turn", "propose_action")
    builder.add_conditional_edges(
        "propose_action", route_after_proposal, {"execute": "execute_blocks", "answer": "finish_turn"}
    )
    builder.add_conditional_edges(
        "execute_blocks",
        route_after_tools,
        {
            "next_step": "propose_action",
            "steps_spent": "answer_without_tools",
            "refused_twice": "answer_after_refusals",
        },
    )
    builder.add_edge("finish_turn", END)
    builder.add_edge("answer_without_tools", END)
    builder.add_edge("answer_after_refusals", END)
    return builder


def event_meta(values: dict[str, Any]) -> dict[str, Any]:
    """Progress fields of a state snapshot, for events the server adds (paused, resumed, cancelled)."""
    return progress(cast(XmlContractState, values)) if "phase_index" in values else {}


def compile_graph(
    checkpointer: Checkpointer = None, *, interrupt_after: list[str] | None = None
) -> CompiledStateGraph[Any, Any, Any, Any]:
    """Compile with an optional checkpointer and pause points (the server passes both)."""
    return build_graph().compile(checkpointer=checkpointer, interrupt_after=interrupt_after, name=NAME)


graph = compile_graph()
