"""Tool phases: execute exactly one call, then hand its result to the next action phase."""

from __future__ import annotations

from typing import Any, Literal, cast

from langgraph.runtime import Runtime

from phasegraph.nodes.answers import GatheredResult, format_args
from phasegraph.nodes.approval import ask, needs_approval
from phasegraph.nodes.conversation import call_message, refused_message, result_message, tool_counts
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
    if verdict is not None and not verdict.runs:
        refusal = verdict.refusal()
    text = result.as_text()
    gathered = GatheredResult(name=call["name"], args=call["args"], status=result.status, text=text)
    note = TOOL_RESULT_NOTE.format(
        name=call["name"], args=format_args(call["args"]), status=result.status, text=text
    )
    answered = (
        refused_message(call, refusal)
        if refusal is not None
        else result_message(call, result, show_output=context.show_tool_outputs)
    )
    # A call refused unread never ran, so repeating it (smaller) is not a duplicate; a call a person
    # rejected was judged: proposing it unchanged again is one.
    judged = refusal is None or verdict is not None
    update |= {
        "messages": [call_message([call], state["draft"]), answered],
        "notes": [*state["notes"], note],
        "results": [*state["results"], gathered],
        # an edited call ran as edited: both what was proposed and what ran are repeats from now on
        "executed": [
            *state["executed"],
            *(_judged(registry, context.project_id, proposed, call) if judged else []),
        ],
        "cycles_used": state["cycles_used"] + 1,
        "proposed": None,
    }
    return update | close_phase(emitter, current, meta, "executed" if result.status == "ok" else "tool_error")


def _judged(registry: Any, project_id: str, proposed: Any, call: dict[str, Any]) -> list[str]:
    """The signatures a judged call leaves: the proposed one, and the edited one when it differs."""
    ran = registry.signature(call["name"], call["args"], project_id)
    return [proposed["signature"], *([ran] if ran != proposed["signature"] else [])]


async def route_after_tool_phase(
    state: TriggeredPhaseState, runtime: Runtime[TriggeredPhaseContext]
) -> Literal["within_budget", "cycles_spent"]:
    """Once the cycle budget is spent, the next phase answers with tools unbound."""
    spent = state["cycles_used"] >= runtime.context.max_phase_cycles_per_turn
    return "cycles_spent" if spent else "within_budget"
