"""The planner's events: the turn's session, its status line, plans and their review, plan steps.

A planner turn opens with ``Session`` (and ``LastTurnContext`` when the thread has an earlier
turn), reports what it is doing with ``AgentState``, and reports a plan from its draft
(``PlanCreated``, ``PlanReadyForReview``, ``PlanReview``) through each step it runs
(``StepStart``, ``StepComplete``).
"""

from __future__ import annotations

from typing import Any, Literal

from phasegraph.nodes.events_base import EventBase


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
