"""The structured answers of the plan meta-tool: a drafted plan and a reviewer's verdict."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field


class DraftStep(BaseModel):
    """One step: a single tool call, why it is there, and the earlier steps it needs."""

    model_config = ConfigDict(extra="forbid")

    id: str = Field(pattern=r"^s[0-9]{1,3}$", description="s1, s2, ... in order.")
    tool: str = Field(min_length=1, description="The tool this step calls.")
    args: dict[str, Any] = Field(default_factory=dict, description="Its complete arguments.")
    rationale: str = Field(default="", description="Why this step, in one line.")
    depends_on: list[str] = Field(default_factory=list, description="Ids of earlier steps it needs.")


class PlanDraft(BaseModel):
    """A plan: the reasoning behind it and its steps in execution order."""

    model_config = ConfigDict(extra="forbid")

    reasoning: str = Field(default="", description="How the steps achieve the objective.")
    steps: list[DraftStep] = Field(min_length=1, description="The steps, in order.")


class PlanVerdict(BaseModel):
    """A reviewer's verdict on a plan, with notes the planner can act on."""

    model_config = ConfigDict(extra="forbid")

    verdict: Literal["approved", "rejected", "needs_changes"]
    notes: str = Field(default="", description="What is wrong or worth knowing, concretely.")
