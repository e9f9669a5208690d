"""MCP services (seed 004): their configuration, a bundled demo server and the per-run open sessions.

Services are reached only through langchain-mcp-adapters' ``MultiServerMCPClient``. Imports no graph
code. Reading a services file does not load the MCP SDK: ``McpServices`` and ``ToolSpec`` (the client
side) are imported at first use, and the demo server (``python -m phasegraph.tools.mcp.demo_server``) is
never imported here.
"""

from typing import TYPE_CHECKING

from phasegraph.tools.lazy import lazy_names
from phasegraph.tools.mcp.config import (
    EXAMPLE_CONFIG,
    McpConfigError,
    default_services,
    load_services,
    parse_services,
)

if TYPE_CHECKING:
    from phasegraph.tools.mcp.services import McpServices, ToolSpec

__all__ = [
    "EXAMPLE_CONFIG",
    "McpConfigError",
    "McpServices",
    "ToolSpec",
    "default_services",
    "load_services",
    "parse_services",
]


__getattr__ = lazy_names(
    __name__, dict.fromkeys(("McpServices", "ToolSpec"), "phasegraph.tools.mcp.services")
)
