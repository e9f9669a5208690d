"""``phasegraph usage``: the planner's usage rows as a table, summed per operation, context, model or status.

Every model call is a row, failed ones too: ``failed`` counts the calls that did not answer.
"""

from __future__ import annotations

import asyncio
from typing import Annotated, Literal

import typer
from rich.console import Console
from rich.table import Table

from phasegraph.nodes.settings import ServerSettings
from phasegraph.server.storage.store import RequestStore
from phasegraph.tools.planning import LedgerFilter, PlanningError, UsageReport, open_planning


def usage_command(
    by: Annotated[
        Literal["operation", "context", "model", "profile", "execution_mode", "session", "request", "status"],
        typer.Option(help="Sum the rows per this column."),
    ] = "operation",
    project: Annotated[str | None, typer.Option(help="Only this project's rows.")] = None,
    session: Annotated[str | None, typer.Option(help="Only this session's (thread's) rows.")] = None,
    database: Annotated[
        str | None, typer.Option(help="memory | sqlite:PATH | postgresql://... (PHASEGRAPH_CHECKPOINTER).")
    ] = None,
) -> None:
    """Print model usage (calls, failed calls, tokens, cost) per group, and the totals."""
    spec = database or ServerSettings().checkpointer
    filters = LedgerFilter(scopes=frozenset({project}) if project else None, session_id=session)
    try:
        report = asyncio.run(_report(spec, filters, by))
    except PlanningError as exc:
        Console(stderr=True).print(f"[red]error: {exc}[/]", highlight=False)
        raise typer.Exit(1) from None
    Console().print(_table(report, by))


async def _report(database: str, filters: LedgerFilter, by: str) -> UsageReport:
    requests = RequestStore.for_checkpointer(database)
    try:
        await requests.setup()  # the server's migrations: a database no run has used yet has the tables too
    finally:
        await requests.close()
    store = open_planning(database)
    try:
        return await store.ledger.usage(filters, by=by)
    finally:
        await store.close()


def _table(report: UsageReport, by: str) -> Table:
    table = Table(title=f"Model usage by {by}")
    for column in (by, "calls", "failed", "input tokens", "output tokens", "cost (USD)"):
        table.add_column(column, justify="left" if column == by else "right")
    for group in report.groups:
        table.add_row(
            str(group["key"]),
            str(group["calls"]),
            str(group["failed"]),
            str(group["input_tokens"]),
            str(group["output_tokens"]),
            f"{group['cost_usd']:.6f}",
        )
    totals = report.totals
    table.add_section()
    table.add_row(
        "total",
        str(totals["calls"]),
        str(totals["failed"]),
        str(totals["input_tokens"]),
        str(totals["output_tokens"]),
        f"{totals['cost_usd']:.6f}",
        style="bold",
    )
    return table
