"""``phasegraph prune``: apply the checkpoint retention policy once, report what went and the space back."""

from __future__ import annotations

import asyncio
import sqlite3
from dataclasses import replace
from typing import Annotated, NoReturn

import psycopg
import typer
from rich.console import Console
from rich.table import Table
from sqlalchemy.exc import SQLAlchemyError

from phasegraph.nodes.errors import ConfigurationError
from phasegraph.nodes.settings import ServerSettings
from phasegraph.server.storage.persistence import open_checkpointer
from phasegraph.server.storage.retention import (
    PruneReport,
    RetentionPolicy,
    parse_keep_latest,
    parse_retention,
    parse_ttl,
    prune,
    pruner_for,
)
from phasegraph.server.storage.store import RequestStore
from phasegraph.tools.database import public_database

MEMORY = (
    "the memory checkpointer lives inside each server process, so there is nothing to prune from "
    "a command: set PHASEGRAPH_RETENTION on the server instead"
)


def prune_command(
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Report what would go; remove nothing.")] = False,
    keep_latest: Annotated[
        str | None,
        typer.Option(
            metavar="N",
            help="Keep each thread's newest N checkpoints per namespace (overrides PHASEGRAPH_RETENTION).",
        ),
    ] = None,
    ttl: Annotated[
        str | None,
        typer.Option(
            metavar="DURATION",
            help="Remove threads idle for longer: 30d, 12h, 90m, 3600s (overrides PHASEGRAPH_RETENTION).",
        ),
    ] = None,
    database: Annotated[
        str | None, typer.Option(help="sqlite:PATH or postgresql://... Default: PHASEGRAPH_CHECKPOINTER.")
    ] = None,
) -> None:
    """Remove old checkpoints by the retention policy; print what went and the space reclaimed.

    Threads of paused or running requests keep what they need to resume. A sqlite file is VACUUMed,
    which holds its write lock while it runs: on a large file, stop the server first.
    """
    settings = ServerSettings()
    spec = database or settings.checkpointer
    try:
        policy = parse_retention(settings.retention) or RetentionPolicy()
        if keep_latest is not None:
            policy = replace(policy, keep_latest=parse_keep_latest(keep_latest))
        if ttl is not None:
            policy = replace(policy, ttl_seconds=parse_ttl(ttl))
    except ConfigurationError as exc:
        _refuse(str(exc))
    if spec == "memory":
        _refuse(MEMORY)
    if not (policy.keep_latest or policy.ttl_seconds):
        _refuse("no retention policy: set PHASEGRAPH_RETENTION or pass --keep-latest N and/or --ttl 30d")
    try:
        report, before, after = asyncio.run(_prune(spec, policy, dry_run))
    except ConfigurationError as exc:
        _refuse(str(exc))
    except (SQLAlchemyError, sqlite3.Error, psycopg.Error, OSError) as exc:
        Console(stderr=True, soft_wrap=True).print(
            f"[red]error: pruning {public_database(spec)} failed: {exc}[/]"
        )
        raise typer.Exit(1) from None
    Console(soft_wrap=True).print(_table(spec, policy, report, before, after), highlight=False)


async def _prune(
    spec: str, policy: RetentionPolicy, dry_run: bool
) -> tuple[PruneReport, int | None, int | None]:
    store = RequestStore.for_checkpointer(spec)
    try:
        await store.setup()  # the server's migrations: paused and running requests are read from there
        async with open_checkpointer(spec) as saver:
            pruner = pruner_for(saver, requests=True)
            before = await pruner.size()
            report = await prune(pruner, policy, store=store, dry_run=dry_run)
            if not dry_run:
                await pruner.compact()
            return report, before, await pruner.size()
    finally:
        await store.close()


def _table(
    spec: str, policy: RetentionPolicy, report: PruneReport, before: int | None, after: int | None
) -> Table:
    verb = "would remove (dry run: nothing removed)" if report.dry_run else "removed"
    table = Table(title=f"Retention {policy} on {public_database(spec)}: {verb}", show_header=False)
    table.add_column(justify="left")
    table.add_column(justify="right")
    table.add_row("threads looked at", str(report.threads))
    table.add_row("threads expired by the ttl", str(report.expired))
    table.add_row("threads trimmed to keep_latest", str(report.trimmed))
    table.add_row("threads left alone (request running)", str(report.busy))
    table.add_row("threads kept past the ttl (paused, interrupt)", str(report.spared))
    table.add_row("checkpoints", str(report.removed.checkpoints))
    table.add_row("writes", str(report.removed.writes))
    table.add_row(
        "blobs", str(report.removed.blobs) if report.keeps_blobs else "none (values inside checkpoints)"
    )
    table.add_row("requests of expired threads", str(report.forgotten.requests))
    table.add_row("their events", str(report.forgotten.events))
    table.add_row("their trace entries", str(report.forgotten.traces))
    table.add_row("thread rows", str(report.forgotten.threads))
    for name, value in _space(spec, report.dry_run, before, after):
        table.add_row(name, value)
    return table


def _space(spec: str, dry_run: bool, before: int | None, after: int | None) -> list[tuple[str, str]]:
    sqlite = spec.startswith("sqlite:")
    what = "file" if sqlite else "checkpoint tables"
    if before is None or after is None:
        return [("space", "not measured")]
    if dry_run:
        return [(f"{what} now", _bytes(before))]
    given_back = _bytes(before - after)
    if not sqlite and after >= before:  # plain VACUUM keeps a table's pages; new rows fill them first
        given_back = "none: Postgres reuses the freed pages (VACUUM FULL returns them, locking the tables)"
    return [
        (f"{what} before", _bytes(before)),
        (f"{what} after VACUUM", _bytes(after)),
        ("space reclaimed", given_back),
    ]


def _bytes(size: int) -> str:
    return f"{size} bytes ({size / 1_048_576:.1f} MiB)"


def _refuse(message: str) -> NoReturn:
    Console(stderr=True, soft_wrap=True).print(f"[red]error: {message}[/]", highlight=False)
    raise typer.Exit(2)
