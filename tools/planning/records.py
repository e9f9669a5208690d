"""The domain's records as the tools and the planner read them."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

TaskStatus = Literal["todo", "in_progress", "blocked", "done"]
Priority = Literal["low", "normal", "high"]
PlanStatus = Literal[
    "draft", "pending_review", "approved", "running", "completed", "failed", "rejected", "superseded"
]
#: How a model call ended: it answered, it failed (``error_kind`` says how), or the turn's watchdog cut it.
CallStatus = Literal["ok", "error", "timeout"]


class Template(BaseModel):
    """A project template: the sections of its context document and the tasks a project starts with."""

    template_id: str
    name: str
    description: str
    sections: list[str]
    task_seeds: list[str]
    builtin: bool = False


class Project(BaseModel):
    """A project of a scope."""

    project_id: str
    name: str
    template_id: str
    description: str
    status: Literal["active", "archived"]
    created_at: float
    updated_at: float


class Task(BaseModel):
    """A task of a project."""

    task_id: str
    project_id: str
    title: str
    status: TaskStatus
    priority: Priority
    blocker: str | None = None
    updated_at: float


class ContextDocument(BaseModel):
    """A project's published context document (a new version per publication of the same title)."""

    document_id: str
    project_id: str
    title: str
    body: str
    version: int
    published_at: float


class PlanRecord(BaseModel):
    """A stored plan with its context type, execution mode and status."""

    scope: str
    plan_id: str
    session_id: str
    request_id: str
    context_type: str
    execution_mode: str
    objective: str
    status: PlanStatus
    steps: list[dict[str, Any]]
    review: dict[str, Any] | None = None
    summary: str = ""
    created_at: float
    updated_at: float


class UsageRow(BaseModel):
    """One model call, failed ones too: who, what for, which model, how it ended, tokens, latency and cost."""

    scope: str
    request_id: str
    call_index: int
    session_id: str
    user_id: str
    context_type: str
    operation_type: str
    profile: str
    execution_mode: str | None = None
    model: str
    input_tokens: int = Field(ge=0)
    output_tokens: int = Field(ge=0)
    latency_ms: float
    cost_usd: float
    created_at: float
    status: CallStatus = "ok"
    error_kind: str | None = None  # the failure's kind (``provider``, ``script``, ...) when not ok


class ErrorRow(BaseModel):
    """One caught error with the tags that place it."""

    scope: str
    request_id: str
    error_index: int
    session_id: str
    user_id: str
    component: str
    stage: str
    tool_name: str | None = None
    context_type: str
    execution_mode: str | None = None
    kind: str
    message: str
    created_at: float
