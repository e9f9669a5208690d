"""Built-in workspace tools, confined to the run's workspace root (their work is ``files``').

No ``from __future__ import annotations`` here: LangChain reads a tool function's type hints at
every call, and string annotations would be evaluated again each time.
"""

from collections.abc import Callable
from typing import Annotated

from langchain_core.tools import BaseTool, InjectedToolArg, tool

from phasegraph.tools import files
from phasegraph.tools.context import ToolContext
from phasegraph.tools.registry import ToolRegistry
from phasegraph.tools.signature import NORMALIZERS_KEY, normalize_path


def _path_tool(func: Callable[..., str]) -> BaseTool:
    """Make a LangChain tool whose ``path`` argument is normalised for signatures."""
    made = tool(func)
    made.metadata = {NORMALIZERS_KEY: {"path": normalize_path}}
    return made


@_path_tool
def list_files(path: str = ".", *, context: Annotated[ToolContext, InjectedToolArg]) -> str:
    """List the files and folders directly inside a workspace folder (folders end with '/')."""
    return files.list_folder(context, path)


@_path_tool
def read_file(path: str, *, context: Annotated[ToolContext, InjectedToolArg]) -> str:
    """Read a UTF-8 text file from the workspace."""
    return files.read_text(context, path)


@_path_tool
def search_files(
    query: str,
    path: str = ".",
    *,
    context: Annotated[ToolContext, InjectedToolArg],
) -> str:
    """Find lines containing ``query`` (case-insensitive) in the text files under a workspace folder."""
    return files.search_text(context, query, path)


WORKSPACE_TOOLS = [list_files, read_file, search_files]


def default_registry() -> ToolRegistry:
    """A fresh registry holding the built-in workspace tools."""
    return ToolRegistry(WORKSPACE_TOOLS)
