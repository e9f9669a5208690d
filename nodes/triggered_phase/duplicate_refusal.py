"""Refuse a call whose signature already ran this turn, without spending tool budget."""

from __future__ import annotations

from typing import Any, Literal

from langgraph.runtime import Runtime

from phasegraph.nodes.answers import format_args
from phasegraph.nodes.conversation import call_message, refused_message
from phasegraph.nodes.emit import Emitter
from phasegraph.nodes.errors import PhasegraphError
from phasegraph.nodes.events import DuplicateToolCall
from phasegraph.nodes.triggered_phase.context import TriggeredPhaseContext
from phasegraph.nodes.triggered_phase.prompts import DUPLICATE_REFUSAL_NOTE
from phasegraph.nodes.triggered_phase.state import TriggeredPhaseState, phase_meta


async def refuse_duplicate(
    state: TriggeredPhaseState, runtime: Runtime[TriggeredPhaseContext]
) -> dict[str, Any]:
    """Emit ``duplicate_tool_call`` and inject a system refusal notice; nothing is executed.

    The conversation gets the call, answered with the refusal as an error.
    """
    context, emitter = runtime.context, Emitter(runtime.context, runtime.stream_writer)
    call = state["proposed"]
    if call is None:
        raise PhasegraphError("duplicate refusal entered without a proposed call")
    attempts = state["duplicate_attempts"] + 1
    details = {"name": call["name"], "args": call["args"], "signature": call["signature"]}
    meta = phase_meta(state)
    emitter.emit(
        DuplicateToolCall, attempts=attempts, limit=context.max_duplicate_attempts, **details, **meta
    )
    emitter.trace("duplicate_tool_call", attempts=attempts, **details, **meta)
    note = DUPLICATE_REFUSAL_NOTE.format(name=call["name"], args=format_args(call["args"]))
    return {
        "messages": [call_message([dict(call)], state["draft"]), refused_message(dict(call), note)],
        "duplicate_attempts": attempts,
        "notes": [*state["notes"], note],
        "proposed": None,
    }


async def route_after_refusal(
    state: TriggeredPhaseState, runtime: Runtime[TriggeredPhaseContext]
) -> Literal["retry", "duplicates_exceeded"]:
    """More than ``max_duplicate_attempts`` refusals force the final answer."""
    forced = state["duplicate_attempts"] > runtime.context.max_duplicate_attempts
    return "duplicates_exceeded" if forced else "retry"
