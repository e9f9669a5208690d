"""Where a run's tools come from: the protocol's built-in tools, MCP servers and Python tools by import path.

A ``ToolSources`` is plain configuration (what ``phasegraph.toml`` says); ``tools.toolset`` opens it for
one run. MCP tools are named ``<server>.<tool>``; Python tools keep their own names. Which tools a
protocol sees is a list of names or globs (``git.*``); each tool may carry a ``ToolPolicy``.
"""

from __future__ import annotations

import fnmatch
import importlib
import sys
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any, Literal

from langchain_core.tools import BaseTool, tool
from pydantic import BaseModel, ConfigDict, Field

from phasegraph.tools.signature import ArgNormalizer, normalize_path

if TYPE_CHECKING:
    from langchain_mcp_adapters.sessions import Connection

#: Key of a tool's ``metadata`` holding its ``ToolPolicy``.
POLICY_KEY = "phasegraph_policy"
#: Key of a tool's ``metadata`` naming the source it came from.
SOURCE_KEY = "phasegraph_source"
#: Longest import of a Python tool module (a project file's ``import_timeout_seconds`` says otherwise).
IMPORT_TIMEOUT_SECONDS = 30.0

#: Argument normalisers a project file may name (for canonical signatures).
NORMALIZERS: dict[str, ArgNormalizer] = {
    "path": normalize_path,
    "lower": lambda value: value.strip().lower() if isinstance(value, str) else value,
    "strip": lambda value: value.strip() if isinstance(value, str) else value,
    "int": lambda value: (
        int(value) if isinstance(value, str) and value.strip().lstrip("-").isdigit() else value
    ),
}


class ToolSourceError(ValueError):
    """A tool source cannot be used: an import path that does not load, two tools of one name, ..."""


class ToolPolicy(BaseModel):
    """How one tool (or a glob, or a source's tools) may run."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)  # "yes" is no bool, "3" no count

    confirm: bool = Field(
        default=False, description="The run pauses for a person's approval before each call."
    )
    timeout_seconds: float | None = Field(default=None, gt=0, description="Longest wait for one call.")
    max_calls_per_turn: int | None = Field(
        default=None, ge=1, description="Calls of this tool one user turn may run; later ones are refused."
    )
    normalizers: dict[str, Literal["path", "lower", "strip", "int"]] = Field(
        default_factory=dict,
        description="Per-argument normalisers of the call's canonical signature (argument -> path, lower, "
        "strip or int).",
    )

    def merged(self, other: ToolPolicy) -> ToolPolicy:
        """The policy with what ``other`` sets on top (a later, more specific rule wins)."""
        return ToolPolicy.model_validate({**self.model_dump(), **other.model_dump(exclude_unset=True)})


def policy_of(item: BaseTool) -> ToolPolicy:
    """The policy a tool carries (the default policy when none)."""
    found = (item.metadata or {}).get(POLICY_KEY)
    return found if isinstance(found, ToolPolicy) else ToolPolicy()


def source_of(item: BaseTool) -> str:
    """The source a tool came from: ``builtin``, ``mcp:<server>`` or ``python:<name>``."""
    return str((item.metadata or {}).get(SOURCE_KEY, "builtin"))


@dataclass(frozen=True)
class ToolSources:
    """The tool sources and rules of a project (no session is opened here)."""

    mcp_servers: Mapping[str, Connection] = field(default_factory=dict)
    python_tools: Mapping[str, str] = field(default_factory=dict)  # source name -> "module:attr"
    policies: Mapping[str, ToolPolicy] = field(default_factory=dict)  # tool name, glob or source -> policy
    connect_timeout_seconds: float = 20.0
    call_timeout_seconds: float = 30.0
    import_timeout_seconds: float = IMPORT_TIMEOUT_SECONDS
    folder: Path | None = None  # the project file's: Python tool modules beside it import

    @property
    def empty(self) -> bool:
        """Nothing beyond the protocol's own tools."""
        return not self.mcp_servers and not self.python_tools and not self.policies

    def policy_for(self, name: str, source: str, start: ToolPolicy | None = None) -> ToolPolicy:
        """The policy of tool ``name`` from ``source``: every matching rule, exact names last."""
        policy = start or ToolPolicy()
        server = source.partition(":")[2]
        ranked = sorted(self.policies.items(), key=lambda item: item[0] == name)
        for key, rule in ranked:
            if key in (name, server) or (_is_glob(key) and fnmatch.fnmatchcase(name, key)):
                policy = policy.merged(rule)
        return policy


def load_python_tools(
    source: str, target: str, folder: Path | None = None, timeout: float = IMPORT_TIMEOUT_SECONDS
) -> list[BaseTool]:
    """The tools ``module:attr`` names: a ``BaseTool``, a list of them, or a function made a tool.

    ``folder`` (the project file's) is where a module beside the project file is found: it is put on
    ``sys.path`` (last: installed packages keep their names). The module's import may take ``timeout``
    seconds.

    Raises:
        ToolSourceError: The path is malformed, does not import (within ``timeout``, or its code tries
            to end the process), or names something else.
    """
    if folder is not None and str(folder) not in sys.path:
        sys.path.append(str(folder))
    module_name, _, attr = target.partition(":")
    if not module_name or not attr:
        raise ToolSourceError(
            f"python tool source {source!r}: {target!r} must look like 'package.module:attr'"
        )
    found: Any = _import(source, module_name, timeout)
    for part in attr.split("."):
        if not hasattr(found, part):
            raise ToolSourceError(f"python tool source {source!r}: {module_name!r} has no {attr!r}")
        found = getattr(found, part)
    items = list(found) if isinstance(found, list | tuple) else [found]
    tools = [_as_tool(source, target, item) for item in items]
    if not tools:
        raise ToolSourceError(f"python tool source {source!r}: {target!r} is an empty list")
    return tools


def _import(source: str, module_name: str, timeout: float) -> ModuleType:
    """The module, imported on a daemon thread of its own that is given up after ``timeout`` seconds.

    An import runs the module's code, which may fail, hang, call ``sys.exit`` or raise
    ``KeyboardInterrupt``: each is a ``ToolSourceError`` here, never the command's own exit. A module
    given up on keeps importing on its thread, which holds neither the command nor its exit code.
    """
    outcome: list[ModuleType | BaseException] = []
    done = threading.Event()

    def work() -> None:
        try:
            outcome.append(importlib.import_module(module_name))
        except BaseException as exc:  # SystemExit and KeyboardInterrupt too: the module's, not ours
            outcome.append(exc)
        finally:
            done.set()

    threading.Thread(target=work, name=f"phasegraph-import-{source}", daemon=True).start()
    if not done.wait(timeout):
        raise ToolSourceError(
            f"python tool source {source!r}: importing {module_name!r} did not end within {timeout:g} s "
            "(import_timeout_seconds)"
        )
    found = outcome[0]
    if isinstance(found, ModuleType):
        return found
    raise ToolSourceError(f"python tool source {source!r}: cannot import {module_name!r} ({_failure(found)})")


def _failure(exc: BaseException) -> str:
    """What a module's import did instead of ending: its error, or its attempt to end the process."""
    if isinstance(exc, Exception):
        return str(exc) or type(exc).__name__
    code = f"({exc.code!r})" if isinstance(exc, SystemExit) else ""  # sys.exit(3) raises SystemExit(3)
    return f"its code raises {type(exc).__name__}{code} as it is imported"


def _as_tool(source: str, target: str, item: Any) -> BaseTool:
    if isinstance(item, BaseTool):
        return item
    if callable(item) and not isinstance(item, type):
        try:
            return tool(item)
        except Exception as exc:  # LangChain could not read its signature or docstring
            raise ToolSourceError(f"python tool source {source!r}: {target!r} is no tool ({exc})") from None
    raise ToolSourceError(
        f"python tool source {source!r}: {target!r} must be a LangChain BaseTool, a list of them or a "
        f"function; found {type(item).__name__}"
    )


def select(names: Iterable[str], patterns: Iterable[str] | None) -> list[str]:
    """The ``names`` matching any of ``patterns`` (names or globs), in ``names``' order; all when None.

    Raises:
        ToolSourceError: A pattern without a glob names no tool.
    """
    if patterns is None:
        return list(names)
    wanted, names = list(patterns), list(names)
    unknown = [p for p in wanted if not _is_glob(p) and p not in names]
    if unknown:
        raise ToolSourceError(f"unknown tool(s) {unknown}; available: {names}")
    return [n for n in names if any(n == p or (_is_glob(p) and fnmatch.fnmatchcase(n, p)) for p in wanted)]


class UnknownPolicyKeys(ToolSourceError):
    """``[tools]`` keys naming a tool their MCP server does not offer; ``problems``: each key and why."""

    def __init__(self, problems: list[tuple[str, str]]) -> None:
        super().__init__("; ".join(f'tools."{key}": {why}' for key, why in problems))
        self.problems = problems


def unknown_policy_keys(
    policies: Iterable[str], catalogue: Mapping[str, Iterable[str]]
) -> list[tuple[str, str]]:
    """Policy keys naming a tool an open MCP server does not offer (``git.git_comit``), each with why.

    A misspelt key would leave its tool without its rule (a ``confirm`` lost); servers that did not
    start are not judged, and globs may match nothing.
    """
    problems: list[tuple[str, str]] = []
    for key in policies:
        server, dot, tool = key.partition(".")
        if _is_glob(key) or not dot or server not in catalogue:
            continue
        offered = sorted(catalogue[server])
        if tool not in offered:
            problems.append(
                (key, f"the MCP server {server!r} has no tool {tool!r} (its tools: {', '.join(offered)})")
            )
    return problems


def _is_glob(pattern: str) -> bool:
    return any(char in pattern for char in "*?[")
