"""One run's tools: the protocol's own, its project's MCP servers and Python tools, opened once per run.

``open_toolset`` starts every MCP server of the sources at once (a server that fails to start is
reported in ``unavailable`` and the others work), wraps each MCP tool as a LangChain tool named
``<server>.<tool>``, imports the Python tools, refuses two tools of one name (naming both sources),
gives every tool its policy and keeps the tools the protocol's patterns select. ``close`` ends the
MCP sessions; the run's Context calls it when the run ends or pauses.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from langchain_core.tools import BaseTool, StructuredTool

from phasegraph.tools.errors import ToolError
from phasegraph.tools.registry import ToolRegistry
from phasegraph.tools.signature import NORMALIZERS_KEY
from phasegraph.tools.sources import (
    NORMALIZERS,
    POLICY_KEY,
    SOURCE_KEY,
    ToolPolicy,
    ToolSourceError,
    ToolSources,
    UnknownPolicyKeys,
    load_python_tools,
    policy_of,
    select,
    unknown_policy_keys,
)

if TYPE_CHECKING:  # the MCP SDK is imported when a project names an MCP server, not before
    from phasegraph.tools.mcp.services import McpServices, ToolSpec


@dataclass
class Toolset:
    """The tools one run may call, and the MCP sessions behind some of them."""

    registry: ToolRegistry
    unavailable: dict[str, str] = field(default_factory=dict)  # MCP server -> why it is not there
    services: McpServices | None = None

    async def close(self) -> None:
        """End the MCP sessions (the tools that used them then fail with a clear error)."""
        services, self.services = self.services, None
        if services is not None:
            await services.close()


async def open_toolset(
    own: ToolRegistry,
    sources: ToolSources,
    patterns: Iterable[str] | None = None,
) -> Toolset:
    """Open ``sources`` beside the protocol's ``own`` tools and keep those ``patterns`` select.

    Raises:
        ToolSourceError: A Python tool source does not load, two tools share a name, or a pattern
            without a glob names no tool.
        UnknownPolicyKeys: A ``[tools]`` rule names a tool its MCP server does not offer.
    """
    found: dict[str, tuple[BaseTool, str]] = {item.name: (item, "builtin") for item in own}
    for source, target in sources.python_tools.items():
        for item in load_python_tools(source, target, sources.folder, sources.import_timeout_seconds):
            _add(found, item, f"python:{source}")
    services: McpServices | None = None
    unavailable: dict[str, str] = {}
    if sources.mcp_servers:
        from phasegraph.tools.mcp.services import McpServices

        services = await McpServices.open(sources.mcp_servers, timeout=sources.connect_timeout_seconds)
        unavailable = dict(services.unavailable)
    try:  # a refused toolset leaves no server running
        if services is not None:
            for server, specs in services.catalogue().items():
                for spec in specs.values():
                    _add(found, _mcp_tool_of(services, server, spec, sources), f"mcp:{server}")
            catalogue = {server: list(specs) for server, specs in services.catalogue().items()}
            if problems := unknown_policy_keys(sources.policies, catalogue):  # a lost confirm, say
                raise UnknownPolicyKeys(problems)
        chosen = select(found, list(patterns) if patterns is not None else None)
        tools = [_with_policy(found[name][0], found[name][1], sources) for name in chosen]
        registry = ToolRegistry(tools)
    except (ToolSourceError, ValueError) as exc:
        if services is not None:
            await services.close()
        raise exc if isinstance(exc, ToolSourceError) else ToolSourceError(str(exc)) from None
    return Toolset(registry, unavailable, services)


def _add(found: dict[str, tuple[BaseTool, str]], item: BaseTool, source: str) -> None:
    if item.name in found:
        raise ToolSourceError(
            f"two tools are named {item.name!r}: one from {found[item.name][1]}, one from {source}"
        )
    found[item.name] = (item, source)


def _with_policy(item: BaseTool, source: str, sources: ToolSources) -> BaseTool:
    """A copy of ``item`` with the project's rules over its own policy (see ``with_policy``)."""
    return with_policy(item, source, sources.policy_for(item.name, source, start=policy_of(item)))


def with_policy(item: BaseTool, source: str, policy: ToolPolicy, name: str | None = None) -> BaseTool:
    """A copy of ``item`` (named ``name`` when given) carrying its source and ``policy``.

    The normalisers the policy names go where the call's canonical signature reads them.
    """
    metadata: dict[str, Any] = {**(item.metadata or {}), SOURCE_KEY: source, POLICY_KEY: policy}
    if policy.normalizers:
        metadata[NORMALIZERS_KEY] = {
            **metadata.get(NORMALIZERS_KEY, {}),
            **{arg: NORMALIZERS[kind] for arg, kind in policy.normalizers.items()},
        }
    return item.model_copy(update={"metadata": metadata, **({"name": name} if name else {})})


def _mcp_tool_of(services: McpServices, server: str, spec: ToolSpec, sources: ToolSources) -> BaseTool:
    """``mcp_tool`` with the timeout the project's rules give the tool."""
    name = f"{server}.{spec.name}"
    timeout = sources.policy_for(name, f"mcp:{server}").timeout_seconds or sources.call_timeout_seconds
    return mcp_tool(services, server, spec, timeout)


def mcp_tool(services: McpServices, server: str, spec: ToolSpec, timeout: float) -> BaseTool:
    """An MCP server's tool as a LangChain tool named ``<server>.<tool>``; a failed call raises ToolError."""
    name = f"{server}.{spec.name}"

    async def call(**args: Any) -> str:
        result = await services.call(server, spec.name, args, timeout=timeout)
        if result.status != "ok":
            raise ToolError(result.error or f"{name} failed")
        return result.output or ""

    schema = dict(spec.input_schema) or {"type": "object", "properties": {}}
    schema.setdefault("type", "object")
    schema.setdefault("properties", {})
    return StructuredTool(
        name=name,
        description=spec.description or f"{spec.name} of the MCP server {server!r}",
        args_schema=schema,
        coroutine=call,
    )
