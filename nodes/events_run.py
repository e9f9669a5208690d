"""Events about the run as a whole: a budget ran out, the answer, pause and resume, cancel, error.

Every protocol ends a successful turn with one ``Final`` and a failed one with an ``ErrorEvent``;
``Paused``, ``Resumed`` and ``Cancelled`` are added by the server as it stops, resumes and
recovers runs.
"""

from __future__ import annotations

from typing import Any, Literal

from phasegraph.nodes.events_base import EventBase


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


class Final(EventBase):
    """The turn's answer. Every successful run ends with exactly one."""

    type: Literal["final"] = "final"
    answer: str
    #: The answer was built from the tool results, not written by the model.
    fallback: bool = False
    #: The turn ran tools and every one failed: the answer rests on no tool output (refused calls never ran).
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
