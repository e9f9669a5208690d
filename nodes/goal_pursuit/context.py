"""Run configuration of the goal-pursuit protocol: mode, iteration and context budgets, templates."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Literal

from langchain_core.language_models import BaseChatModel
from pydantic.json_schema import SkipJsonSchema

from phasegraph.nodes.context import RunContext
from phasegraph.nodes.errors import ConfigurationError
from phasegraph.nodes.goal_pursuit.prompts import TEMPLATE_FILES, PhaseName, PhaseTemplates, phase_templates
from phasegraph.nodes.models import make_model
from phasegraph.nodes.settings import run_settings
from phasegraph.nodes.structured import StructuredMethod
from phasegraph.tools import ToolContext, ToolRegistry
from phasegraph.tools.resources import ResourceError, ResourceRepository, load_bundled, resource_registry

DEMO_SCRIPT = Path(__file__).resolve().parent / "demo" / "script.json"


@dataclass(kw_only=True)
class GoalPursuitContext(RunContext):
    """Limits, mode and templates of the goal-pursuit protocol (seed 001)."""

    PROTOCOL: ClassVar[str] = "goal_pursuit"
    DEMO_SCRIPT: ClassVar[Path] = DEMO_SCRIPT

    mode: Literal["determine", "pursue"] = field(
        default="pursue",
        metadata={
            "description": "determine: return the approved OperationPlan or Resolution without running it. "
            "pursue: run each approved plan and determine the next action, until a Resolution."
        },
    )
    min_iter: int = field(
        default=0,
        metadata={"description": "Iterations that must complete before an execute decision is approved."},
    )
    max_iter: int = field(
        default=5,
        metadata={"description": "Iterations per determination; then the last planned action is returned."},
    )
    max_context_rounds: int = field(
        default=3, metadata={"description": "Discovery (and refinement) rounds per iteration."}
    )
    max_steps: int = field(
        default=5, metadata={"description": "pursue: tool executions per turn before the pursuit stops."}
    )
    context_budget_chars: int = field(
        default=4000,
        metadata={
            "description": "Resource characters the context may hold; above it (or when discovery flags "
            "irrelevant segments) a refinement phase runs."
        },
    )
    search_limit: int = field(default=5, metadata={"description": "Hits listed per search query."})
    template_lang: str = field(
        default="en",
        metadata={"description": "Language of the phase templates ('en', 'de'); falls back to en."},
    )
    template_dir: str = field(
        default="",
        metadata={
            "description": "Folder of your own templates (<lang>/<name>.jinja2). Empty: the bundled ones."
        },
    )
    resources: str = field(
        default_factory=lambda: run_settings().resources,
        metadata={
            "description": "Folder of the resource repository (changes are written back to its files). "
            "Empty: the bundled story world, changed in memory only."
        },
    )
    structured_output: StructuredMethod = field(
        default="auto",
        metadata={
            "description": "How phases get structured answers: tool_calling, json_mode (for servers "
            "without tool calling) or auto (tool calling, falling back to JSON)."
        },
    )
    resource_repository: SkipJsonSchema[Any] = field(
        default=None,
        metadata={"description": "Python API only: a phasegraph.tools.resources.ResourceRepository."},
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        for name in ("max_iter", "max_context_rounds", "max_steps", "search_limit", "context_budget_chars"):
            if getattr(self, name) < 1:
                raise ConfigurationError(f"{name} must be at least 1")
        if self.min_iter < 0:
            raise ConfigurationError("min_iter must not be negative")
        if self.min_iter >= self.max_iter:
            raise ConfigurationError(
                f"min_iter ({self.min_iter}) must be below max_iter ({self.max_iter}), or nothing could run"
            )
        if self.resource_repository is not None and not isinstance(
            self.resource_repository, ResourceRepository
        ):
            raise ConfigurationError(
                "resource_repository must be a phasegraph.tools.resources.ResourceRepository"
            )
        if self.resources and not Path(self.resources).is_dir():
            raise ConfigurationError(f"resources folder {self.resources!r} is not a folder")
        self.templates()  # a missing template is a configuration error now, not mid-run
        if self.chat_model is None:  # a bad phase model fails now, before the run starts
            for spec in {self.model_for(phase) for phase in TEMPLATE_FILES} - {self.model}:
                self.check_model(spec)

    def phase_model(self, phase: PhaseName, call_index: int = 0, user_turn: int = 0) -> BaseChatModel:
        """The chat model of one phase (a role): ``[models] "goal_pursuit.<phase>"``, else the run's model.

        ``call_index`` counts the model calls this user message already made (a scripted model starts
        there), whichever phase made them.
        """
        if self.chat_model is not None:
            return self.chat_model
        spec = self.model_for(phase)
        if spec == self.model:
            return self.resolve_model(call_index, user_turn)
        return make_model(spec, call_index=call_index, user_turn=user_turn, demo_script=self.DEMO_SCRIPT)

    def templates(self) -> PhaseTemplates:
        """The phase templates in this run's language."""
        return phase_templates(self.template_dir, self.template_lang)

    def repository(self) -> ResourceRepository:
        """The run's resource repository (loaded at its first use)."""
        if self.resource_repository is None:
            try:
                self.resource_repository = (
                    ResourceRepository.load(self.resources, writable=True)
                    if self.resources
                    else load_bundled()
                )
            except ResourceError as exc:
                raise ConfigurationError(f"the resource repository cannot be loaded: {exc}") from exc
        repository: ResourceRepository = self.resource_repository
        return repository

    def default_tools(self) -> ToolRegistry:
        """The repository's domain tools."""
        return resource_registry()

    def tool_context(self) -> ToolContext:
        """The workspace and project, plus the repository the domain tools change."""
        base = super().tool_context()
        return ToolContext(
            workspace=base.workspace,
            project_id=base.project_id,
            request_id=base.request_id,
            resources=self.repository(),
        )
