"""Tool runtime: registry, canonical signatures, runner and the built-in workspace tools.

This layer knows nothing about graphs; nodes call into it.
"""

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
