"""Tool phases: execute exactly one call, then hand its result to the next action phase."""

from __future__ import annotations

from typing import Any, Literal

from langgraph.runtime import Runtime

from phasegraph.nodes.answers import GatheredResult, format_args
from phasegraph.nodes.conversation import call_message, refused_message, result_message
from phasegraph.nodes.emit import Emitter, reports_errors
from phasegraph.nodes.errors import PhasegraphError
from phasegraph.nodes.tool_calls import execute_tool_call
from phasegraph.nodes.triggered_phase.context import TriggeredPhaseContext
from phasegraph.nodes.triggered_phase.phases import close_phase, open_phase
from phasegraph.nodes.triggered_phase.prompts import TOOL_RESULT_NOTE
from phasegraph.nodes.triggered_phase.state import TriggeredPhaseState, merged, phase_meta


@reports_errors
async def run_tool_phase(
    state: TriggeredPhaseState, runtime: Runtime[TriggeredPhaseContext]
) -> dict[str, Any]:
    """Execute the proposed call (MAX_TOOLS_PER_TOOL_PHASE = 1) and inject its result as a note.

    The conversation gets the call and how it ended (its output only with ``show_tool_outputs``).
    """
    context, emitter = runtime.context, Emitter(runtime.context, runtime.stream_writer)
    call = state["proposed"]
    if call is None:  # the router only comes here with a proposal; anything else is a wiring bug
        raise PhasegraphError("tool phase entered without a proposed call")
    update = open_phase(emitter, state, "tool_phase")
    current = merged(state, update)
    meta = phase_meta(current)
    result = await execute_tool_call(
        context, emitter, context.registry(), dict(call), call["signature"], meta, refusal=call.get("error")
    )
    text = result.as_text()
    gathered = GatheredResult(name=call["name"], args=call["args"], status=result.status, text=text)
    note = TOOL_RESULT_NOTE.format(
        name=call["name"], args=format_args(call["args"]), status=result.status, text=text
    )
    refusal = call.get("error")
    answered = (
        refused_message(dict(call), refusal)
        if refusal is not None
        else result_message(dict(call), result, show_output=context.show_tool_outputs)
    )
    update |= {
        "messages": [call_message([dict(call)], state["draft"]), answered],
        "notes": [*state["notes"], note],
        "results": [*state["results"], gathered],
        # a refused call never ran, so repeating it (smaller) is not a duplicate
        "executed": [*state["executed"], *([call["signature"]] if refusal is None else [])],
        "cycles_used": state["cycles_used"] + 1,
        "proposed": None,
    }
    return update | close_phase(emitter, current, meta, "executed" if result.status == "ok" else "tool_error")


async def route_after_tool_phase(
    state: TriggeredPhaseState, runtime: Runtime[TriggeredPhaseContext]
) -> Literal["within_budget", "cycles_spent"]:
    """Once the cycle budget is spent, the next phase answers with tools unbound."""
    spent = state["cycles_used"] >= runtime.context.max_phase_cycles_per_turn
    return "cycles_spent" if spent else "within_budget"
