"""Project files for tests: a ``phasegraph.toml`` naming MCP servers and Python tools, and a git repository.

The servers are real: the bundled demo MCP server and the reference ``mcp-server-git`` from PyPI,
both over stdio, started by the run like any user's.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any


def git_repository(folder: Path) -> Path:
    """A git repository with two commits (``first commit``, ``second commit``) in ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    env = ["-c", "user.email=tests@example.org", "-c", "user.name=tests"]
    subprocess.run(["git", "init", "-q", str(folder)], check=True)
    for n, message in enumerate(("first commit", "second commit")):
        (folder / f"file{n}.txt").write_text(f"line {n}\n", encoding="utf-8")
        subprocess.run(["git", "-C", str(folder), "add", "."], check=True)
        subprocess.run(["git", "-C", str(folder), *env, "commit", "-qm", message], check=True)
    return folder


def git_server(repository: Path) -> dict[str, Any]:
    """The ``[mcp_servers.git]`` entry of the reference git server on ``repository``."""
    return {
        "transport": "stdio",
        "command": sys.executable,
        "args": ["-m", "mcp_server_git", "--repository", str(repository)],
    }


def demo_server() -> dict[str, Any]:
    """The ``[mcp_servers.demo]`` entry of the bundled demo server on the run's workspace."""
    return {
        "transport": "stdio",
        "command": "${python}",
        "args": ["-m", "phasegraph.tools.mcp.demo_server", "--root", "${workspace}"],
    }


def write_script(folder: Path, turns: list[dict[str, Any]], name: str = "script.json", **more: Any) -> Path:
    """A scripted model's script (``turns``, and ``follow_ups`` or others in ``more``)."""
    path = folder / name
    path.write_text(json.dumps({"turns": turns, **more}, indent=1), encoding="utf-8")
    return path


def write_project(folder: Path, data: dict[str, Any], name: str = "phasegraph.toml") -> Path:
    """``data`` written as a TOML project file (tables for mappings of mappings, inline values else)."""
    path = folder / name
    path.write_text(toml(data), encoding="utf-8")
    return path


def toml(data: dict[str, Any], prefix: tuple[str, ...] = ()) -> str:
    """A small TOML writer for test data: scalars, lists and mappings."""
    lines: list[str] = []
    tables: list[tuple[str, dict[str, Any]]] = []
    for key, value in data.items():
        nested = any(isinstance(v, dict) for v in value.values()) if isinstance(value, dict) else False
        if isinstance(value, dict) and (not value or nested or prefix):
            tables.append((key, value))
        else:
            lines.append(f"{_key(key)} = {_value(value)}")
    text = "\n".join(lines) + ("\n" if lines else "")
    for key, value in tables:
        path = (*prefix, key)
        scalars = {k: v for k, v in value.items() if not isinstance(v, dict)}
        nested = {k: v for k, v in value.items() if isinstance(v, dict)}
        text += f"\n[{'.'.join(_key(p) for p in path)}]\n" + toml(scalars, ())
        text += toml(nested, path)
    return text


def _key(key: str) -> str:
    return key if key.replace("_", "").replace("-", "").isalnum() else json.dumps(key)


def _value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{_key(k)} = {_value(v)}" for k, v in value.items()) + " }"
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_value(v) for v in value) + "]"
    return json.dumps(value)
