"""Events only one protocol emits: goal_pursuit's, agent_network's and xml_contract's.

goal_pursuit reports how its working context changed, the action it decided and the refinement
verdict on it; agent_network reports each agent's decision and every handoff; xml_contract
reports each validated block before it runs and each block it refused. The planner's events,
more numerous, are in ``phasegraph.nodes.events_planner``.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from phasegraph.nodes.events_base import EventBase

# goal_pursuit


class ContextUpdate(EventBase):
    """The model's working context changed (goal_pursuit): resources, filters, tools or their order."""

    type: Literal["context_update"] = "context_update"
    action: Literal["searched", "loaded", "excluded", "filtered", "expanded", "collapsed", "sorted"]
    #: Resources the change touched (loaded, excluded, sorted, or found by a search).
    uris: list[str] = Field(default_factory=list)
    #: Tools expanded or collapsed.
    tools: list[str] = Field(default_factory=list)
    #: What was asked for but does not exist (unknown URIs or tool names).
    missing: list[str] = Field(default_factory=list)
    query: str | None = None
    #: Characters the change added (positive) or removed (negative), and the context's size after it.
    chars: int = 0
    context_chars: int = 0


class Decision(EventBase):
    """The action decision of an iteration: run a tool, or finish with an answer."""

    type: Literal["decision"] = "decision"
    decision_type: Literal["execute", "finalize"]
    tool: str | None = None
    params: dict[str, Any] = Field(default_factory=dict)
    #: For a finalize decision: success, partial or failure.
    status: str | None = None


class Verdict(EventBase):
    """The refinement analysis of a decision: approve it, or refine the assessment and iterate."""

    type: Literal["verdict"] = "verdict"
    verdict: Literal["approve", "refine"]
    confidence: float | None = None
    #: Assessment fields the refinement changed, with their new values.
    assessment_delta: dict[str, Any] = Field(default_factory=dict)
    #: An approved execute decision that came before ``min_iter`` allows execution.
    deferred: bool = False


# agent_network


class AgentStep(EventBase):
    """An agent of a network decided (agent_network); a refused decision says why and is not run."""

    type: Literal["agent_step"] = "agent_step"
    #: ``{action, action_reasoning, action_details}`` as the model answered.
    decision: dict[str, Any]
    #: Why the decision was not executed (a tool, parameter or route the agent does not have).
    refused: str | None = None
    prompt_chars: int
    prompt_tokens: int | None = None
    retries: int | None = None


class Route(EventBase):
    """Control passed from one agent to another (agent_network); ``epoch`` is the new control epoch."""

    type: Literal["route"] = "route"
    from_agent: str = Field(alias="from")
    to_agent: str = Field(alias="to")
    message: str | None = None


# xml_contract


class XmlBlock(EventBase):
    """A validated block of tool calls is about to run (xml_contract)."""

    type: Literal["xml_block"] = "xml_block"
    kind: Literal["single", "parallel", "sequential"]
    #: The block's id, ``<iteration>.<n>``, repeated on its calls' tool events.
    group: str
    #: ``{service, tool, args}`` of each step, in block order.
    steps: list[dict[str, Any]]


class ValidationErrorEvent(EventBase):
    """A proposed block broke the contract and was not run; the model reads why (xml_contract)."""

    type: Literal["validation_error"] = "validation_error"
    #: The block's id, or None when the problem concerns the whole answer (a DTD, say).
    group: str | None = None
    problems: list[str]
