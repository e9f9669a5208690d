"""Graph state of the planner: the conversation across turns, and one turn's counters, plan and usage."""

from __future__ import annotations

from typing import Annotated, Any, Literal, NotRequired

from langchain_core.messages import AnyMessage
from langgraph.graph.message import add_messages
from typing_extensions import TypedDict

from phasegraph.nodes.answers import GatheredResult
from phasegraph.nodes.conversation import user_turn

ExecutionMode = Literal["auto_execute", "draft_only", "agent_review"]
Stop = Literal["", "tool_cap", "watchdog", "plan", "run_plan"]


class PendingCall(TypedDict):
    """A tool call of the planner's last step: ``{id, name, args}``."""

    id: str
    name: str
    args: dict[str, Any]
    error: NotRequired[str]  # why it must not run (broken or oversized arguments); the model reads it


class PlanStep(TypedDict):
    """One typed step of a plan."""

    id: str
    tool: str
    args: dict[str, Any]
    rationale: str
    depends_on: list[str]


class Plan(TypedDict):
    """A plan drafted by ``agent_create_plan``, as stored and as clients see it."""

    plan_id: str
    call_id: str  # the agent_create_plan (or agent_execute_plan) call its outcome answers
    objective: str
    context_type: str
    execution_mode: ExecutionMode
    status: str
    steps: list[PlanStep]
    reasoning: str
    requested_outputs: list[str]
    priority_entities: list[str]


class StepOutcome(TypedDict):
    """What one executed plan step returned."""

    id: str
    tool: str
    status: Literal["ok", "error", "skipped"]
    text: str
    args: NotRequired[dict[str, Any]]  # the arguments it ran with (references resolved)
    rejected: NotRequired[bool]  # a person rejected the step's call: it never ran


class TurnUsage(TypedDict):
    """The turn's model usage so far."""

    calls: int
    input_tokens: int
    output_tokens: int
    cost_usd: float


def no_usage() -> TurnUsage:
    """Usage of a turn that made no model call yet."""
    return TurnUsage(calls=0, input_tokens=0, output_tokens=0, cost_usd=0.0)


class PlannerInput(TypedDict):
    """What a caller sends: the conversation, ending with the user's new message."""

    messages: Annotated[list[AnyMessage], add_messages]


class PlannerOutput(TypedDict):
    """What a caller gets back: the conversation, the answer, the turn's usage and the last plan."""

    messages: Annotated[list[AnyMessage], add_messages]
    answer: str
    usage: TurnUsage
    plan: Plan | None


class PlannerState(TypedDict):
    """The planner's thread: messages and carried-over items persist; the rest is reset each turn.

    Threads checkpointed before approvals replaced the yes/no confirmation may still hold
    ``pending_confirmation`` and ``confirmed``: channels the graph no longer has, which it ignores.
    """

    messages: Annotated[list[AnyMessage], add_messages]
    context_type: str  # the turn's context type (events the server adds read it back)
    turn: int  # turns of this thread so far, this one included
    model_calls: int  # model calls of the thread (keys usage rows)
    turn_first_call: int  # model_calls when this turn started (a scripted model counts from it)
    elapsed: float  # active seconds of this turn (pauses do not count)
    pending: list[PendingCall]  # tool calls of the planner's last step
    tool_calls_used: int  # calls of this turn counted against max_tool_calls
    results: list[GatheredResult]  # tool results of this turn (the fallback answer's material)
    usage: TurnUsage
    plan: Plan | None  # the plan being drafted, reviewed or run
    plan_request: PendingCall | None  # the agent_create_plan call waiting to be drafted
    plan_results: list[StepOutcome]
    plans_made: int  # plans drafted by this thread (their ids)
    pending_plan: Plan | None  # a draft waiting for the user's verdict (carried to the next turn)
    stop: Stop  # why the last node wants the loop to leave its usual path
    answer: str
    review_outcomes: dict[str, int]  # plan_review verdicts of the thread, counted
    errors_logged: int  # error rows this turn (their keys)
    #: What the model reads as each tool call's result, by call id (the thread's messages show the
    #: output only when show_tool_outputs is on; the planner's session always reads it).
    tool_outputs: dict[str, str]


class PlanRunState(TypedDict):
    """The keys the plan executor subgraph shares with the planner."""

    messages: Annotated[list[AnyMessage], add_messages]
    plan: Plan | None
    plan_results: list[StepOutcome]
    results: list[GatheredResult]
    elapsed: float
    errors_logged: int
    tool_outputs: dict[str, str]


def public_plan(plan: Plan) -> dict[str, Any]:
    """A plan as events and tool results show it (the call id is internal)."""
    return {key: value for key, value in plan.items() if key != "call_id"}


def model_position(state: PlannerState) -> tuple[int, int]:
    """Where a scripted model stands: the call index within this user message, and which message it is."""
    return state["model_calls"] - state.get("turn_first_call", 0), user_turn(state["messages"])


def meta(state: PlannerState | PlanRunState, context_type: str) -> dict[str, Any]:
    """Fields every planner event carries."""
    plan = state.get("plan")
    return {"context_type": context_type, "plan_id": plan["plan_id"] if plan else None}
