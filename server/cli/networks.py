"""``phasegraph network validate|publish|list``: agent networks, checked and published from files."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Annotated, NoReturn

import typer
from rich.console import Console
from sqlalchemy.exc import SQLAlchemyError

from phasegraph.nodes.agent_network.tools import compile_for_project
from phasegraph.nodes.errors import ConfigurationError
from phasegraph.nodes.settings import ServerSettings
from phasegraph.server.cli.main import Command, Group
from phasegraph.server.storage.store import RequestStore
from phasegraph.tools.database import public_database
from phasegraph.tools.networks import (
    NetworkError,
    NetworkSnapshot,
    NetworkSummary,
    NetworkValidationError,
    load_definition,
    open_network_store,
)

network_app = typer.Typer(
    cls=Group, help="Validate, publish and list agent networks (protocol agent_network)."
)

Database = Annotated[
    str | None,
    typer.Option(help="Database (sqlite:PATH or postgresql://...). Default: PHASEGRAPH_CHECKPOINTER."),
]
Project = Annotated[str, typer.Option(help="Project the network belongs to.")]
Config = Annotated[
    str,
    typer.Option(
        "--config",
        help="Project file (phasegraph.toml) whose MCP servers and Python tools agents may equip. "
        "Default: PHASEGRAPH_CONFIG, else ./phasegraph.toml.",
    ),
]


@network_app.command("validate", cls=Command)
def validate_command(
    file: Annotated[str, typer.Argument(help="Network file (.yaml, .yml or .json).")],
    config: Config = "",
) -> None:
    """Check a network file against every publish-time rule; exit 1 listing each problem."""
    snapshot = _compiled(file, config)
    agents = ", ".join(snapshot.agents)
    Console(soft_wrap=True).print(
        f"[green]{file}: network {snapshot.name!r} is valid[/] ({len(snapshot.agents)} agents: {agents}; "
        f"runs start at {snapshot.default_agent_key})",
        highlight=False,
    )


@network_app.command("publish", cls=Command)
def publish_command(
    file: Annotated[str, typer.Argument(help="Network file (.yaml, .yml or .json).")],
    project: Project = "default",
    database: Database = None,
    config: Config = "",
) -> None:
    """Validate, compile and store a network as its next version (the same file twice: no new version)."""
    snapshot = _compiled(file, config)
    where = _database(database)
    try:
        stored = asyncio.run(_publish(where, project, snapshot))
    except (SQLAlchemyError, OSError) as exc:
        _fail(f"the network could not be stored in {public_database(where)}: {type(exc).__name__}")
    new = "published" if stored.published_at >= snapshot.published_at else "unchanged: already published"
    Console(soft_wrap=True).print(
        f"[green]{new}[/] {stored.name} version {stored.version} in project {project!r}", highlight=False
    )


@network_app.command("list", cls=Command)
def list_command(project: Annotated[str | None, typer.Option(help="Only this project.")] = None,
                 database: Database = None) -> None:  # fmt: skip
    """List the published networks, each with its latest version."""
    where = _database(database)
    try:
        summaries = asyncio.run(_list(where, project))
    except (SQLAlchemyError, OSError) as exc:
        _fail(f"the networks could not be read from {public_database(where)}: {type(exc).__name__}")
    console = Console(soft_wrap=True)
    if not summaries:
        console.print("no networks are published yet (phasegraph network publish FILE)")
    for s in summaries:
        when = datetime.fromtimestamp(s.published_at, UTC).strftime("%Y-%m-%d %H:%M UTC")
        console.print(
            f"{s.project_id}/{s.name} v{s.version}: {s.agents} agents, starts at {s.default_agent_key} "
            f"(published {when})",
            highlight=False,
        )


def _compiled(file: str, config: str) -> NetworkSnapshot:
    """The network compiled against the tools the project gives agent_network (MCP servers started)."""
    try:
        return asyncio.run(compile_for_project(load_definition(file), project_file=config))
    except NetworkValidationError as exc:
        _fail(f"{file}: network {exc.name!r} cannot be published:", exc.problems)
    except (NetworkError, ConfigurationError) as exc:
        _fail(str(exc))


def _database(option: str | None) -> str:
    database = option or ServerSettings().checkpointer
    if database == "memory":
        _fail(
            "the memory database keeps nothing after this command: set --database or PHASEGRAPH_CHECKPOINTER"
        )
    return database


async def _publish(database: str, project: str, snapshot: NetworkSnapshot) -> NetworkSnapshot:
    requests = RequestStore.for_checkpointer(database)
    try:
        await requests.setup()  # the server's migrations, which create the networks table
    finally:
        await requests.close()
    store = open_network_store(database)
    try:
        return await store.publish(project, snapshot)
    finally:
        await store.close()


async def _list(database: str, project: str | None) -> list[NetworkSummary]:
    store = open_network_store(database)
    try:
        return await store.list(frozenset({project}) if project else None)
    finally:
        await store.close()


def _fail(message: str, problems: list[str] | None = None) -> NoReturn:
    console = Console(stderr=True, soft_wrap=True)
    console.print(f"[red]error: {message}[/]", highlight=False)
    for problem in problems or []:
        console.print(f"  - {problem}", highlight=False)
    raise typer.Exit(1)
