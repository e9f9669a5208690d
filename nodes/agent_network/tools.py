"""The tools a network's agents may equip: the workspace tools and the project file's MCP and Python tools.

Publishing checks a network against them (``compile_for_project``), so every MCP server of the
project is started once to list its tools (``<server>.<tool>``) and closed again; a server that does
not start is named in the refusal of a network that equips one of its tools.
"""

from __future__ import annotations

from dataclasses import dataclass

from phasegraph.nodes.agent_network.context import DEMO_SCRIPT, AgentNetworkContext
from phasegraph.nodes.models import DEMO_MODEL, make_model
from phasegraph.tools import ToolRegistry
from phasegraph.tools.networks import NetworkDefinition, NetworkSnapshot, compile_network


@dataclass(frozen=True)
class OfferedTools:
    """The tools agent_network offers in a project, and the MCP servers that did not start (with why)."""

    registry: ToolRegistry
    unavailable: dict[str, str]


async def project_tools(*, project_file: str = "", workspace: str = "") -> OfferedTools:
    """The tools agent_network runs of the project get: its MCP servers started, listed and closed.

    Args:
        project_file: The project file (empty: ``PHASEGRAPH_CONFIG``, else ``./phasegraph.toml``).
        workspace: The workspace folder (``${workspace}`` of stdio servers; empty: the project's or here).

    Raises:
        ConfigurationError: The project file is invalid, or a tool source cannot be used (a Python tool
            that does not import, two tools of one name).
    """
    # no model is asked anything here: a placeholder keeps the project's model from being built
    context = AgentNetworkContext(
        chat_model=make_model(DEMO_MODEL, demo_script=DEMO_SCRIPT),
        project_file=project_file,
        workspace=workspace,
    )
    try:
        registry = await context.open_tools()
        return OfferedTools(registry, context.unavailable_tools())
    finally:
        await context.close_tools()


async def compile_for_project(
    definition: NetworkDefinition, *, project_file: str = "", workspace: str = ""
) -> NetworkSnapshot:
    """Validate and compile ``definition`` against the tools the project gives agent_network.

    Raises:
        NetworkValidationError: The network breaks a publish-time rule (an equipped tool that does not
            exist, or whose MCP server did not start, is one).
        ConfigurationError: The project's tools cannot be listed.
    """
    offered = await project_tools(project_file=project_file, workspace=workspace)
    return compile_network(definition, offered.registry, offered.unavailable)
