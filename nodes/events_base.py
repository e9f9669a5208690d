"""The envelope every event shares, the protocols' phases, and the events of phases and model text.

``EventBase`` holds the fields a client reads on every event (request, project, sequence number,
time, phase and progress counters) and serialises them with their wire names (``requestId``...).
The event union itself is assembled in ``phasegraph.nodes.events``; import events from there.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

Phase = Literal[
    "tool_phase",
    "action_phase",
    "complete",
    # goal_pursuit's phases (seed 001)
    "context_discovery",
    "context_refinement",
    "action_decision",
    "refinement_analysis",
    "execution",
    # xml_contract's (seed 004) are the action and tool phases above
    # agent_network's (seed 003)
    "agent_step",
    "tool_execution",
    "agent_routing",
]


class EventBase(BaseModel):
    """Fields every event carries; phase fields are set by phase-based protocols."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid")

    request_id: str = ""
    project_id: str = ""
    protocol: str = ""
    seq: int = 0
    ts: datetime = Field(default_factory=lambda: datetime.now(UTC))
    phase: Phase | None = None
    phase_index: int | None = None
    cycle_index: int | None = None
    #: The LangGraph superstep that emitted the event (none for events the server adds). A run
    #: re-started from a checkpoint repeats the steps after it, so this tells which events a
    #: crashed attempt's re-run replaces.
    graph_step: int | None = None
    #: Progress of iterating protocols: the iteration of the current determination (from 1), the
    #: context round within it (from 1) and the executed steps so far (goal_pursuit).
    iteration: int | None = None
    context_round: int | None = None
    step: int | None = None
    #: agent_network: the agent in control and its control epoch (from 1; a handoff starts the next).
    agent: str | None = None
    epoch: int | None = None
    #: planner: the request's context type, and the plan a step or its tool calls belong to.
    context_type: str | None = None
    plan_id: str | None = None

    def to_json(self) -> str:
        """Serialise with the wire names (``requestId``, ``phaseIndex``...)."""
        return self.model_dump_json(by_alias=True, exclude_none=True)

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe dict with the wire names."""
        return self.model_dump(mode="json", by_alias=True, exclude_none=True)


class PhaseStart(EventBase):
    """A phase began."""

    type: Literal["phase_start"] = "phase_start"
    final: bool = False


class PhaseEnd(EventBase):
    """A phase ended; action phases report how much of the model stream was read."""

    type: Literal["phase_end"] = "phase_end"
    reason: str
    chunks_read: int | None = None
    stream_cut: bool | None = None
    #: Size of the prompt the phase sent: characters always, tokens when the provider reported usage.
    prompt_chars: int | None = None
    prompt_tokens: int | None = None
    #: Corrective retries the phase needed to get a usable structured answer.
    retries: int | None = None


class TextChunk(EventBase):
    """A piece of model text, streamed as it arrives."""

    type: Literal["text"] = "text"
    text: str
