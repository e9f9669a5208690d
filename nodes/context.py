"""Run configuration: one dataclass per protocol over a shared base, rendered as a form by Studio."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, ClassVar
from uuid import uuid4

from langchain_core.language_models import BaseChatModel
from pydantic import BeforeValidator, Field
from pydantic.json_schema import SkipJsonSchema

from phasegraph.nodes.errors import ConfigurationError
from phasegraph.nodes.models import DEMO_MODEL, DEMO_SCRIPT, DEMO_WORKSPACE, make_model
from phasegraph.nodes.prompts import SYSTEM_PROMPT
from phasegraph.nodes.settings import run_settings
from phasegraph.tools import ToolContext, ToolRegistry, default_registry


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
        default=None, metadata={"description": "Names of the tools to enable (all registered when empty)."}
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

    def __post_init__(self) -> None:
        self.workspace = str(_absolute(self.workspace or self._default_workspace()))
        if not Path(self.workspace).is_dir():
            raise ConfigurationError(f"workspace {self.workspace!r} is not a folder")
        if self.max_tool_args_chars < 1:
            raise ConfigurationError("max_tool_args_chars must be at least 1")
        if self.chat_model is not None and not isinstance(self.chat_model, BaseChatModel):
            raise ConfigurationError("chat_model must be a LangChain BaseChatModel")
        if self.chat_model is None:
            # fail now, before the run starts, on a bad spec or script
            make_model(self.model, demo_script=self.DEMO_SCRIPT)
        if self.tool_registry is not None and not isinstance(self.tool_registry, ToolRegistry):
            raise ConfigurationError("tool_registry must be a tools.ToolRegistry")
        self._registry: ToolRegistry | None = None  # chosen at the first call of registry()

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

    def registry(self) -> ToolRegistry:
        """The tools this run may call (chosen once per run; every model and tool call asks)."""
        if self._registry is None:
            base = self.tool_registry if self.tool_registry is not None else self.default_tools()
            try:
                self._registry = base.select(self.tools or None)
            except ValueError as exc:
                raise ConfigurationError(str(exc)) from exc
        return self._registry

    def default_tools(self) -> ToolRegistry:
        """The tools a run has when it is given no registry (the protocol's own, or the workspace's)."""
        return default_registry()

    async def aclose(self) -> None:
        """Release what the run held open; its driver calls this when the run ends or pauses."""

    def tool_context(self) -> ToolContext:
        """What tools get to know about this run."""
        return ToolContext(
            workspace=Path(self.workspace), project_id=self.project_id, request_id=self.request_id
        )


#: Where relative workspaces start. Read once at import: under ``langgraph dev`` a run may not
#: ask the operating system for the current folder (a blocking call inside the event loop).
_STARTED_IN = Path.cwd()


def _absolute(workspace: str | Path) -> Path:
    path = Path(workspace)
    return path if path.is_absolute() else _STARTED_IN / path
