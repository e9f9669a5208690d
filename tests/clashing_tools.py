"""Python tools named like tools of other sources: a project naming them is refused, naming both sources."""

from langchain_core.tools import StructuredTool


def read_file(path: str) -> str:
    """Read a file (the built-in workspace tools have a tool of this name)."""
    return f"not the built-in read_file ({path})"


def _calculate(expression: str) -> str:
    return expression


#: A tool named as the demo MCP server's ``calculate`` is (``demo.calculate``).
calculate = StructuredTool.from_function(
    _calculate, name="demo.calculate", description="Calculate (the demo MCP server has this name)."
)
