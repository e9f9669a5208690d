"""Graph state schemas. Counters live here; the limits they are checked against live in the Context."""

from __future__ import annotations

from typing import Annotated, Any, cast

from langchain_core.messages import AnyMessage
from langgraph.graph.message import add_messages
from typing_extensions import TypedDict

from phasegraph.nodes.answers import GatheredResult
from phasegraph.nodes.events import Phase


class ProposedCall(TypedDict):
    """The first complete tool call an action phase produced."""

    id: str
    name: str
    args: dict[str, Any]
    signature: str
    duplicate: bool
    error: str | None  # why the call must not run (it is answered with this error instead)


class TriggeredPhaseInput(TypedDict):
    """What a caller sends: the conversation, ending with the user's new message."""

    messages: Annotated[list[AnyMessage], add_messages]


class TriggeredPhaseOutput(TypedDict):
    """What a caller gets back: the conversation with the answer appended, and the answer."""

    messages: Annotated[list[AnyMessage], add_messages]
    answer: str


class TriggeredPhaseState(TypedDict):
    """Everything the triggered-phase loop tracks within one user turn."""

    # conversation across turns: user messages, each tool call with how it ended, answers
    messages: Annotated[list[AnyMessage], add_messages]
    notes: list[str]  # system messages injected after the initial prompt (this turn)
    results: list[GatheredResult]  # tool results gathered this turn
    executed: list[str]  # canonical signatures executed this turn
    proposed: ProposedCall | None  # first complete call of the last action phase
    draft: str  # text of the last action phase
    cycles_used: int  # tool executions this turn
    duplicate_attempts: int  # refused duplicates this turn
    phase: Phase  # phase the run is in
    phase_index: int  # 1..N, incremented at each phase start
    cycle_index: int  # tool cycle the current phase belongs to, fixed when the phase opens
    phase_open: bool  # an action phase continues after a refused duplicate
    phase_chunks: int  # model chunks read in the open action phase
    phase_cut: bool  # the open action phase stopped reading a stream early
    model_calls: int  # model calls this turn, positions a scripted model
    answer: str  # the turn's final answer
    fallback: bool  # the answer was built from tool results, not by the model


def merged(state: TriggeredPhaseState, update: dict[str, Any]) -> TriggeredPhaseState:
    """The state as it will be once ``update`` is applied (every field here is last-write-wins)."""
    return cast(TriggeredPhaseState, {**state, **update})


def cycle_index(phase: Phase, cycles_used: int) -> int:
    """Tool phase k and the action phase that reads its result share cycle k (the first is 1)."""
    return cycles_used + 1 if phase == "tool_phase" else max(1, cycles_used)


def phase_meta(state: TriggeredPhaseState) -> dict[str, Any]:
    """Phase fields every triggered-phase event carries."""
    return {
        "phase": state["phase"],
        "phase_index": state["phase_index"],
        "cycle_index": state["cycle_index"],
    }
