"""Run configuration of the planner protocol: context type, profiles, guardrails and the project domain."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal

from langchain_core.language_models import BaseChatModel
from pydantic import Field, ValidationError
from pydantic.json_schema import SkipJsonSchema

from phasegraph.nodes.context import AtLeastOne, RunContext
from phasegraph.nodes.errors import ConfigurationError
from phasegraph.nodes.models import make_model, public_spec
from phasegraph.nodes.planner.guidance import (
    CONTEXT_TYPES,
    DEFAULT_PROFILES,
    GUIDANCE,
    ContextType,
    ProfileName,
    ProfileSettings,
)
from phasegraph.nodes.structured import StructuredMethod
from phasegraph.tools import ToolContext, ToolRegistry
from phasegraph.tools.planning import PlanningStore, open_planning, planning_registry

DEMO_SCRIPT = Path(__file__).resolve().parent / "demo" / "script.json"
PROFILES = ("speed", "balanced", "quality")


@dataclass(kw_only=True)
class PlannerContext(RunContext):
    """Context type, profiles and guardrails of the planner session (seed 002)."""

    PROTOCOL: ClassVar[str] = "planner"
    DEMO_SCRIPT: ClassVar[Path] = DEMO_SCRIPT
    CLIENT_SETTINGS: ClassVar[frozenset[str]] = frozenset(
        {"context_type", "entity_id", "user_id", "profile", "max_tool_calls", "session_seconds"}
    )

    context_type: ContextType = field(
        default="general",
        metadata={
            "description": "What the conversation is about: project_create, project, task, project_audit "
            "or general. It sets the intent and required behaviours in the system prompt, and the profile."
        },
    )
    entity_id: str = field(
        default="",
        metadata={
            "description": "The entity in scope (a project id): tools use it when no project is named."
        },
    )
    user_id: str = field(default="anonymous", metadata={"description": "Who asks (usage and error rows)."})
    session_id: str = field(
        default="", metadata={"description": "Session of the usage rows. Empty: the thread id."}
    )
    profile: ProfileName | Literal[""] = field(
        default="",
        metadata={
            "description": "speed, balanced or quality for the planner's calls. Empty: the context type's."
        },
    )
    profiles: dict[str, dict[str, Any]] = field(
        default_factory=dict,
        metadata={
            "description": 'Overrides of the profiles\' model settings, e.g. {"quality": {"model": '
            '"openai:gpt-4.1", "temperature": 0, "max_tokens": 2048}}.'
        },
    )
    max_tool_calls: AtLeastOne = field(
        default=8, metadata={"description": "Tool calls the planner may make in one turn (plan steps aside)."}
    )
    session_seconds: Annotated[float, Field(gt=0)] = field(
        default=90.0,
        metadata={
            "description": "Watchdog: active seconds one turn may take before it ends with what it has."
        },
    )
    max_plan_steps: int = field(default=8, metadata={"description": "Most steps a drafted plan may have."})
    structured_output: StructuredMethod = field(
        default="auto",
        metadata={"description": "How plans and reviews are asked for: auto, tool_calling or json_mode."},
    )
    planning_store: SkipJsonSchema[Any] = field(
        default=None,
        metadata={"description": "Python API only: an open phasegraph.tools.planning.PlanningStore."},
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.context_type not in CONTEXT_TYPES:
            raise ConfigurationError(
                f"context_type {self.context_type!r} is unknown; use one of {', '.join(CONTEXT_TYPES)}"
            )
        if self.profile and self.profile not in PROFILES:
            raise ConfigurationError(f"profile {self.profile!r} is unknown; use speed, balanced or quality")
        if self.max_tool_calls < 1 or self.max_plan_steps < 1:
            raise ConfigurationError("max_tool_calls and max_plan_steps must be at least 1")
        if not self.session_seconds > 0:
            raise ConfigurationError("session_seconds must be positive")
        self._profiles = _profiles(self.profiles)
        for settings in self._profiles.values():
            if settings.model and self.chat_model is None:
                self.check_model(settings.model)  # a bad spec fails now
        self._store: PlanningStore | None = None
        self._opening = asyncio.Lock()

    @property
    def session_profile(self) -> ProfileName:
        """The profile of the planner's own calls: the one chosen, or the context type's."""
        return self.profile or GUIDANCE[self.context_type].profile

    def profile_settings(self, profile: ProfileName) -> ProfileSettings:
        """The model settings of a profile."""
        return self._profiles[profile]

    def profile_model(
        self, profile: ProfileName, call_index: int, user_turn: int = 0, role: str = ""
    ) -> tuple[BaseChatModel, str]:
        """The chat model of a call under ``profile``, and its name for usage rows.

        ``call_index`` counts the calls already made answering user message ``user_turn`` (a
        scripted model starts there). A ``role`` (``reviewer``) the project file gives a model
        (``[models] "planner.reviewer"``) uses that one; otherwise the profile's model, else the
        run's. The profile's temperature and max_tokens are set on models that have those settings.
        """
        settings = self._profiles[profile]
        if self.chat_model is not None:
            return self.chat_model, _name_of(self.chat_model)
        role_spec = self.model_for(role) if role else self.model
        spec = role_spec if role_spec != self.model else (settings.model or self.model)
        model = make_model(spec, call_index=call_index, user_turn=user_turn, demo_script=self.DEMO_SCRIPT)
        tuned = {
            k: v for k, v in settings.model_dump().items() if k != "model" and k in type(model).model_fields
        }
        return (model.model_copy(update=tuned) if tuned else model), public_spec(spec)

    def default_tools(self) -> ToolRegistry:
        """The project domain's tools."""
        return planning_registry()

    async def planning(self) -> PlanningStore:
        """The run's project domain, plans and ledger (opened at the first call, kept until the run ends)."""
        if self.planning_store is not None:
            store: PlanningStore = self.planning_store
            return store
        async with self._opening:
            if self._store is None:
                # opening makes the database's folder: blocking work, kept off the event loop
                opened = await asyncio.to_thread(open_planning, self.database)
                await opened.ensure_schema()
                self._store = opened
        return self._store

    def tool_context(self) -> ToolContext:
        """What the domain tools know: the project (scope), the entity in scope and the open store."""
        base = super().tool_context()
        return ToolContext(
            workspace=base.workspace,
            project_id=base.project_id,
            request_id=base.request_id,
            planning=self.planning_store or self._store,
            entity_id=self.entity_id,
        )

    async def aclose(self, outcome: str | None = None) -> None:
        """Close the store this run opened (one passed in stays open)."""
        await super().aclose(outcome)
        store, self._store = self._store, None
        if store is not None:
            await store.close()


def _profiles(overrides: dict[str, dict[str, Any]]) -> dict[ProfileName, ProfileSettings]:
    unknown = sorted(set(overrides) - set(PROFILES))
    if unknown:
        raise ConfigurationError(f"profiles.{unknown[0]} is not a profile; use speed, balanced or quality")
    merged: dict[ProfileName, ProfileSettings] = {}
    for name, default in DEFAULT_PROFILES.items():
        try:
            merged[name] = ProfileSettings.model_validate({**default.model_dump(), **overrides.get(name, {})})
        except ValidationError as exc:
            raise ConfigurationError(f"profiles.{name}: {exc.errors()[0]['msg']}") from None
    return merged


def _name_of(model: BaseChatModel) -> str:
    params = model._get_ls_params()
    return f"{params.get('ls_provider', 'model')}:{params.get('ls_model_name', '?')}"
