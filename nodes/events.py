"""The one event contract: everything a client (CLI, HTTP stream, notebook) can receive.

``Event`` is the discriminated union of every event model, keyed on ``type``; ``parse_event``
reads wire JSON back into it. Import events from here. The models are defined by theme in
sibling modules: ``events_base`` (the fields every event carries, phases, model text),
``events_tools`` (tool calls), ``events_protocols`` (goal_pursuit, agent_network, xml_contract),
``events_planner`` (the planner) and ``events_run`` (budgets, the answer, pause, resume, cancel,
error). The order of the union below is the order of the JSON schema the server publishes.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field, TypeAdapter

from phasegraph.nodes.events_base import EventBase, Phase, PhaseEnd, PhaseStart, TextChunk
from phasegraph.nodes.events_planner import (
    AgentState,
    LastTurnContext,
    PlanCreated,
    PlanReadyForReview,
    PlanReview,
    Session,
    StepComplete,
    StepStart,
)
from phasegraph.nodes.events_protocols import (
    AgentStep,
    ContextUpdate,
    Decision,
    Route,
    ValidationErrorEvent,
    Verdict,
    XmlBlock,
)
from phasegraph.nodes.events_run import BudgetExhaustedEvent, Cancelled, ErrorEvent, Final, Paused, Resumed
from phasegraph.nodes.events_tools import (
    ApprovalAnswered,
    ApprovalRequested,
    DuplicateToolCall,
    IgnoredToolCall,
    ToolCall,
    ToolResultEvent,
)

__all__ = [
    "EVENT_ADAPTER",
    "AgentState",
    "AgentStep",
    "ApprovalAnswered",
    "ApprovalRequested",
    "BudgetExhaustedEvent",
    "Cancelled",
    "ContextUpdate",
    "Decision",
    "DuplicateToolCall",
    "ErrorEvent",
    "Event",
    "EventBase",
    "Final",
    "IgnoredToolCall",
    "LastTurnContext",
    "Paused",
    "Phase",
    "PhaseEnd",
    "PhaseStart",
    "PlanCreated",
    "PlanReadyForReview",
    "PlanReview",
    "Resumed",
    "Route",
    "Session",
    "StepComplete",
    "StepStart",
    "TextChunk",
    "ToolCall",
    "ToolResultEvent",
    "ValidationErrorEvent",
    "Verdict",
    "XmlBlock",
    "parse_event",
]

Event = Annotated[
    PhaseStart
    | PhaseEnd
    | TextChunk
    | ToolCall
    | ToolResultEvent
    | DuplicateToolCall
    | IgnoredToolCall
    | ApprovalRequested
    | ApprovalAnswered
    | BudgetExhaustedEvent
    | ContextUpdate
    | Decision
    | Verdict
    | AgentStep
    | Route
    | XmlBlock
    | ValidationErrorEvent
    | Session
    | LastTurnContext
    | AgentState
    | PlanCreated
    | PlanReadyForReview
    | PlanReview
    | StepStart
    | StepComplete
    | Final
    | Paused
    | Resumed
    | Cancelled
    | ErrorEvent,
    Field(discriminator="type"),
]

EVENT_ADAPTER: TypeAdapter[Event] = TypeAdapter(Event)


def parse_event(data: dict[str, Any] | str | bytes) -> Event:
    """Parse wire JSON (or its dict) back into the event union."""
    if isinstance(data, str | bytes):
        return EVENT_ADAPTER.validate_json(data)
    return EVENT_ADAPTER.validate_python(data)
