"""Context types: the intent, required behaviours and model profile each one brings to a session."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

ContextType = Literal["project_create", "project", "task", "project_audit", "general"]
ProfileName = Literal["speed", "balanced", "quality"]
CONTEXT_TYPES: tuple[ContextType, ...] = ("project_create", "project", "task", "project_audit", "general")


@dataclass(frozen=True)
class Guidance:
    """What a context type asks of the planner."""

    intent: str
    required_behaviors: tuple[str, ...]
    profile: ProfileName


GUIDANCE: dict[ContextType, Guidance] = {
    "project_create": Guidance(
        intent="Understand what the user needs, choose a template and create the project.",
        required_behaviors=(
            "Leave the user with a created project: discover templates, create one only if none fits, "
            "create the project, then publish its context document.",
            "Use agent_create_plan for the creation so its steps run in that order.",
        ),
        profile="balanced",
    ),
    "project": Guidance(
        intent="Work inside one existing project.",
        required_behaviors=(
            "The project in scope is the entity of this conversation; tools use it when no project is named.",
            "Archiving and deleting cannot be undone: such a call waits for a person's approval before it "
            "runs; if they reject it, do not make it again unless they ask for it.",
        ),
        profile="balanced",
    ),
    "task": Guidance(
        intent="Inspect and update tasks.",
        required_behaviors=(
            "Prefer the task tools (list_tasks, update_task, create_task).",
            "Name blockers you find and who or what they wait on.",
        ),
        profile="speed",
    ),
    "project_audit": Guidance(
        intent="Evaluate the health of an active project.",
        required_behaviors=(
            "Use audit_project first and ground every finding in its result.",
            "Create a plan with agent_create_plan only when a deeper, multi-step analysis is needed.",
        ),
        profile="quality",
    ),
    "general": Guidance(
        intent="Research and high-level help.",
        required_behaviors=(
            "Rely on the read tools (list_templates, list_projects, list_tasks).",
            "Escalate to agent_create_plan only when the request really takes several steps.",
        ),
        profile="balanced",
    ),
}


class ProfileSettings(BaseModel):
    """Model settings of one profile; an empty ``model`` means the run's model."""

    model_config = ConfigDict(extra="forbid")

    model: str = Field(default="", description="Model spec for this profile (empty: the run's model).")
    temperature: float = Field(default=0.2, ge=0, le=2)
    max_tokens: int = Field(default=1024, ge=1)


DEFAULT_PROFILES: dict[ProfileName, ProfileSettings] = {
    "speed": ProfileSettings(temperature=0.0, max_tokens=512),
    "balanced": ProfileSettings(temperature=0.2, max_tokens=1024),
    "quality": ProfileSettings(temperature=0.0, max_tokens=2048),
}


def guidance_text(context_type: ContextType, entity_id: str) -> str:
    """The guidance block merged into the planner's system prompt."""
    guide = GUIDANCE[context_type]
    lines = [f"Context type: {context_type}. Intent: {guide.intent}", "Required behaviours:"]
    lines += [f"- {behavior}" for behavior in guide.required_behaviors]
    if entity_id:
        lines.append(f"Entity in scope: {entity_id}.")
    return "\n".join(lines)
