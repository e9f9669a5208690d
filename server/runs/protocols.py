"""A protocol as this server runs it, resolved once where a run starts and carried down from there.

``Protocols.get`` looks a protocol id up once and keeps its compiled graph (on the shared
checkpointer, stopping at the protocol's pause points). Everything a run needs of its protocol
afterwards, its graph, its Context, its phase fields and its stops, is asked of that ``Served``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph.state import CompiledStateGraph

from phasegraph.graphs.registry import PROTOCOLS, ProtocolSpec, get_protocol
from phasegraph.nodes.context import RunContext
from phasegraph.nodes.errors import PhasegraphError
from phasegraph.nodes.project import project_path, project_problems
from phasegraph.nodes.settings import ServerSettings
from phasegraph.server.runs.stops import RunStops
from phasegraph.server.storage.checkpoints import thread_config
from phasegraph.server.storage.records import RequestRecord

Graph = CompiledStateGraph[Any, Any, Any, Any]


@dataclass(frozen=True)
class Served:
    """One protocol on this server: its spec, its pausable graph, and the server's run settings."""

    spec: ProtocolSpec
    graph: Graph
    settings: ServerSettings

    @property
    def id(self) -> str:
        """The protocol id."""
        return self.spec.id

    def context(self, record: RequestRecord) -> RunContext:
        """A request's Context, rebuilt from its record (works on any replica)."""
        return self.spec.make_context(
            **record.settings,
            request_id=record.request_id,
            workspace=self.settings.workspace,
            database=self.settings.checkpointer,
        )

    async def values(self, thread_key: str) -> dict[str, Any]:
        """The thread's current state values (empty for a thread with no checkpoint)."""
        return (await self.graph.aget_state(thread_config(thread_key))).values or {}

    def event_meta(self, values: dict[str, Any]) -> dict[str, Any]:
        """The phase fields the protocol puts on every event, read from state values."""
        return self.spec.event_meta(values)

    def stops(self, options: dict[str, Any]) -> RunStops:
        """The stops a request's options ask for, on top of the protocol's pause points."""
        return RunStops.of(options, self.spec.pause_after)


class Protocols:
    """Every protocol this server runs, each compiled once on the shared checkpointer."""

    def __init__(self, checkpointer: BaseCheckpointSaver[str], settings: ServerSettings) -> None:
        self.checkpointer, self.settings = checkpointer, settings
        self._served: dict[str, Served] = {}

    def get(self, protocol_id: str) -> Served:
        """The protocol of that id (a ConfigurationError naming the known ones when there is none)."""
        served = self._served.get(protocol_id)
        if served is None:
            spec = get_protocol(protocol_id)
            graph = spec.compile(self.checkpointer, pausable=True)
            served = self._served[protocol_id] = Served(spec, graph, self.settings)
        return served


def project_refusals(settings: ServerSettings) -> list[str]:
    """Every problem of the project file in force (PHASEGRAPH_CONFIG or ./phasegraph.toml), for the start.

    The file's own problems (TOML, unknown keys, wrong types, each with its key and line), then what
    a run of each protocol would refuse (a setting the protocol does not have, a model spec that
    cannot be made, an unreadable ``mcp_servers`` file): a server refuses to start with them rather
    than fail its first run. Empty: no project file, or a good one.
    """
    path = project_path()
    if path is None:
        return []
    problems = project_problems(path)
    if problems:
        return problems
    refusals: list[str] = []
    for spec in PROTOCOLS.values():
        try:
            spec.make_context(
                model=settings.default_model(spec.id), workspace=settings.workspace,
                database=settings.checkpointer,
            )  # fmt: skip
        except PhasegraphError as exc:  # a bad setting, an unusable model spec or script
            if str(exc) not in refusals:
                refusals.append(str(exc))
    return refusals
