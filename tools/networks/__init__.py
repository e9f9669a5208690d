"""Agent networks (seed 003): definitions, publish-time validation, compiled snapshots and their store."""

from pathlib import Path

from phasegraph.tools.networks.definition import (
    AgentDefinition,
    EquippedTool,
    NetworkDefinition,
    definition_from,
    load_definition,
    parse_definition,
)
from phasegraph.tools.networks.errors import NetworkError, NetworkNotFound, NetworkValidationError
from phasegraph.tools.networks.snapshot import CompiledAgent, NetworkSnapshot, compile_network, tool_catalogue
from phasegraph.tools.networks.store import NetworkStore, NetworkSummary, open_network_store
from phasegraph.tools.networks.validation import network_problems, unknown_tools

#: Bundled network files: a working example (research.yaml) and a deliberately broken one.
EXAMPLES = Path(__file__).resolve().parent / "examples"
EXAMPLE_NETWORK = EXAMPLES / "research.yaml"

__all__ = [
    "EXAMPLES",
    "EXAMPLE_NETWORK",
    "AgentDefinition",
    "CompiledAgent",
    "EquippedTool",
    "NetworkDefinition",
    "NetworkError",
    "NetworkNotFound",
    "NetworkSnapshot",
    "NetworkStore",
    "NetworkSummary",
    "NetworkValidationError",
    "compile_network",
    "definition_from",
    "load_definition",
    "network_problems",
    "open_network_store",
    "parse_definition",
    "tool_catalogue",
    "unknown_tools",
]
