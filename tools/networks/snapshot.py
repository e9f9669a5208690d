"""Publishing: a valid definition becomes an immutable snapshot with every prompt compiled.

A snapshot is what runs read. Its prompts have ``{tools}``, ``{routes}`` and ``{agent_key}``
filled in, so a run needs neither the file nor the tool registry's descriptions to reproduce
what each agent was told; ``default_agent_key`` sits at its root.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from phasegraph.tools.networks.definition import AgentDefinition, NetworkDefinition
from phasegraph.tools.networks.errors import NetworkValidationError
from phasegraph.tools.networks.validation import network_problems
from phasegraph.tools.registry import ToolRegistry


class ToolInfo(BaseModel):
    """What publishing needs to know about an available tool."""

    description: str
    params: list[str]
    required: list[str] = Field(default_factory=list)


class AgentTool(BaseModel):
    """A tool as one compiled agent may use it."""

    model_config = ConfigDict(frozen=True)

    agent_params: list[str]  # what the agent fills in
    system_params: dict[str, Any] = Field(default_factory=dict)  # merged in at execution


class CompiledAgent(BaseModel):
    """One agent of a snapshot."""

    model_config = ConfigDict(frozen=True)

    key: str
    description: str = ""
    prompt: str  # the compiled prompt
    tools: dict[str, AgentTool] = Field(default_factory=dict)
    routes: list[str] = Field(default_factory=list)
    allow_respond: bool = False


class NetworkSnapshot(BaseModel):
    """A published version of a network."""

    model_config = ConfigDict(frozen=True)

    name: str
    version: int = 0  # 0 until a store publishes it
    default_agent_key: str
    description: str = ""
    digest: str  # of the definition, so publishing the same file twice makes no new version
    published_at: float = Field(default_factory=time.time)
    agents: dict[str, CompiledAgent]

    def agent(self, key: str) -> CompiledAgent:
        """The agent ``key``; a ``KeyError`` naming the known agents otherwise."""
        if key not in self.agents:
            raise KeyError(f"network {self.name!r} has no agent {key!r}; agents: {', '.join(self.agents)}")
        return self.agents[key]


def tool_catalogue(registry: ToolRegistry) -> dict[str, ToolInfo]:
    """Each registered tool's description and parameter names (from its JSON schema), by its own name.

    MCP tools keep their ``<server>.<tool>`` names here (the schemas show them under wire names).
    """
    catalogue = {}
    for schema in registry.schemas():
        function = schema["function"]
        parameters = function.get("parameters", {})
        catalogue[registry.canonical(function["name"])] = ToolInfo(
            description=" ".join(function.get("description", "").split()),
            params=list(parameters.get("properties", {})),
            required=list(parameters.get("required", [])),
        )
    return catalogue


def compile_network(
    network: NetworkDefinition, registry: ToolRegistry, unavailable: Mapping[str, str] | None = None
) -> NetworkSnapshot:
    """Validate ``network`` against ``registry``'s tools and compile it.

    Every problem comes at once as a ``NetworkValidationError``; an equipped tool of an MCP server in
    ``unavailable`` (server -> why it did not start) is named with why it cannot be checked.
    """
    catalogue = tool_catalogue(registry)
    problems = network_problems(network, {name: info.params for name, info in catalogue.items()}, unavailable)
    if problems:
        raise NetworkValidationError(network.name, problems)
    default = next(a.key for a in network.agents if a.is_default)
    by_key = {a.key: a for a in network.agents}
    agents = {a.key: _compile_agent(a, by_key, catalogue) for a in network.agents}
    digest = hashlib.sha256(network.model_dump_json().encode()).hexdigest()[:16]
    return NetworkSnapshot(
        name=network.name,
        default_agent_key=default,
        description=network.description,
        digest=digest,
        agents=agents,
    )


def _compile_agent(
    agent: AgentDefinition, by_key: dict[str, AgentDefinition], catalogue: dict[str, ToolInfo]
) -> CompiledAgent:
    tools = {
        t.tool: AgentTool(
            agent_params=t.agent_params if t.agent_params is not None else catalogue[t.tool].params,
            system_params=t.system_params,
        )
        for t in agent.tools
    }
    tool_lines = [
        f"- {name}({', '.join(tool.agent_params)}): {catalogue[name].description}"
        for name, tool in tools.items()
    ]
    route_lines = [f"- {key}: {by_key[key].description or 'no description'}" for key in agent.routes]
    prompt = (
        agent.prompt_template.replace("{tools}", "\n".join(tool_lines) or "(no tools)")
        .replace("{routes}", "\n".join(route_lines) or "(no agents to route to)")
        .replace("{agent_key}", agent.key)
    )
    return CompiledAgent(
        key=agent.key,
        description=agent.description,
        prompt=prompt,
        tools=tools,
        routes=list(agent.routes),
        allow_respond=agent.allow_respond,
    )
