"""Tool runtime: registry, canonical signatures, runner and the built-in workspace tools.

This layer knows nothing about graphs; nodes call into it. Its names are imported at first use, so a
module of the layer that needs no LangChain (``files``, ``context``, the MCP demo server) loads none.
"""

from typing import TYPE_CHECKING

from phasegraph.tools.lazy import lazy_names

_HOMES = {
    "ToolContext": "phasegraph.tools.context",
    "ToolRegistry": "phasegraph.tools.registry",
    "ToolResult": "phasegraph.tools.runner",
    "ToolRunner": "phasegraph.tools.runner",
    "canonical_signature": "phasegraph.tools.signature",
    "default_registry": "phasegraph.tools.workspace",
}

if TYPE_CHECKING:
    from phasegraph.tools.context import ToolContext
    from phasegraph.tools.registry import ToolRegistry
    from phasegraph.tools.runner import ToolResult, ToolRunner
    from phasegraph.tools.signature import canonical_signature
    from phasegraph.tools.workspace import default_registry

__all__ = [
    "ToolContext",
    "ToolRegistry",
    "ToolResult",
    "ToolRunner",
    "canonical_signature",
    "default_registry",
]


__getattr__ = lazy_names(__name__, _HOMES)
