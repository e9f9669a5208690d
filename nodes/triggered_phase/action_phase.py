"""Action phases: the model reasons over results and may propose the next tool call."""

from __future__ import annotations

from typing import Any, Literal

from langgraph.runtime import Runtime

from phasegraph.nodes.conversation import user_turn
from phasegraph.nodes.emit import Emitter, reports_errors
from phasegraph.nodes.events import BudgetExhaustedEvent, TextChunk
from phasegraph.nodes.streaming import StreamOutcome, stream_until_first_call
from phasegraph.nodes.triggered_phase.context import TriggeredPhaseContext
from phasegraph.nodes.triggered_phase.phases import build_prompt, close_phase, open_phase, report_ignored
from phasegraph.nodes.triggered_phase.state import ProposedCall, TriggeredPhaseState, merged, phase_meta


@reports_errors
async def run_action_phase(
    state: TriggeredPhaseState, runtime: Runtime[TriggeredPhaseContext]
) -> dict[str, Any]:
    """Stream the model with tools bound and keep only its first complete tool call.

    A refused duplicate leaves the phase open, so the next pass continues the same phase.
    """
    context, emitter = runtime.context, Emitter(runtime.context, runtime.stream_writer)
    update = {} if state["phase_open"] else open_phase(emitter, state, "action_phase")
    current = merged(state, update)
    registry = await context.open_tools()
    chat = context.resolve_model(state["model_calls"], user_turn(state["messages"]))
    model = chat.bind_tools(registry.schemas())
    outcome = await _stream(emitter, current, model)
    update |= _tally(current, outcome)
    call = outcome.call
    if call is not None:
        signature = registry.signature(call["name"], call["args"], context.project_id)
        error = call.get("error")
        duplicate = error is None and signature in state["executed"]
        update["proposed"] = ProposedCall(
            id=call["id"], name=call["name"], args=call["args"], signature=signature, duplicate=duplicate,
            error=error,
        )  # fmt: skip
        if duplicate:
            return {**update, "phase_open": True}
    reason = "tool_call" if call is not None else "answered"
    return update | close_phase(emitter, merged(current, update), phase_meta(current), reason)


@reports_errors
async def run_final_phase(
    state: TriggeredPhaseState, runtime: Runtime[TriggeredPhaseContext]
) -> dict[str, Any]:
    """A budget ran out: say so, then let the model answer with tools unbound."""
    context, emitter = runtime.context, Emitter(runtime.context, runtime.stream_writer)
    update: dict[str, Any] = {}
    if state["phase_open"]:
        update = close_phase(emitter, state, phase_meta(state), "duplicate_budget")
    by_duplicates = state["duplicate_attempts"] > context.max_duplicate_attempts
    emitter.emit(
        BudgetExhaustedEvent,
        budget="duplicates" if by_duplicates else "cycles",
        limit=context.max_duplicate_attempts if by_duplicates else context.max_phase_cycles_per_turn,
        used=state["duplicate_attempts"] if by_duplicates else state["cycles_used"],
        **phase_meta(state),
    )
    notice = context.duplicate_budget_notice if by_duplicates else context.budget_notice
    update |= open_phase(emitter, state, "action_phase", final=True) | {"notes": [*state["notes"], notice]}
    current = merged(state, update)
    model = context.resolve_model(state["model_calls"], user_turn(state["messages"]))
    outcome = await _stream(emitter, current, model, take_calls=False)
    update |= _tally(current, outcome) | {"answer": outcome.text.strip()}
    return update | close_phase(emitter, merged(current, update), phase_meta(current), "final")


async def route_after_action_phase(
    state: TriggeredPhaseState,
) -> Literal["new_call", "duplicate", "answered"]:
    """A new call goes to a tool phase, a duplicate to refusal, plain text finishes the turn."""
    proposed = state["proposed"]
    if proposed is None:
        return "answered"
    return "duplicate" if proposed["duplicate"] else "new_call"


async def _stream(
    emitter: Emitter, state: TriggeredPhaseState, model: Any, *, take_calls: bool = True
) -> StreamOutcome:
    meta = phase_meta(state)
    prompt = build_prompt(emitter.context, state["notes"], state["messages"])
    outcome = await stream_until_first_call(
        model,
        prompt,
        lambda text: emitter.emit(TextChunk, text=text, **meta),
        take_calls=take_calls,
        max_args_chars=emitter.context.max_tool_args_chars,
    )
    report_ignored(emitter, outcome, meta)
    return outcome


def _tally(state: TriggeredPhaseState, outcome: StreamOutcome) -> dict[str, Any]:
    return {
        "model_calls": state["model_calls"] + 1,
        "draft": outcome.text,
        "proposed": None,
        "phase_chunks": state["phase_chunks"] + outcome.chunks_read,
        "phase_cut": state["phase_cut"] or outcome.cut,
    }
