"""Opening and closing phases, and the prompt an action phase sends."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_core.messages import BaseMessage, SystemMessage

from phasegraph.nodes.context import RunContext
from phasegraph.nodes.conversation import dialogue
from phasegraph.nodes.emit import Emitter
from phasegraph.nodes.events import IgnoredToolCall, Phase, PhaseEnd, PhaseStart
from phasegraph.nodes.streaming import StreamOutcome
from phasegraph.nodes.triggered_phase.state import TriggeredPhaseState, cycle_index, merged, phase_meta


def open_phase(
    emitter: Emitter, state: TriggeredPhaseState, phase: Phase, *, final: bool = False
) -> dict[str, Any]:
    """Start a new phase: emit ``phase_start``, trace it and return the state update."""
    update: dict[str, Any] = {
        "phase": phase,
        "phase_index": state["phase_index"] + 1,
        "cycle_index": cycle_index(phase, state["cycles_used"]),
        "phase_open": False,
        "phase_chunks": 0,
        "phase_cut": False,
    }
    meta = phase_meta(merged(state, update))
    emitter.emit(PhaseStart, final=final, **meta)
    emitter.trace("orchestration_phase_start", final=final, **meta)
    return update


def close_phase(
    emitter: Emitter, state: TriggeredPhaseState, meta: dict[str, Any], reason: str
) -> dict[str, Any]:
    """End the current phase with ``reason``; action phases report how much stream they read."""
    stream: dict[str, Any] = {}
    if meta["phase"] == "action_phase":
        stream = {"chunks_read": state["phase_chunks"], "stream_cut": state["phase_cut"]}
    emitter.emit(PhaseEnd, reason=reason, **stream, **meta)
    emitter.trace("orchestration_phase_end", reason=reason, **stream, **meta)
    return {"phase_open": False}


def build_prompt(context: RunContext, notes: list[str], messages: Sequence[BaseMessage]) -> list[BaseMessage]:
    """Initial system prompt, then injected notes as system messages, then the conversation.

    The conversation is its user messages and answers: this turn's tool results reach the model as
    notes (seed 000), so the tool calls ``messages`` shows a chat UI are left out of the prompt.
    """
    return [SystemMessage(context.system_prompt), *(SystemMessage(n) for n in notes), *dialogue(messages)]


def report_ignored(emitter: Emitter, outcome: StreamOutcome, meta: dict[str, Any]) -> None:
    """Emit and trace every tool call the stream contained but the protocol will not run."""
    for ignored in outcome.ignored:
        emitter.emit(IgnoredToolCall, **ignored, **meta)
        emitter.trace("ignored_tool_call", **ignored, **meta)
