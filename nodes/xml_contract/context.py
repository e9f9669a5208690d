"""Run configuration of the xml_contract protocol: its services, budgets and training-data folder.

The services are the project file's ``[mcp_servers]`` when it names any (else ``mcp_config``, else the
bundled demo server), and the project's ``[python_tools]`` as one service, ``python``
(``nodes/xml_contract/services.py``).
"""

from __future__ import annotations

import asyncio
import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from pydantic.json_schema import SkipJsonSchema

from phasegraph.nodes.context import AtLeastOne, RunContext
from phasegraph.nodes.errors import ConfigurationError
from phasegraph.nodes.settings import run_settings
from phasegraph.nodes.xml_contract.services import Services, build_services
from phasegraph.tools import ToolRegistry
from phasegraph.tools.mcp import McpConfigError, McpServices, load_services
from phasegraph.tools.sources import ToolSourceError

DEMO_SCRIPT = Path(__file__).resolve().parent / "demo" / "script.json"


@dataclass(kw_only=True)
class XmlContractContext(RunContext):
    """Services, step budget and limits of the XML contract (seed 004)."""

    PROTOCOL: ClassVar[str] = "xml_contract"
    DEMO_SCRIPT: ClassVar[Path] = DEMO_SCRIPT
    CLIENT_SETTINGS: ClassVar[frozenset[str]] = frozenset({"max_steps"})

    mcp_config: str = field(
        default_factory=lambda: run_settings().mcp_config,
        metadata={
            "description": "An mcp_servers.json naming the services (stdio commands or streamable-http "
            "URLs), unless the project file names [mcp_servers]. Empty: the bundled demo MCP server "
            "over stdio, on the workspace."
        },
    )
    max_steps: AtLeastOne = field(
        default=8,
        metadata={"description": "Iterations that run tools; then one last tool-less call answers."},
    )
    call_timeout_seconds: float = field(
        default=30.0, metadata={"description": "Longest wait for one tool call (it then fails alone)."}
    )
    connect_timeout_seconds: float = field(
        default=20.0, metadata={"description": "Longest wait for a service to start and list its tools."}
    )
    max_result_chars: int = field(
        default=4000, metadata={"description": "Characters of one call's result the model reads."}
    )
    dataset_dir: str = field(
        default_factory=lambda: run_settings().dataset_dir,
        metadata={
            "description": "Folder of the training data: one JSON line {state, action, observation} per "
            "iteration, one file per run. Empty: none is written."
        },
    )
    mcp_services: SkipJsonSchema[Any] = field(
        default=None,
        metadata={"description": "Python API only: open phasegraph.tools.mcp.McpServices to use."},
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        for name in ("max_steps", "max_result_chars"):
            if getattr(self, name) < 1:
                raise ConfigurationError(f"{name} must be at least 1")
        for name in ("call_timeout_seconds", "connect_timeout_seconds"):
            if not getattr(self, name) > 0:
                raise ConfigurationError(f"{name} must be positive")
        self._take_project_timeouts()
        try:
            self._connections = dict(self._sources.mcp_servers) or load_services(
                self.mcp_config or None, Path(self.workspace)
            )
        except McpConfigError as exc:
            raise ConfigurationError(str(exc)) from exc
        self._opened: Services | None = None
        self._opening = asyncio.Lock()

    def _take_project_timeouts(self) -> None:
        """The project file's top-level call and connect timeouts, for fields the caller left alone."""
        given = self._project.file.model_fields_set if self._project is not None else set()
        fields = {f.name: f for f in dataclasses.fields(self)}
        for name in ("call_timeout_seconds", "connect_timeout_seconds"):
            if name in given and getattr(self, name) == fields[name].default:
                setattr(self, name, getattr(self._sources, name))

    async def services(self) -> Services:
        """The run's services, opened at the first call and kept until the turn ends or waits."""
        async with self._opening:
            if self._opened is None:
                given = self.mcp_services is not None
                mcp: McpServices = (
                    self.mcp_services
                    if given
                    else await McpServices.open(self._connections, timeout=self.connect_timeout_seconds)
                )
                try:
                    self._opened = build_services(
                        mcp, self._sources, self.tools or None, self.call_timeout_seconds
                    )
                except ToolSourceError as exc:
                    if not given:
                        await mcp.close()
                    raise self.tool_source_problem(exc) from None
        return self._opened

    async def open_tools(self) -> ToolRegistry:
        """Every tool the model is shown, as ``<service>.<tool>`` (the services open at the first call)."""
        return (await self.services()).registry

    def registry(self) -> ToolRegistry:
        """The services' tools as ``<service>.<tool>``, once ``open_tools()`` (or ``services()``) ran."""
        if self._opened is None:
            raise ConfigurationError("this run's services are not open yet (await context.open_tools())")
        return self._opened.registry

    def unavailable_tools(self) -> dict[str, str]:
        """The MCP services that did not start (or were lost), with why."""
        return self._opened.unavailable if self._opened is not None else {}

    async def close_tools(self) -> None:
        """Close the services this run opened (a given ``mcp_services`` stays open)."""
        await super().close_tools()
        opened, self._opened = self._opened, None
        if opened is not None and self.mcp_services is None:
            await opened.mcp.close()
