"""Start and finish of a user turn: budgets reset, exactly one final answer."""

from __future__ import annotations

from typing import Any

from langchain_core.messages import AIMessage, HumanMessage
from langgraph.runtime import Runtime

from phasegraph.nodes.answers import all_tools_failed, fallback_answer
from phasegraph.nodes.emit import Emitter, reports_errors
from phasegraph.nodes.errors import ConfigurationError
from phasegraph.nodes.events import Final
from phasegraph.nodes.tool_calls import trace_tool_registration
from phasegraph.nodes.triggered_phase.context import TriggeredPhaseContext
from phasegraph.nodes.triggered_phase.state import TriggeredPhaseState


@reports_errors
async def start_turn(state: TriggeredPhaseState, runtime: Runtime[TriggeredPhaseContext]) -> dict[str, Any]:
    """Check the turn has a user message, trace the tools on offer and reset per-turn counters."""
    messages = state.get("messages") or []
    if not messages or not isinstance(messages[-1], HumanMessage):
        raise ConfigurationError("a turn must end with the user's message")
    trace_tool_registration(
        Emitter(runtime.context, runtime.stream_writer), await runtime.context.open_tools()
    )
    return {
        "notes": [],
        "results": [],
        "executed": [],
        "proposed": None,
        "draft": "",
        "cycles_used": 0,
        "duplicate_attempts": 0,
        "phase": "action_phase",
        "phase_index": 0,
        "cycle_index": 1,
        "phase_open": False,
        "phase_chunks": 0,
        "phase_cut": False,
        "model_calls": 0,
        "answer": "",
        "fallback": False,
    }


async def complete_turn(
    state: TriggeredPhaseState, runtime: Runtime[TriggeredPhaseContext]
) -> dict[str, Any]:
    """Emit the ``final`` event; an empty answer becomes a deterministic summary of the results."""
    answer = (state["answer"] or state["draft"]).strip()
    fallback = not answer
    if fallback:
        answer = fallback_answer(state["results"])
    Emitter(runtime.context, runtime.stream_writer).emit(
        Final,
        answer=answer,
        fallback=fallback,
        all_tools_failed=all_tools_failed(state["results"]),
        phase="complete",
        phase_index=state["phase_index"],
        cycle_index=state["cycle_index"],
    )
    await runtime.context.close_tools()  # a client driving the graph itself (langgraph dev) closes nothing
    return {"messages": [AIMessage(answer)], "answer": answer, "fallback": fallback, "phase": "complete"}
