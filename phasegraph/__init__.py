"""phasegraph: orchestration protocols for tool-using LLM agents, as LangGraph state machines.

The public API. Run a protocol and read its events::

    import asyncio
    import phasegraph

    result = asyncio.run(phasegraph.run("triggered_phase", "Summarise the roadmap in the docs folder."))
    print(result.final.answer)

The layers are installed under this namespace too: ``phasegraph.tools`` (tool runtime),
``phasegraph.nodes`` (node functions and shared contracts), ``phasegraph.graphs`` (one module per
protocol) and ``phasegraph.server`` (the HTTP server and the ``phasegraph`` command).
"""

from phasegraph.graphs.registry import PROTOCOLS, ProtocolSpec, get_protocol
from phasegraph.graphs.run import RunResult, run, stream_run
from phasegraph.nodes.errors import ConfigurationError, PhasegraphError
from phasegraph.nodes.events import (
    AgentState,
    AgentStep,
    ApprovalAnswered,
    ApprovalRequested,
    BudgetExhaustedEvent,
    Cancelled,
    ContextUpdate,
    Decision,
    DuplicateToolCall,
    ErrorEvent,
    Event,
    EventBase,
    Final,
    IgnoredToolCall,
    LastTurnContext,
    Paused,
    PhaseEnd,
    PhaseStart,
    PlanCreated,
    PlanReadyForReview,
    PlanReview,
    Resumed,
    Route,
    Session,
    StepComplete,
    StepStart,
    TextChunk,
    ToolCall,
    ToolResultEvent,
    ValidationErrorEvent,
    Verdict,
    XmlBlock,
    parse_event,
)
from phasegraph.tools import ToolRegistry

#: The protocol ids, in the registry's order.
protocols: tuple[str, ...] = tuple(PROTOCOLS)

__all__ = [
    "PROTOCOLS",
    "AgentState",
    "AgentStep",
    "ApprovalAnswered",
    "ApprovalRequested",
    "BudgetExhaustedEvent",
    "Cancelled",
    "ConfigurationError",
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
    "PhaseEnd",
    "PhaseStart",
    "PhasegraphError",
    "PlanCreated",
    "PlanReadyForReview",
    "PlanReview",
    "ProtocolSpec",
    "Resumed",
    "Route",
    "RunResult",
    "Session",
    "StepComplete",
    "StepStart",
    "TextChunk",
    "ToolCall",
    "ToolRegistry",
    "ToolResultEvent",
    "ValidationErrorEvent",
    "Verdict",
    "XmlBlock",
    "get_protocol",
    "parse_event",
    "protocols",
    "run",
    "stream_run",
]
