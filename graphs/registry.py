"""Protocol registry: id → module exposing ``build_graph``, ``compile_graph``, ``graph`` and ``Context``.

A module may add ``event_meta`` and ``check_edit`` (see ``ProtocolSpec``). Importing the registry is
cheap: a protocol's module (and LangGraph with it) is imported when the protocol is first compiled or
configured, and pydantic when client settings are checked.
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import Mapping
from dataclasses import dataclass
from types import ModuleType
from typing import TYPE_CHECKING, Any, get_type_hints

from phasegraph.nodes.errors import ConfigurationError

if TYPE_CHECKING:
    from langgraph.graph.state import CompiledStateGraph
    from langgraph.types import Checkpointer

    from phasegraph.nodes.context import RunContext


@dataclass(frozen=True)
class ProtocolSpec:
    """How to find, configure and drive one protocol."""

    id: str
    seed: str
    summary: str
    module: str
    #: Nodes after which a run may pause (its natural pause points).
    pause_after: tuple[str, ...] = ()
    #: The protocol answers a blank message itself (with a clarifying question) instead of refusing it.
    answers_blank: bool = False

    def load(self) -> ModuleType:
        """Import the protocol's module (lazily: importing the registry stays cheap)."""
        return importlib.import_module(self.module)

    def check_message(self, message: str) -> None:
        """Refuse a blank message, unless the protocol answers one itself."""
        if not message.strip() and not self.answers_blank:
            raise ConfigurationError("the message is empty: say what the agent should do")

    @property
    def context_schema(self) -> type[RunContext]:
        """The protocol's run Context class."""
        schema: type[RunContext] = self.load().Context
        return schema

    def make_context(self, **fields: Any) -> RunContext:
        """Build the protocol's Context, with a clear error for fields it does not have."""
        try:
            return self.context_schema(**fields)
        except TypeError as exc:
            raise ConfigurationError(f"bad settings for protocol {self.id!r}: {exc}") from exc

    def client_settings(self, settings: Mapping[str, Any]) -> dict[str, Any]:
        """Settings a remote client sent, checked against the fields the protocol lets clients set.

        Values are checked strictly against the fields' types (3 is not "3"); anything else is a
        ``ConfigurationError`` naming the field.
        """
        schema = self.context_schema
        allowed = schema.CLIENT_SETTINGS
        unknown = sorted(set(settings) - allowed)
        if unknown:
            settable = ", ".join(sorted(allowed)) or "none"
            raise ConfigurationError(
                f"settings.{unknown[0]} cannot be set for protocol {self.id!r} (settable: {settable})"
            )
        from pydantic import TypeAdapter, ValidationError

        hints = get_type_hints(schema, include_extras=True)  # with their bounds (``AtLeastOne``, ...)
        checked: dict[str, Any] = {}
        for key, value in settings.items():
            try:
                checked[key] = TypeAdapter(hints[key]).validate_python(value, strict=True)
            except ValidationError as exc:
                raise ConfigurationError(f"settings.{key}: {exc.errors()[0]['msg']}") from None
        return checked

    def client_settings_schema(self) -> dict[str, Any]:
        """JSON schema of the settings this protocol's clients may choose (what ``client_settings`` takes)."""
        from pydantic import TypeAdapter

        schema = self.context_schema
        hints, names = get_type_hints(schema, include_extras=True), sorted(schema.CLIENT_SETTINGS)
        properties = {name: TypeAdapter(hints[name]).json_schema() for name in names}
        rules = getattr(schema, "CLIENT_SETTINGS_RULES", {})  # what ties one setting to another
        return {"type": "object", "properties": properties, "additionalProperties": False, **rules}

    def compile(self, checkpointer: Checkpointer = None, *, pausable: bool = False) -> CompiledStateGraph:
        """A compiled graph of this protocol, with ``checkpointer`` when given.

        ``pausable`` stops the graph at each of its pause points, so a driver can decide
        between continuing and pausing there.
        """
        interrupt_after = list(self.pause_after) if pausable else None
        compiled: CompiledStateGraph = self.load().compile_graph(
            checkpointer, interrupt_after=interrupt_after
        )
        return compiled

    def node_names(self) -> tuple[str, ...]:
        """The nodes a run can stop before or after (a breakpoint): every node but LangGraph's start."""
        return _node_names(self)

    def check_edit(self, edit: Mapping[str, Any], state: Mapping[str, Any]) -> None:
        """Refuse a state edit the protocol's nodes could not follow, beyond each field's type.

        ``edit``: the edited fields, read as their types already; ``state``: the values it goes on. A
        protocol whose fields hold nothing that ties them together has no ``check_edit``.
        """
        check = getattr(self.load(), "check_edit", None)
        if check is not None:
            check(edit, state)

    def event_meta(self, values: dict[str, Any]) -> dict[str, Any]:
        """Fields the protocol puts on every event (phase metadata), read from a state snapshot."""
        meta = getattr(self.load(), "event_meta", None)
        return meta(values) if meta is not None and values else {}


PROTOCOLS: dict[str, ProtocolSpec] = {
    spec.id: spec
    for spec in (
        ProtocolSpec(
            id="triggered_phase",
            seed="000",
            summary="Action phase streams until the first complete tool call; a tool phase runs exactly it; "
            "duplicates refused; 3 cycles per turn.",
            module="phasegraph.graphs.triggered_phase",
            pause_after=("tool_phase",),
        ),
        ProtocolSpec(
            id="unified",
            seed="000 (fallback)",
            summary="LangChain's create_agent tool loop with per-turn model and tool call budgets; "
            "the fallback route and the benchmark baseline.",
            module="phasegraph.graphs.unified",
            pause_after=("tools",),
        ),
        ProtocolSpec(
            id="goal_pursuit",
            seed="001",
            summary="Context discovery, context refinement, action decision and refinement analysis per "
            "iteration; expandable tool schemas; min/max iterations, the last planned action as fallback.",
            module="phasegraph.graphs.goal_pursuit",
            pause_after=("analyze_refinement", "execute_action"),
        ),
        ProtocolSpec(
            id="agent_network",
            seed="003",
            summary="A published network of agents (validated at publish) hands control around with JSON "
            "decisions until one responds; execution logs, control epochs, OpenTelemetry spans.",
            module="phasegraph.graphs.agent_network",
            pause_after=("use_tool", "route_to_agent"),
        ),
        ProtocolSpec(
            id="xml_contract",
            seed="004",
            summary="The model writes single, parallel or sequential tool calls as XML blocks (stopped at "
            "<execute_tools />); they are validated, run on MCP services and answered with <result> tags; "
            "every iteration is logged as training data.",
            module="phasegraph.graphs.xml_contract",
            pause_after=("execute_blocks",),
        ),
        ProtocolSpec(
            id="planner",
            seed="002",
            summary="One streaming planner session calls any tool, plus agent_create_plan, which runs a plan "
            "at once, holds it for the user's review or has a reviewer check it first; every model call and "
            "error is a usage or error row.",
            module="phasegraph.graphs.planner",
            pause_after=("run_tools", "execute_plan"),
            answers_blank=True,
        ),
    )
}


@functools.cache
def _node_names(spec: ProtocolSpec) -> tuple[str, ...]:
    return tuple(node for node in spec.compile().nodes if node != "__start__")


def client_settings_schema() -> dict[str, Any]:
    """JSON schema of every setting some protocol lets clients choose (for the generic route's docs)."""
    properties: dict[str, Any] = {}
    for spec in PROTOCOLS.values():
        properties.update(spec.client_settings_schema()["properties"])
    return {"type": "object", "properties": properties, "additionalProperties": False}


def get_protocol(protocol_id: str) -> ProtocolSpec:
    """The spec of ``protocol_id``, or a ConfigurationError naming the known ones."""
    try:
        return PROTOCOLS[protocol_id]
    except KeyError:
        raise ConfigurationError(
            f"unknown protocol {protocol_id!r}; known protocols: {', '.join(PROTOCOLS)}"
        ) from None
