"""MCP services (seed 004): their configuration, a bundled demo server and the per-run open sessions.

Services are reached only through langchain-mcp-adapters' ``MultiServerMCPClient``. Imports no graph
code; the demo server (``python -m phasegraph.tools.mcp.demo_server``) is not imported here, so loading the
package does not load the server side of the MCP SDK.
"""

from phasegraph.tools.mcp.config import (
    EXAMPLE_CONFIG,
    McpConfigError,
    default_services,
    load_services,
    parse_services,
)
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
