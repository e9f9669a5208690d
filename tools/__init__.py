"""Tool runtime: registry, canonical signatures, runner and the built-in workspace tools.

This layer knows nothing about graphs; nodes call into it.
"""

from tools.context import ToolContext
from tools.registry import ToolRegistry
from tools.runner import ToolResult, ToolRunner
from tools.signature import canonical_signature
from tools.workspace import default_registry

__all__ = [
    "ToolContext",
    "ToolRegistry",
    "ToolResult",
    "ToolRunner",
    "canonical_signature",
    "default_registry",
]
