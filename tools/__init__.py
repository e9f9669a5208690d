"""Tool runtime: registry, canonical signatures, runner and the built-in workspace tools.

This layer knows nothing about graphs; nodes call into it.
"""

from tools.registry import ToolRegistry, default_registry
from tools.runner import ToolContext, ToolResult, ToolRunner
from tools.signature import canonical_signature

__all__ = [
    "ToolContext",
    "ToolRegistry",
    "ToolResult",
    "ToolRunner",
    "canonical_signature",
    "default_registry",
]
