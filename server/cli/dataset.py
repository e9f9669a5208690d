"""``phasegraph dataset export``: gather the runs' training-data lines into one JSONL file."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from phasegraph.nodes.dataset import export
from phasegraph.nodes.settings import run_settings
from phasegraph.server.cli.main import Command, Group

dataset_app = typer.Typer(cls=Group, help="Training data the runs logged (one JSON line per iteration).")


@dataset_app.command("export", cls=Command)
def export_command(
    out: Annotated[Path, typer.Option(help="The JSONL file to write.")] = Path("dataset.jsonl"),
    since: Annotated[
        str | None,
        typer.Option(help="Only lines from this time on (ISO 8601, e.g. 2026-11-01 or 2026-11-01T12:00)."),
    ] = None,
    protocol: Annotated[str | None, typer.Option(help="Only this protocol's runs.")] = None,
    folder: Annotated[
        str | None, typer.Option(help="Where the runs wrote them. Default: PHASEGRAPH_DATASET_DIR.")
    ] = None,
) -> None:
    """Write every line (filtered by --since and --protocol) to --out and print the counts."""
    console = Console(soft_wrap=True)
    try:
        start = datetime.fromisoformat(since) if since else None
    except ValueError:
        Console(stderr=True).print(f"[red]error: --since {since!r} is not an ISO 8601 date or time[/]")
        raise typer.Exit(2) from None
    if start is not None and start.tzinfo is None:
        start = start.replace(tzinfo=UTC)
    source = folder or run_settings().dataset_dir
    counts = export(source, out, start, protocol)
    total = sum(counts.values())
    per = ", ".join(f"{name}: {n}" for name, n in sorted(counts.items())) or "none"
    console.print(f"wrote {total} line(s) to {out} ({per}) from {source}", highlight=False)
