"""Published networks, one immutable row per version, in the server's database.

sqlite and Postgres keep them in the ``phasegraph_networks`` table (the server's migrations
create it); ``memory`` keeps them in this process only, for tests and notebooks.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Protocol

import sqlalchemy as sa
from sqlalchemy.exc import IntegrityError, OperationalError, ProgrammingError
from sqlalchemy.ext.asyncio import AsyncEngine

from phasegraph.tools.database import open_engine
from phasegraph.tools.networks.errors import NetworkError, NetworkNotFound
from phasegraph.tools.networks.snapshot import NetworkSnapshot

networks_table = sa.Table(
    "phasegraph_networks",
    sa.MetaData(),
    sa.Column("project_id", sa.String(200), primary_key=True),
    sa.Column("name", sa.String(100), primary_key=True),
    sa.Column("version", sa.Integer, primary_key=True),
    sa.Column("digest", sa.String(64), nullable=False),
    sa.Column("snapshot", sa.Text, nullable=False),
    sa.Column("published_at", sa.Float, nullable=False),
)


@dataclass(frozen=True)
class NetworkSummary:
    """A network's latest version, as ``phasegraph network list`` shows it."""

    project_id: str
    name: str
    version: int
    agent_keys: list[str]
    default_agent_key: str
    published_at: float

    @classmethod
    def of(cls, project_id: str, snapshot: NetworkSnapshot) -> NetworkSummary:
        """The summary of one published snapshot."""
        return cls(
            project_id, snapshot.name, snapshot.version, list(snapshot.agents), snapshot.default_agent_key,
            snapshot.published_at,
        )  # fmt: skip

    @property
    def agents(self) -> int:
        """How many agents the network has."""
        return len(self.agent_keys)


class NetworkStore(Protocol):
    """Where published snapshots live."""

    async def publish(self, project_id: str, snapshot: NetworkSnapshot) -> NetworkSnapshot:
        """Store the next version (or return the latest, when its definition is the same)."""

    async def get(self, project_id: str, name: str, version: int | None = None) -> NetworkSnapshot:
        """A version (the latest when ``None``), or ``NetworkNotFound``."""

    async def list(self, projects: frozenset[str] | None = None) -> list[NetworkSummary]:
        """The latest version of each network of ``projects`` (all when ``None``)."""

    async def close(self) -> None:
        """Release connections."""


def _missing(project_id: str, name: str, version: int | None, latest: int | None) -> NetworkNotFound:
    if latest is None:
        return NetworkNotFound(
            f"no network named {name!r} is published in project {project_id!r}; "
            "publish it first (phasegraph network publish FILE)"
        )
    return NetworkNotFound(f"network {name!r} has no version {version}; its latest is {latest}")


class SqlNetworkStore:
    """Snapshots in the ``phasegraph_networks`` table."""

    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine

    async def publish(self, project_id: str, snapshot: NetworkSnapshot) -> NetworkSnapshot:
        """Store the next version (or return the latest, when its definition is the same)."""
        table = networks_table
        for _ in range(5):  # two publishers may take the same next version: the loser tries the next
            try:
                async with self.engine.begin() as conn:
                    row = (
                        await conn.execute(
                            sa.select(table.c.version, table.c.digest, table.c.snapshot)
                            .where(table.c.project_id == project_id, table.c.name == snapshot.name)
                            .order_by(table.c.version.desc())
                            .limit(1)
                        )
                    ).first()
                    if row is not None and row.digest == snapshot.digest:
                        return NetworkSnapshot.model_validate_json(row.snapshot)
                    stored = snapshot.model_copy(
                        update={"version": (row.version if row else 0) + 1, "published_at": time.time()}
                    )
                    await conn.execute(
                        table.insert().values(
                            project_id=project_id,
                            name=stored.name,
                            version=stored.version,
                            digest=stored.digest,
                            snapshot=stored.model_dump_json(),
                            published_at=stored.published_at,
                        )
                    )
                    return stored
            except IntegrityError:
                continue
        raise NetworkError(f"network {snapshot.name!r} could not be published: too many publishers at once")

    async def get(self, project_id: str, name: str, version: int | None = None) -> NetworkSnapshot:
        """A version (the latest when ``None``), or ``NetworkNotFound``."""
        table = networks_table
        query = sa.select(table.c.version, table.c.snapshot).where(
            table.c.project_id == project_id, table.c.name == name
        )
        query = query.where(table.c.version == version) if version else query.order_by(table.c.version.desc())
        try:
            async with self.engine.connect() as conn:
                row = (await conn.execute(query.limit(1))).first()
                if row is None:
                    latest = (
                        await conn.execute(
                            sa.select(sa.func.max(table.c.version)).where(
                                table.c.project_id == project_id, table.c.name == name
                            )
                        )
                    ).scalar()
                    raise _missing(project_id, name, version, latest)
        except (OperationalError, ProgrammingError):  # no table: this database never had a network published
            raise _missing(project_id, name, version, None) from None
        return NetworkSnapshot.model_validate_json(row.snapshot)

    async def list(self, projects: frozenset[str] | None = None) -> list[NetworkSummary]:
        """The latest version of each network of ``projects`` (all when ``None``)."""
        table = networks_table
        latest = (
            sa.select(table.c.project_id, table.c.name, sa.func.max(table.c.version).label("version"))
            .group_by(table.c.project_id, table.c.name)
            .subquery()
        )
        query = (
            sa.select(table.c.project_id, table.c.snapshot)
            .join(
                latest,
                sa.and_(
                    table.c.project_id == latest.c.project_id,
                    table.c.name == latest.c.name,
                    table.c.version == latest.c.version,
                ),
            )
            .order_by(table.c.project_id, table.c.name)
        )
        if projects is not None:
            query = query.where(table.c.project_id.in_(sorted(projects)))
        try:
            async with self.engine.connect() as conn:
                rows = (await conn.execute(query)).all()
        except (OperationalError, ProgrammingError):
            return []
        return [
            NetworkSummary.of(r.project_id, NetworkSnapshot.model_validate_json(r.snapshot)) for r in rows
        ]

    async def close(self) -> None:
        """Release connections."""
        await self.engine.dispose()


class MemoryNetworkStore:
    """Snapshots in this process (the ``memory`` backend): gone when the process ends."""

    def __init__(self) -> None:
        self._versions: dict[tuple[str, str], list[NetworkSnapshot]] = {}

    async def publish(self, project_id: str, snapshot: NetworkSnapshot) -> NetworkSnapshot:
        """Store the next version (or return the latest, when its definition is the same)."""
        versions = self._versions.setdefault((project_id, snapshot.name), [])
        if versions and versions[-1].digest == snapshot.digest:
            return versions[-1]
        stored = snapshot.model_copy(update={"version": len(versions) + 1, "published_at": time.time()})
        versions.append(stored)
        return stored

    async def get(self, project_id: str, name: str, version: int | None = None) -> NetworkSnapshot:
        """A version (the latest when ``None``), or ``NetworkNotFound``."""
        versions = self._versions.get((project_id, name), [])
        if versions and not version:
            return versions[-1]
        if versions and 0 < version <= len(versions):  # type: ignore[operator]
            return versions[version - 1]  # type: ignore[operator]
        raise _missing(project_id, name, version, len(versions) or None)

    async def list(self, projects: frozenset[str] | None = None) -> list[NetworkSummary]:
        """The latest version of each network of ``projects`` (all when ``None``)."""
        return [
            NetworkSummary.of(project, versions[-1])
            for (project, _), versions in sorted(self._versions.items())
            if projects is None or project in projects
        ]

    async def close(self) -> None:
        """Release connections."""
        return None


#: The ``memory`` backend's one store per process (the server and its runs share it).
MEMORY_STORE = MemoryNetworkStore()


def open_network_store(database: str) -> NetworkStore:
    """The network store of a database spec (``memory``, ``sqlite:PATH``, ``postgresql://...``)."""
    if database == "memory":
        return MEMORY_STORE
    return SqlNetworkStore(open_engine(database))
