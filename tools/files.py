"""Reading the workspace: list a folder, read a text file, search text, never outside the root.

Plain functions of a ``ToolContext``: ``workspace.py`` makes them the LangChain tools the protocols
call, and the bundled demo MCP server serves them without loading LangChain.
"""

from __future__ import annotations

from pathlib import Path

from phasegraph.tools.context import ToolContext
from phasegraph.tools.errors import ToolError, WorkspaceEscapeError

MAX_READ_CHARS = 20_000
MAX_LISTED = 200
MAX_MATCHES = 50


def resolve_in_workspace(context: ToolContext, path: str, root: Path | None = None) -> Path:
    """Resolve ``path`` under the workspace root, refusing anything that escapes it.

    Symlinks are resolved first, so a link pointing outside the root is refused too. ``root``
    is the resolved workspace root when the caller already has it.
    """
    root = root or context.workspace.resolve()
    target = (root / path.strip()).resolve()
    if target != root and root not in target.parents:
        raise WorkspaceEscapeError(f"path {path!r} is outside the workspace")
    return target


def _relative(root: Path, target: Path) -> str:
    return target.relative_to(root).as_posix() or "."


def list_folder(context: ToolContext, path: str = ".") -> str:
    """The files and folders directly inside a workspace folder (folders end with '/')."""
    root = context.workspace.resolve()  # once per call: resolving walks every folder of the path
    folder = resolve_in_workspace(context, path, root)
    if not folder.is_dir():
        raise ToolError(f"{path!r} is not a folder in the workspace")
    kinds = {entry: entry.is_dir() for entry in folder.iterdir()}
    entries = sorted(kinds, key=lambda p: (not kinds[p], p.name))
    lines = [_relative(root, e) + ("/" if kinds[e] else "") for e in entries[:MAX_LISTED]]
    if len(entries) > MAX_LISTED:
        lines.append(f"... {len(entries) - MAX_LISTED} more")
    return "\n".join(lines) if lines else f"{path!r} is empty"


def read_text(context: ToolContext, path: str) -> str:
    """A UTF-8 text file of the workspace (cut at ``MAX_READ_CHARS``)."""
    target = resolve_in_workspace(context, path)
    if not target.is_file():
        raise ToolError(f"{path!r} is not a file in the workspace")
    text = target.read_text(encoding="utf-8", errors="replace")
    if len(text) > MAX_READ_CHARS:
        return text[:MAX_READ_CHARS] + f"\n... truncated ({len(text)} characters in all)"
    return text


def search_text(context: ToolContext, query: str, path: str = ".") -> str:
    """Lines containing ``query`` (case-insensitive) in the text files under a workspace folder."""
    if not query.strip():
        raise ToolError("query must not be empty")
    root = context.workspace.resolve()
    folder = resolve_in_workspace(context, path, root)
    if not folder.is_dir():
        raise ToolError(f"{path!r} is not a folder in the workspace")
    needle = query.strip().lower()
    matches: list[str] = []
    for file in sorted(p for p in folder.rglob("*") if p.is_file()):
        if root not in file.resolve().parents:
            continue  # a symlink leading out of the workspace is never read
        lines = file.read_text(encoding="utf-8", errors="replace").splitlines()
        for number, line in enumerate(lines, start=1):
            if needle in line.lower():
                matches.append(f"{_relative(root, file)}:{number}: {line.strip()}")
                if len(matches) >= MAX_MATCHES:
                    return "\n".join([*matches, f"... stopped after {MAX_MATCHES} matches"])
    return "\n".join(matches) if matches else f"no matches for {query!r}"
