"""Run configuration of the agent-network protocol: which network, its budgets, its telemetry."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from pydantic.json_schema import SkipJsonSchema

from phasegraph.nodes.context import AtLeastOne, AtLeastZero, RunContext
from phasegraph.nodes.errors import ConfigurationError
from phasegraph.nodes.structured import StructuredMethod

DEMO_SCRIPT = Path(__file__).resolve().parent / "demo" / "script.json"


@dataclass(kw_only=True)
class AgentNetworkContext(RunContext):
    """Which network runs, where it starts, and the budgets that end it (seed 003)."""

    PROTOCOL: ClassVar[str] = "agent_network"
    DEMO_SCRIPT: ClassVar[Path] = DEMO_SCRIPT
    #: Fields a remote client may set in a request's settings.
    CLIENT_SETTINGS: ClassVar[frozenset[str]] = frozenset(
        {"network", "network_version", "agent_key", "max_steps", "max_tool_errors", "system_params"}
    )
    #: What the settings' schema adds to their types: a version is a version of a named network.
    CLIENT_SETTINGS_RULES: ClassVar[dict[str, Any]] = {
        "if": {"properties": {"network_version": {"minimum": 1}}, "required": ["network_version"]},
        "then": {"properties": {"network": {"minLength": 1}}, "required": ["network"]},
    }

    network: str = field(
        default="",
        metadata={
            "description": "Name of a published network (phasegraph network publish FILE). Empty: the "
            "network in network_file, else the bundled example (triage, researcher, writer)."
        },
    )
    network_version: AtLeastZero = field(
        default=0, metadata={"description": "Published version to run; 0 runs the latest."}
    )
    network_file: str = field(
        default="",
        metadata={
            "description": "A network file (YAML or JSON) to validate, compile and run without publishing "
            "(used when network is empty)."
        },
    )
    agent_key: str = field(
        default="", metadata={"description": "Agent that starts the run. Empty: the network's default agent."}
    )
    max_steps: AtLeastOne = field(
        default=10, metadata={"description": "Agent decisions per turn; the run ends with an error beyond."}
    )
    max_tool_errors: AtLeastOne = field(
        default=3,
        metadata={
            "description": "Failed tool calls and refused decisions per turn; the run ends with an error "
            "when they reach it."
        },
    )
    system_params: dict[str, Any] = field(
        default_factory=dict,
        metadata={
            "description": "System parameters merged into tool calls (for parameters the agent may not "
            'provide), e.g. {"path": "docs"}.'
        },
    )
    summary_chars: int = field(
        default=2000,
        metadata={"description": "Characters of the execution-log summary each prompt carries."},
    )
    structured_output: StructuredMethod = field(
        default="auto",
        metadata={
            "description": "How decisions are asked for: tool_calling, json_mode (for servers without tool "
            "calling) or auto (tool calling, falling back to JSON)."
        },
    )
    network_store: SkipJsonSchema[Any] = field(
        default=None,
        metadata={"description": "Python API only: a phasegraph.tools.networks store to read networks from."},
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        for name in ("max_steps", "max_tool_errors", "summary_chars"):
            if getattr(self, name) < 1:
                raise ConfigurationError(f"{name} must be at least 1")
        if self.network_version < 0:
            raise ConfigurationError("network_version must not be negative (0 runs the latest)")
        if self.network_store is not None and not hasattr(self.network_store, "get"):
            raise ConfigurationError("network_store must be a phasegraph.tools.networks store")
        if self.network_version and not self.network:
            raise ConfigurationError("network_version needs a network name")
        if not isinstance(self.system_params, dict):
            raise ConfigurationError("system_params must be a JSON object of parameter values")
