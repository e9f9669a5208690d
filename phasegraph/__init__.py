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

from typing import TYPE_CHECKING, Any

# Each public name is imported from its module at first use (PEP 562), so ``import phasegraph`` loads
# none of LangGraph, LangChain, pydantic or the server; ``phasegraph.run`` loads what a run needs.
_EVENTS = "phasegraph.nodes.events"
_HOMES: dict[str, str] = {
    "PROTOCOLS": "phasegraph.graphs.registry",
    "ProtocolSpec": "phasegraph.graphs.registry",
    "get_protocol": "phasegraph.graphs.registry",
    "RunResult": "phasegraph.graphs.run",
    "run": "phasegraph.graphs.run",
    "stream_run": "phasegraph.graphs.run",
    "ConfigurationError": "phasegraph.nodes.errors",
    "PhasegraphError": "phasegraph.nodes.errors",
    "ToolRegistry": "phasegraph.tools.registry",
    "AgentState": _EVENTS,
    "AgentStep": _EVENTS,
    "ApprovalAnswered": _EVENTS,
    "ApprovalRequested": _EVENTS,
    "BudgetExhaustedEvent": _EVENTS,
    "Cancelled": _EVENTS,
    "ContextUpdate": _EVENTS,
    "Decision": _EVENTS,
    "DuplicateToolCall": _EVENTS,
    "ErrorEvent": _EVENTS,
    "Event": _EVENTS,
    "EventBase": _EVENTS,
    "Final": _EVENTS,
    "IgnoredToolCall": _EVENTS,
    "LastTurnContext": _EVENTS,
    "Paused": _EVENTS,
    "PhaseEnd": _EVENTS,
    "PhaseStart": _EVENTS,
    "PlanCreated": _EVENTS,
    "PlanReadyForReview": _EVENTS,
    "PlanReview": _EVENTS,
    "Resumed": _EVENTS,
    "Route": _EVENTS,
    "Session": _EVENTS,
    "StepComplete": _EVENTS,
    "StepStart": _EVENTS,
    "TextChunk": _EVENTS,
    "ToolCall": _EVENTS,
    "ToolResultEvent": _EVENTS,
    "ValidationErrorEvent": _EVENTS,
    "Verdict": _EVENTS,
    "XmlBlock": _EVENTS,
    "parse_event": _EVENTS,
}


def __getattr__(name: str) -> Any:
    if name == "protocols":  # the protocol ids, in the registry's order (no graph module is imported)
        from phasegraph.graphs.registry import PROTOCOLS

        return tuple(PROTOCOLS)
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'phasegraph' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(home), name)
    globals()[name] = value  # found once; later reads skip this function
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])


if TYPE_CHECKING:  # what type checkers and IDEs see: the names as the modules define them
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
    from phasegraph.tools.registry import ToolRegistry

    protocols: tuple[str, ...]

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
