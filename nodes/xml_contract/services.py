"""The services of one xml_contract run: MCP services, and the project's Python tools as service ``python``.

The model calls every tool as ``<service><tool>...</tool></service>``; a Python tool is a tool of the
``python`` service under its own name (``<python><word_count>...``). Each offered tool is also in a
``ToolRegistry`` as ``<service>.<tool>`` carrying its source (``mcp:<server>``, ``python:<source>``) and
its policy from the project's ``[tools]`` (``confirm``, ``timeout_seconds`` with the run's call timeout
when it sets none, ``max_calls_per_turn``): approval, per-turn limits and signatures read it there. The
``tools`` patterns (``git.git_log``, ``git.*``, ``python.word_count``) choose which tools the model is shown.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from langchain_core.tools import BaseTool
from pydantic import BaseModel

from phasegraph.tools import ToolRegistry
from phasegraph.tools.mcp import McpServices, ToolSpec
from phasegraph.tools.mcp.config import SERVICE_NAME
from phasegraph.tools.sources import (
    ToolPolicy,
    ToolSourceError,
    ToolSources,
    UnknownPolicyKeys,
    load_python_tools,
    policy_of,
    select,
    source_of,
    unknown_policy_keys,
)
from phasegraph.tools.toolset import mcp_tool, with_policy

logger = logging.getLogger(__name__)
#: The service the project's Python tools are offered as.
PYTHON = "python"


@dataclass
class Services:
    """What the model may call this run, as services of tools (MCP sessions open behind some)."""

    mcp: McpServices
    shown: dict[str, dict[str, ToolSpec]]  # service -> tool -> spec: the tools the model is shown
    registry: ToolRegistry  # every shown tool as ``<service>.<tool>``, with its source and policy
    call_timeout: float  # a call's longest wait when its policy sets none

    @property
    def unavailable(self) -> dict[str, str]:
        """The MCP services that did not start, or were lost, with why."""
        return dict(self.mcp.unavailable)

    def catalogue(self) -> dict[str, dict[str, ToolSpec]]:
        """The shown tools of every service still open: ``{service: {tool: ToolSpec}}``."""
        open_now = self.mcp.catalogue()
        return {s: dict(tools) for s, tools in self.shown.items() if s == PYTHON or s in open_now}

    def source(self, name: str) -> str:
        """Where tool ``name`` (``<service>.<tool>``) comes from: ``mcp:<server>`` or ``python:<source>``."""
        found = self.registry.get(name)
        return source_of(found) if found is not None else ""

    def timeout(self, name: str) -> float:
        """The longest wait for one call of ``name`` (its policy's, else the run's call timeout)."""
        found = self.registry.get(name)
        timeout = policy_of(found).timeout_seconds if found is not None else None
        return timeout or self.call_timeout


def build_services(
    mcp: McpServices, sources: ToolSources, patterns: Iterable[str] | None, call_timeout: float
) -> Services:
    """The services of a run: ``mcp``'s tools and the Python tools of ``sources``, chosen by ``patterns``.

    Raises:
        ToolSourceError: A Python tool source does not load, two Python tools share a name, an MCP
            server is named ``python`` beside Python tools, or a pattern without a glob names no tool.
        UnknownPolicyKeys: A ``[tools]`` rule names a tool its MCP server does not offer.
    """
    found: dict[str, tuple[BaseTool | None, str, ToolSpec]] = {}  # "<service>.<tool>" -> tool, source, spec
    for server, specs in mcp.catalogue().items():
        for spec in specs.values():
            found[f"{server}.{spec.name}"] = (None, f"mcp:{server}", spec)
    python = _python_tools(sources)
    if python and (PYTHON in mcp.catalogue() or PYTHON in mcp.unavailable):
        raise ToolSourceError(
            f"an MCP server is named {PYTHON!r} and the project has Python tools, offered as service "
            f"{PYTHON!r}: rename the server"
        )
    for own, (python_tool, source) in python.items():
        found[f"{PYTHON}.{own}"] = (
            python_tool,
            source,
            ToolSpec(own, python_tool.description, _schema(python_tool)),
        )
    catalogue = {server: list(specs) for server, specs in mcp.catalogue().items()}
    if problems := unknown_policy_keys(sources.policies, catalogue):  # a misspelt rule would lose its confirm
        raise UnknownPolicyKeys(problems)
    chosen = select(found, _live(patterns, mcp.unavailable))
    shown: dict[str, dict[str, ToolSpec]] = {}
    tools: list[BaseTool] = []
    for name in chosen:
        given, source, spec = found[name]
        service = name.partition(".")[0]
        shown.setdefault(service, {})[spec.name] = spec
        names = [name] if source.startswith("mcp:") else [spec.name, name]  # its own name, then python.x
        policy = policy_of_names(sources, names, source)
        if policy.timeout_seconds is None:
            policy = policy.model_copy(update={"timeout_seconds": call_timeout})
        item = given or mcp_tool(mcp, service, spec, policy.timeout_seconds or call_timeout)
        tools.append(with_policy(item, source, policy, name))
    return Services(mcp, shown, ToolRegistry(tools), call_timeout)


def policy_of_names(sources: ToolSources, names: Iterable[str], source: str) -> ToolPolicy:
    """The policy of a tool known by several ``names``: each name's rules, a later name's winning."""
    policy = ToolPolicy()
    for name in names:
        found = sources.policy_for(name, source)
        policy = policy.merged(ToolPolicy.model_validate(found.model_dump(exclude_defaults=True)))
    return policy


def _python_tools(sources: ToolSources) -> dict[str, tuple[BaseTool, str]]:
    """The project's Python tools by their own names, with their sources (``python:<source>``)."""
    tools: dict[str, tuple[BaseTool, str]] = {}
    for source, target in sources.python_tools.items():
        for item in load_python_tools(source, target, sources.folder, sources.import_timeout_seconds):
            if item.name in tools:
                first = tools[item.name][1]
                raise ToolSourceError(
                    f"two tools are named {item.name!r}: one from {first}, one from python:{source}"
                )
            if not SERVICE_NAME.fullmatch(item.name):
                logger.warning("python tool %r is not offered: its name cannot be an XML tag", item.name)
                continue
            tools[item.name] = (item, f"python:{source}")
    return tools


def _live(patterns: Iterable[str] | None, unavailable: dict[str, str]) -> list[str] | None:
    """The patterns without the names of tools of services that did not start (they are not offered)."""
    if patterns is None:
        return None
    return [p for p in patterns if p.partition(".")[0] not in unavailable or any(c in p for c in "*?[")]


def _schema(item: BaseTool) -> dict[str, Any]:
    """A Python tool's arguments as a JSON schema (what the model is shown and calls are checked against)."""
    schema = item.tool_call_schema
    if isinstance(schema, type) and issubclass(schema, BaseModel):
        return schema.model_json_schema()
    return dict(schema) if isinstance(schema, dict) else {"type": "object", "properties": {}}
