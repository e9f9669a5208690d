"""Run configuration: one dataclass per protocol over a shared base, rendered as a form by Studio."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, ClassVar, get_type_hints
from uuid import uuid4

from langchain_core.language_models import BaseChatModel
from pydantic import BeforeValidator, Field, TypeAdapter, ValidationError
from pydantic.json_schema import SkipJsonSchema

from phasegraph.nodes.errors import ConfigurationError
from phasegraph.nodes.models import DEMO_MODEL, DEMO_SCRIPT, DEMO_WORKSPACE, make_model
from phasegraph.nodes.project import Project, load_project, setting_problem
from phasegraph.nodes.prompts import SYSTEM_PROMPT
from phasegraph.nodes.settings import run_settings
from phasegraph.nodes.telemetry import RunTrace
from phasegraph.tools import ToolContext, ToolRegistry, default_registry
from phasegraph.tools.sources import ToolSourceError, ToolSources, UnknownPolicyKeys, select
from phasegraph.tools.toolset import Toolset, open_toolset

logger = logging.getLogger(__name__)
#: Fields a project file may not set: the server's, the request's and the live objects.
NOT_FROM_PROJECT = frozenset(
    {"request_id", "database", "chat_model", "tool_registry", "project_file", "trace_parent"}
)


#: Whether a Context being made makes its models, so a bad spec fails before the run (``models_unchecked``).
_CHECK_MODELS: ContextVar[bool] = ContextVar("phasegraph_check_models", default=True)


@contextmanager
def models_unchecked() -> Iterator[None]:
    """Contexts made within do not make their models: one made to list its tools needs no provider key.

    A run's Context makes each model it names as it is made, so a bad spec fails before the run
    starts; ``phasegraph tools`` runs no model, and an ``openai:`` model needs ``OPENAI_API_KEY`` to be made.
    """
    token = _CHECK_MODELS.set(False)
    try:
        yield
    finally:
        _CHECK_MODELS.reset(token)


def _whole(value: Any) -> Any:
    return int(value) if isinstance(value, float) and value.is_integer() else value


# Counts a client may set, with the bounds ``__post_init__`` checks written into their schema, read
# as JSON Schema counts integers: 3.0 is 3 (but "3" and true are not).
#: A budget: at least 1.
AtLeastOne = Annotated[int, Field(ge=1), BeforeValidator(_whole)]
#: A count where 0 means "none given" (the latest version, ...).
AtLeastZero = Annotated[int, Field(ge=0), BeforeValidator(_whole)]


@dataclass(kw_only=True)
class RunContext:
    """What every protocol needs to know about one run."""

    PROTOCOL: ClassVar[str] = ""
    #: The script behind 'scripted:demo' for this protocol (its offline demo).
    DEMO_SCRIPT: ClassVar[Path] = DEMO_SCRIPT
    #: Fields a remote client may set in a request's ``settings`` (the server sets the others).
    CLIENT_SETTINGS: ClassVar[frozenset[str]] = frozenset()

    model: str = field(
        default=DEMO_MODEL,
        metadata={
            "description": "Model spec: 'openai:<model>' or 'scripted:<path>' ('scripted:demo' is offline)."
        },
    )
    workspace: str = field(
        default="",
        metadata={
            "description": "Root folder the workspace tools may read (relative paths start at the folder "
            "the process started in). Empty: the bundled demo workspace with the 'scripted:demo' model, "
            "else that folder."
        },
    )
    project_id: str = field(default="default", metadata={"description": "Project the run belongs to."})
    request_id: str = field(
        default_factory=lambda: uuid4().hex, metadata={"description": "Id of this request (trace key)."}
    )
    show_tool_outputs: bool = field(
        default=False, metadata={"description": "Include raw tool outputs in tool_result events."}
    )
    system_prompt: str = field(default=SYSTEM_PROMPT, metadata={"description": "The initial system prompt."})
    tools: list[str] | None = field(
        default=None,
        metadata={
            "description": "Names or globs ('git.*') of the tools to enable (all the run has when empty)."
        },
    )
    max_tool_args_chars: int = field(
        default_factory=lambda: run_settings().max_tool_args_chars,
        metadata={
            "description": "Longest argument text one tool call may have; a longer call is not run and the "
            "model reads why."
        },
    )
    database: SkipJsonSchema[str] = field(
        default_factory=lambda: run_settings().database,
        metadata={
            "description": "The server's database (memory | sqlite:PATH | postgresql://...), where protocols "
            "read data published beside the checkpoints (agent networks). The server sets it."
        },
    )
    # Live objects for the Python API (tests, notebooks). SkipJsonSchema keeps them out of the
    # JSON schema langgraph-api serves, so Studio's form never offers them.
    chat_model: SkipJsonSchema[Any] = field(
        default=None, metadata={"description": "Python API only: a chat model instance."}
    )
    tool_registry: SkipJsonSchema[Any] = field(
        default=None, metadata={"description": "Python API only: a ToolRegistry."}
    )
    project_file: SkipJsonSchema[str] = field(
        default="",
        metadata={
            "description": "The project file (phasegraph.toml). Empty: PHASEGRAPH_CONFIG, else "
            "./phasegraph.toml when there is one."
        },
    )

    trace_parent: SkipJsonSchema[str] = field(
        default="",
        metadata={
            "description": "The W3C traceparent of the request's first run: a resumed run's root span links "
            "to it. The server sets it."
        },
    )

    def __post_init__(self) -> None:
        self._trace: RunTrace | None = None
        self._project = load_project(self.project_file or None)
        if self._project is not None:
            self._apply(self._project)
        self.workspace = str(_absolute(self.workspace or self._default_workspace()))
        if not Path(self.workspace).is_dir():
            raise ConfigurationError(f"workspace {self.workspace!r} is not a folder")
        if self.max_tool_args_chars < 1:
            raise ConfigurationError("max_tool_args_chars must be at least 1")
        if self.chat_model is not None and not isinstance(self.chat_model, BaseChatModel):
            raise ConfigurationError("chat_model must be a LangChain BaseChatModel")
        if self.chat_model is None:
            self.check_model(self.model)
        if self.tool_registry is not None and not isinstance(self.tool_registry, ToolRegistry):
            raise ConfigurationError("tool_registry must be a tools.ToolRegistry")
        self._registry: ToolRegistry | None = None  # chosen at the first call of registry()
        self._sources = (
            self._project.sources(Path(self.workspace)) if self._project is not None else ToolSources()
        )
        self._toolset: Toolset | None = None
        self._tools_lock = asyncio.Lock()

    def check_model(self, spec: str) -> None:
        """Make the model of ``spec`` once, so a bad spec or script fails now, before the run starts.

        Not within ``models_unchecked()``: a Context made there runs no model.
        """
        if _CHECK_MODELS.get():
            make_model(spec, demo_script=self.DEMO_SCRIPT)

    def _apply(self, project: Project) -> None:
        """Take the project file's settings for every field still at its default."""
        fields = {f.name: f for f in dataclasses.fields(self)}
        hints = get_type_hints(type(self), include_extras=True)
        for key, value in project.settings(self.PROTOCOL).items():
            problem = setting_problem(project, self.PROTOCOL, key, fields, NOT_FROM_PROJECT)
            if problem is not None:
                raise ConfigurationError(problem)
            if getattr(self, key) != _default(fields[key]) or (
                key == "model" and self.chat_model is not None
            ):
                continue  # the caller chose this one
            try:
                # strict: TOML values are typed ("5" is no count, "yes" no bool)
                setattr(self, key, TypeAdapter(hints[key]).validate_python(value, strict=True))
            except ValidationError as exc:
                where = project.where(("protocols", self.PROTOCOL, key))
                raise ConfigurationError(f"{where}: {exc.errors()[0]['msg']} (found {value!r})") from None

    def _default_workspace(self) -> Path:
        """The bundled demo workspace goes with the bundled demo script; anything else reads here."""
        return DEMO_WORKSPACE if self.model == DEMO_MODEL and self.chat_model is None else Path()

    def resolve_model(self, call_index: int = 0, user_turn: int = 0) -> BaseChatModel:
        """The chat model for the ``call_index``-th model call answering user message ``user_turn``."""
        if self.chat_model is not None:
            return self.chat_model
        return make_model(
            self.model, call_index=call_index, user_turn=user_turn, demo_script=self.DEMO_SCRIPT
        )

    def model_for(self, role: str) -> str:
        """The model spec of one of the protocol's roles: the project file's, else the run's model."""
        if self._project is not None and self.chat_model is None and self.model == self._default_model():
            return self._project.model_for(self.PROTOCOL, role) or self.model
        return self.model

    def _default_model(self) -> str:
        found = self._project.model_for(self.PROTOCOL) if self._project is not None else None
        return found or DEMO_MODEL

    async def open_tools(self) -> ToolRegistry:
        """The tools this run may call, its MCP servers started at the first call (then kept open)."""
        if self._sources.empty:
            return self.registry()
        async with self._tools_lock:
            if self._toolset is None:
                base = self.tool_registry if self.tool_registry is not None else self.default_tools()
                try:
                    self._toolset = await open_toolset(base, self._sources, self.tools or None)
                except ToolSourceError as exc:
                    raise self.tool_source_problem(exc) from None
                for server, why in self._toolset.unavailable.items():
                    logger.warning("MCP server %r is unavailable: %s", server, why)
        return self._toolset.registry

    def tool_source_problem(self, exc: ToolSourceError) -> ConfigurationError:
        """Why the run's tools cannot be opened, a ``[tools]`` rule naming no tool at its key and line."""
        if isinstance(exc, UnknownPolicyKeys) and self._project is not None:
            where = self._project.where
            return ConfigurationError(
                "; ".join(f"{where(('tools', key))}: {why}" for key, why in exc.problems)
            )
        return ConfigurationError(str(exc))

    def unavailable_tools(self) -> dict[str, str]:
        """The MCP servers that did not start for this run, with why (after ``open_tools()``)."""
        return dict(self._toolset.unavailable) if self._toolset is not None else {}

    def registry(self) -> ToolRegistry:
        """The tools this run may call (chosen once per run; every model and tool call asks).

        With tool sources beyond the protocol's own, ``await open_tools()`` opens them first.
        """
        if not self._sources.empty:
            if self._toolset is None:
                raise ConfigurationError(
                    "this run's tools are not open yet (a node must await context.open_tools())"
                )
            return self._toolset.registry
        if self._registry is None:
            base = self.tool_registry if self.tool_registry is not None else self.default_tools()
            try:  # names or globs, as with a project's sources
                self._registry = base.select(select(base.names(), self.tools or None))
            except ValueError as exc:
                raise ConfigurationError(str(exc)) from exc
        return self._registry

    def default_tools(self) -> ToolRegistry:
        """The tools a run has when it is given no registry (the protocol's own, or the workspace's)."""
        return default_registry()

    def run_trace(self, conversation: str = "", *, resumed: bool | None = None) -> RunTrace:
        """The root span and span handler of the run (begun at the first call).

        ``resumed``: the run goes on from an earlier one's checkpoint (by default: it has a ``trace_parent``).
        """
        if self._trace is None:
            self._trace = RunTrace(self.PROTOCOL, self.request_id, self.project_id, conversation,
                                   link=self.trace_parent, resumed=resumed)  # fmt: skip
        return self._trace

    async def aclose(self, outcome: str | None = None) -> None:
        """Release what the run held open; its driver calls this when the run ends or pauses.

        The run's root span ends here with its outcome: the one its events told (completed, failed),
        else ``outcome``, else ``paused``; a later run on this Context (a notebook's next turn) has its own.
        """
        trace, self._trace = self._trace, None
        if trace is not None:
            trace.close(outcome)
        await self.close_tools()

    async def close_tools(self) -> None:
        """End the run's MCP sessions (a later ``open_tools`` opens them again).

        A graph calls this where a turn ends or waits, for clients that drive it without closing
        the Context (``langgraph dev``).
        """
        toolset, self._toolset = self._toolset, None
        if toolset is not None:
            await toolset.close()

    def tool_context(self) -> ToolContext:
        """What tools get to know about this run."""
        return ToolContext(
            workspace=Path(self.workspace), project_id=self.project_id, request_id=self.request_id
        )


def _default(item: dataclasses.Field[Any]) -> Any:
    if item.default is not dataclasses.MISSING:
        return item.default
    return item.default_factory() if item.default_factory is not dataclasses.MISSING else dataclasses.MISSING


#: Where relative workspaces start. Read once at import: under ``langgraph dev`` a run may not
#: ask the operating system for the current folder (a blocking call inside the event loop).
_STARTED_IN = Path.cwd()


def _absolute(workspace: str | Path) -> Path:
    path = Path(workspace)
    return path if path.is_absolute() else _STARTED_IN / path
