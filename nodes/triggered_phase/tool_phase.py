"""Tool phases: execute exactly one call, then hand its result to the next action phase."""

from __future__ import annotations

from typing import Any, Literal, cast

from langgraph.runtime import Runtime

from phasegraph.nodes.answers import GatheredResult, format_args
from phasegraph.nodes.approval import ask, needs_approval
from phasegraph.nodes.conversation import call_message, refused_message, result_message, tool_counts
from phasegraph.nodes.emit import Emitter, reports_errors
from phasegraph.nodes.errors import PhasegraphError
from phasegraph.nodes.tool_calls import execute_tool_call, ran
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
    proposed = state["proposed"]
    if proposed is None:  # the router only comes here with a proposal; anything else is a wiring bug
        raise PhasegraphError("tool phase entered without a proposed call")
    registry, call = await context.open_tools(), cast(dict[str, Any], dict(proposed))
    refusal = proposed.get("error")
    verdict = None
    if refusal is None and needs_approval(registry, call["name"]):  # first: nothing is emitted twice
        verdict = await ask(context, emitter, registry, call, phase_meta(state))
    update = open_phase(emitter, state, "tool_phase")
    current = merged(state, update)
    meta = phase_meta(current)
    result = await execute_tool_call(
        context, emitter, registry, call, proposed["signature"], meta, refusal=refusal, verdict=verdict,
        turn_calls=tool_counts(state["messages"]),
    )  # fmt: skip
    refusal = None if ran(result) else result.error or ""  # rejected, past a per-turn limit, ...
    text = result.as_text()
    gathered = GatheredResult(
        name=call["name"], args=call["args"], status=result.status, text=text, ran=refusal is None
    )
    note = TOOL_RESULT_NOTE.format(
        name=call["name"], args=format_args(call["args"]), status=result.status, text=text
    )
    rejected = verdict is not None and not verdict.runs
    answered = (
        refused_message(call, refusal, rejected=rejected)
        if refusal is not None
        else result_message(call, result, show_output=context.show_tool_outputs)
    )
    signature = registry.signature(call["name"], call["args"], context.project_id)  # edited, if edited
    update |= {
        "messages": [call_message([call], state["draft"]), answered],
        "notes": [*state["notes"], note],
        "results": [*state["results"], gathered],
        # only what ran is a repeat from now on: an edited call's edited arguments, never a rejected call
        # (proposed again, it is asked again), one past its per-turn limit, nor the arguments an edit replaced
        "executed": [*state["executed"], *([signature] if refusal is None else [])],
        # a person's rejection is no tool cycle: the model may still make the corrected call
        "cycles_used": state["cycles_used"] + (0 if rejected else 1),
        "proposed": None,
    }
    return update | close_phase(emitter, current, meta, "executed" if result.status == "ok" else "tool_error")


async def route_after_tool_phase(
    state: TriggeredPhaseState, runtime: Runtime[TriggeredPhaseContext]
) -> Literal["within_budget", "cycles_spent"]:
    """Once the cycle budget is spent, the next phase answers with tools unbound."""
    spent = state["cycles_used"] >= runtime.context.max_phase_cycles_per_turn
    return "cycles_spent" if spent else "within_budget"
