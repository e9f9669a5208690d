"""``phasegraph inspect``: a readable timeline of a thread's checkpoints, straight from the database."""

from __future__ import annotations

import asyncio
import json
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from phasegraph.graphs.registry import get_protocol
from phasegraph.nodes.errors import PhasegraphError
from phasegraph.nodes.settings import ServerSettings
from phasegraph.server.cli.options import refuse
from phasegraph.server.storage.checkpoints import DEFAULT_PAGE, MAX_PAGE, checkpoint_values, timeline
from phasegraph.server.storage.persistence import open_checkpointer
from phasegraph.server.storage.records import only_one
from phasegraph.server.storage.store import RequestStore


def inspect_command(
    thread: Annotated[str, typer.Argument(help="Thread id (a request's id unless it named another).")],
    checkpoint: Annotated[str | None, typer.Option(help="Show this checkpoint's state values.")] = None,
    project: Annotated[
        str | None, typer.Option(help="The thread's project, when several use the id.")
    ] = None,
    limit: Annotated[
        int, typer.Option(min=1, max=MAX_PAGE, help="How many checkpoints (the newest).")
    ] = DEFAULT_PAGE,
    before: Annotated[str | None, typer.Option(help="Show checkpoints older than this one.")] = None,
) -> None:
    """Print a thread's checkpoint timeline, or one checkpoint's values (PHASEGRAPH_CHECKPOINTER)."""
    try:
        console = Console(soft_wrap=True)
        asyncio.run(inspect_thread(thread, checkpoint, console, project, limit=limit, before=before))
    except PhasegraphError as exc:
        refuse(exc, json_lines=False)


async def inspect_thread(
    thread_id: str, checkpoint_id: str | None, console: Console, project_id: str | None = None,
    *, limit: int = DEFAULT_PAGE, before: str | None = None,
) -> None:  # fmt: skip
    """Print the timeline of ``thread_id`` (or the values of one checkpoint).

    Thread ids are per project: with several projects using the id, ``project_id`` picks one.
    """
    settings = ServerSettings()
    store = RequestStore.for_checkpointer(settings.checkpointer)
    try:
        await store.setup()
        found = await store.threads(thread_id, frozenset({project_id}) if project_id else None)
        record = only_one(found, f"thread {thread_id!r}", "pass --project")
        spec = get_protocol(record.protocol)
        async with open_checkpointer(settings.checkpointer) as saver:
            graph = spec.compile(saver, pausable=True)
            if checkpoint_id:
                console.print_json(
                    json.dumps(await checkpoint_values(graph, record.thread_key, checkpoint_id), default=str)
                )
                return
            infos, next_before = await timeline(spec, graph, record.thread_key, limit=limit, before=before)
    finally:
        await store.close()
    table = Table(title=f"thread {thread_id} ({spec.id}, project {record.project_id})")
    for column in ("step", "checkpoint", "node", "phase", "cycle", "next", "created"):
        table.add_column(column, overflow="fold")
    for info in infos:
        table.add_row(
            str(info.step), info.checkpoint_id, info.node or "(input)", _opt(info.phase_index),
            _opt(info.cycle_index), ", ".join(info.next) or "(end)", info.created_at or "",
        )  # fmt: skip
    console.print(table)
    if next_before is not None:
        console.print(f"older checkpoints: --before {next_before}")


def _opt(value: int | None) -> str:
    return "" if value is None else str(value)
