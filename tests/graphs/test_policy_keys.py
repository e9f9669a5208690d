"""A ``[tools]`` rule naming a tool its MCP server lacks stops the run: its ``confirm`` would be lost."""

from pathlib import Path

import pytest

from phasegraph.graphs.registry import get_protocol
from phasegraph.nodes.errors import ConfigurationError
from tests.tool_projects import demo_server, write_project


@pytest.mark.parametrize("protocol", ["triggered_phase", "xml_contract"])
async def test_a_misspelt_mcp_tool_in_a_rule_is_refused_naming_the_servers_tools(
    tmp_path: Path, protocol: str
) -> None:
    path = write_project(tmp_path, {
        "mcp_servers": {"demo": demo_server()},
        "tools": {"demo.calculat": {"confirm": True}, "demo.*": {"timeout_seconds": 5}},
    })  # fmt: skip
    context = get_protocol(protocol).make_context(project_file=str(path), workspace=str(tmp_path))
    try:
        with pytest.raises(
            ConfigurationError,
            match=r"^phasegraph.toml:11: tools.demo.calculat: the MCP server 'demo' has no tool 'calculat'",
        ):
            await context.open_tools()
    finally:
        await context.aclose()
