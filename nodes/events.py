"""The one event contract: everything a client (CLI, HTTP stream, notebook) can receive."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter
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


class ToolCall(EventBase):
    """A tool call that is about to run."""

    type: Literal["tool_call"] = "tool_call"
    call_id: str
    name: str
    args: dict[str, Any]
    signature: str
    #: agent_network: the key of the call's full payload in the tool execution log.
    execution_id: str | None = None
    #: xml_contract: the call's step in its block (from 1) and the block it belongs to.
    step_index: int | None = None
    group: str | None = None


class ToolResultEvent(EventBase):
    """A tool call finished; ``output`` only when the client asked for tool outputs."""

    type: Literal["tool_result"] = "tool_result"
    call_id: str
    name: str
    status: Literal["ok", "error"]
    duration_ms: float
    output: str | None = None
    error: str | None = None
    execution_id: str | None = None
    step_index: int | None = None
    group: str | None = None


class DuplicateToolCall(EventBase):
    """A call whose signature already ran this turn was refused."""

    type: Literal["duplicate_tool_call"] = "duplicate_tool_call"
    name: str
    args: dict[str, Any]
    signature: str
    attempts: int
    limit: int


class IgnoredToolCall(EventBase):
    """A tool call that was seen but deliberately not executed."""

    type: Literal["ignored_tool_call"] = "ignored_tool_call"
    name: str
    args: dict[str, Any] = Field(default_factory=dict)
    reason: Literal["after_first_call", "tools_unbound", "incomplete", "too_large"]


class BudgetExhaustedEvent(EventBase):
    """A hard budget ran out; the run goes straight to its final answer."""

    type: Literal["budget_exhausted"] = "budget_exhausted"
    budget: Literal[
        "cycles",
        "duplicates",
        "model_calls",
        "tool_calls",
        "iterations",
        "context_rounds",
        "steps",
        "tool_errors",
        "session_seconds",
    ]
    limit: int
    used: int


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


class Session(EventBase):
    """A planner turn began: who and what it is about, and how it will be run (first event)."""

    type: Literal["session"] = "session"
    session_id: str
    user_id: str
    profile: Literal["speed", "balanced", "quality"]
    entity_id: str | None = None
    #: The context type's intent and the behaviours it requires (merged into the system prompt).
    intent: str
    required_behaviors: list[str]
    tools: list[str]


class LastTurnContext(EventBase):
    """What the planner carries over from the thread's previous turn."""

    type: Literal["last_turn_context"] = "last_turn_context"
    turn: int
    summary: str
    #: A drafted plan waiting for the user's verdict, and a tool call waiting for confirmation.
    pending_plan: dict[str, Any] | None = None
    pending_confirmation: dict[str, Any] | None = None


class AgentState(EventBase):
    """What the planner is doing now, for a status line ("thinking", "executing", "waiting on you")."""

    type: Literal["agent_state"] = "agent_state"
    state: Literal["thinking", "executing_tool", "executing_plan", "waiting_on_user"]
    details: str | None = None


class PlanCreated(EventBase):
    """The plan meta-tool drafted a plan: its steps, execution mode and status."""

    type: Literal["plan_created"] = "plan_created"
    plan: dict[str, Any]


class PlanReadyForReview(EventBase):
    """A drafted plan waits, stored as pending_review, for the user's natural-language verdict."""

    type: Literal["plan_ready_for_review"] = "plan_ready_for_review"
    plan: dict[str, Any]
    reasoning: str | None = None


class PlanReview(EventBase):
    """A reviewer model's verdict on a plan (agent_review): approved plans run, others go back."""

    type: Literal["plan_review"] = "plan_review"
    verdict: Literal["approved", "rejected", "needs_changes"]
    notes: str


class StepStart(EventBase):
    """A plan step starts (its tool events follow, with the same ``step``)."""

    type: Literal["step_start"] = "step_start"
    step_id: str
    tool: str
    args: dict[str, Any]
    rationale: str = ""


class StepComplete(EventBase):
    """A plan step ended: ok, error, or skipped because a step it depends on failed."""

    type: Literal["step_complete"] = "step_complete"
    step_id: str
    tool: str
    status: Literal["ok", "error", "skipped"]
    summary: str = ""


class Final(EventBase):
    """The turn's answer. Every successful run ends with exactly one."""

    type: Literal["final"] = "final"
    answer: str
    #: The answer was built from the tool results, not written by the model.
    fallback: bool = False
    #: The turn ran tools and every one failed: the answer rests on no tool output.
    all_tools_failed: bool = False
    #: goal_pursuit: the structured outcome behind ``answer`` (one of the two) and why the loop ended.
    resolution: dict[str, Any] | None = None
    operation_plan: dict[str, Any] | None = None
    exit: Literal["approved", "max_iterations", "step_budget"] | None = None
    #: planner: the turn's model usage ({calls, inputTokens, outputTokens, costUsd}).
    usage: dict[str, Any] | None = None


class Paused(EventBase):
    """The run stopped at a pause point and can be resumed."""

    type: Literal["paused"] = "paused"
    reason: Literal["requested", "disconnected", "shutdown", "crashed", "interrupt"]


class Resumed(EventBase):
    """A paused (or earlier) point of the run was picked up again."""

    type: Literal["resumed"] = "resumed"
    checkpoint_id: str
    from_phase_index: int | None = None
    fork: bool = False
    #: ``crashed`` when the run is picked up after the server driving it died mid-run.
    reason: Literal["requested", "crashed"] = "requested"
    #: Events with a ``graph_step`` from this seq up to this event belong to an attempt the crash
    #: interrupted; the run repeats that work, so a client drops them.
    replaces_from_seq: int | None = None


class Cancelled(EventBase):
    """The request was cancelled; it cannot be resumed."""

    type: Literal["cancelled"] = "cancelled"


class ErrorEvent(EventBase):
    """The run failed; ``message`` is written for a person."""

    type: Literal["error"] = "error"
    kind: str
    message: str
    #: agent_network: the execution log so far, when a budget ended the run.
    transcript: list[dict[str, Any]] | None = None


Event = Annotated[
    PhaseStart
    | PhaseEnd
    | TextChunk
    | ToolCall
    | ToolResultEvent
    | DuplicateToolCall
    | IgnoredToolCall
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
