"""Run configuration of the xml_contract protocol: its services, budgets and training-data folder."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from pydantic.json_schema import SkipJsonSchema

from phasegraph.nodes.context import AtLeastOne, RunContext
from phasegraph.nodes.errors import ConfigurationError
from phasegraph.nodes.settings import run_settings
from phasegraph.tools.mcp import McpConfigError, McpServices, load_services

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
            "URLs). Empty: the bundled demo MCP server over stdio, on the workspace."
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
        try:
            self._connections = load_services(self.mcp_config or None, Path(self.workspace))
        except McpConfigError as exc:
            raise ConfigurationError(str(exc)) from exc
        self._opened: McpServices | None = None
        self._opening = asyncio.Lock()

    async def services(self) -> McpServices:
        """The run's services, opened at the first call and kept until the run ends or pauses."""
        if self.mcp_services is not None:
            services: McpServices = self.mcp_services
            return services
        async with self._opening:
            if self._opened is None:
                self._opened = await McpServices.open(self._connections, timeout=self.connect_timeout_seconds)
        return self._opened

    async def aclose(self) -> None:
        """Close the services this run opened (a given ``mcp_services`` stays open)."""
        await super().aclose()
        opened, self._opened = self._opened, None
        if opened is not None:
            await opened.close()
