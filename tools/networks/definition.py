"""What a person writes: a network of agents in YAML or JSON, validated by pydantic.

Each agent has a prompt template, the tools it is equipped with by name (workspace tools, MCP tools
as ``<server>.<tool>``, Python tools; which of their parameters it may fill in itself: the rest are
system parameters merged in when the tool runs), the agents
it may hand control to, whether it may respond to the user, and whether it is where runs start.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from phasegraph.tools.config_files import read_config_text
from phasegraph.tools.networks.errors import NetworkError

#: Names and keys: what a URL, a file name and a prompt can all carry.
NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class EquippedTool(_Strict):
    """A tool an agent may call."""

    tool: str = Field(
        description="Name of a tool the project gives agent_network: a workspace tool (read_file), an MCP "
        "server's tool as <server>.<tool> (git.git_log) or a Python tool by its own name."
    )
    agent_params: list[str] | None = Field(
        default=None,
        description="Parameters the agent may fill in; the others are system parameters. "
        "Omitted: every parameter of the tool.",
    )
    system_params: dict[str, Any] = Field(
        default_factory=dict,
        description="Values of system parameters merged into every call "
        "(a run's system_params override them).",
    )


class AgentDefinition(_Strict):
    """One agent of a network."""

    key: str = Field(pattern=NAME_PATTERN, description="Unique key of the agent within its network.")
    description: str = Field(default="", description="What the agent is for (shown to agents routing to it).")
    prompt_template: str = Field(
        min_length=1,
        description="The agent's prompt; {tools}, {routes} and {agent_key} are filled in at publish, "
        "{tool_history} (optional) marks where each step's context goes.",
    )
    tools: list[EquippedTool] = Field(default_factory=list)
    routes: list[str] = Field(default_factory=list, description="Agents this agent may hand control to.")
    allow_respond: bool = Field(default=False, description="May end the run with the answer to the user.")
    is_default: bool = Field(default=False, description="Runs start here unless they name another agent.")


class NetworkDefinition(_Strict):
    """A network of agents, as written in its file."""

    name: str = Field(pattern=NAME_PATTERN)
    description: str = ""
    agents: list[AgentDefinition] = Field(min_length=1)


def parse_definition(text: str, source: str = "<text>") -> NetworkDefinition:
    """Parse YAML (JSON is YAML too) into a definition; a problem is a ``NetworkError`` naming ``source``."""
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise NetworkError(f"{source} is not valid YAML or JSON: {exc}") from None
    return definition_from(data, source)


def definition_from(data: Any, source: str = "<data>") -> NetworkDefinition:
    """Validate already-parsed data (a dict from JSON or YAML) as a network definition."""
    if not isinstance(data, dict):
        raise NetworkError(f"{source} must hold one network (a mapping with name and agents)")
    try:
        return NetworkDefinition.model_validate(data)
    except ValidationError as exc:
        problems = [
            f"{'.'.join(str(p) for p in error['loc']) or 'network'}: {error['msg']}" for error in exc.errors()
        ]
        raise NetworkError(f"{source} is not a valid network: " + "; ".join(problems)) from None


def load_definition(path: str | Path) -> NetworkDefinition:
    """Read a network file (``.yaml``, ``.yml`` or ``.json``)."""
    file = Path(path)
    if file.suffix.lower() not in (".yaml", ".yml", ".json"):
        raise NetworkError(f"{file.name}: a network file ends in .yaml, .yml or .json")
    try:
        text = read_config_text(file)
    except OSError as exc:
        raise NetworkError(f"{file.name} cannot be read: {exc.strerror or exc}") from None
    if file.suffix.lower() == ".json":
        try:
            return definition_from(json.loads(text), file.name)
        except json.JSONDecodeError as exc:
            raise NetworkError(f"{file.name} is not valid JSON: {exc}") from None
    return parse_definition(text, file.name)
