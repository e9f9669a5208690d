"""The ``phasegraph`` command: run a protocol (one turn), list protocols, draw a graph, serve, inspect."""

from __future__ import annotations

import asyncio
import copy
import logging
from collections.abc import Callable
from typing import Annotated, Any

import typer
from rich.console import Console

from phasegraph.graphs.registry import PROTOCOLS
from phasegraph.graphs.run import stream_run
from phasegraph.nodes.errors import PhasegraphError
from phasegraph.nodes.events import Event, Final
from phasegraph.nodes.redact import RedactingFilter, redact_logging
from phasegraph.server.cli.chat import chat_command
from phasegraph.server.cli.dataset import dataset_app
from phasegraph.server.cli.durable import DurableRuns, turn_exit_code
from phasegraph.server.cli.networks import network_app
from phasegraph.server.cli.options import (
    ContextTypeOption,
    EntityIdOption,
    ModelOption,
    ProjectOption,
    ProtocolArg,
    SettingOption,
    ShowToolOutputsOption,
    WorkspaceOption,
    check_thread_id,
    refuse,
    run_fields,
    spec_or_exit,
)
from phasegraph.server.cli.prune import prune_command
from phasegraph.server.cli.render import EventRenderer
from phasegraph.server.cli.usage import usage_command
from phasegraph.server.storage.checkpoints import DEFAULT_PAGE, MAX_PAGE

app = typer.Typer(help="Orchestration protocols for tool-using LLM agents.", no_args_is_help=True)


@app.command("run")
def run_command(
    protocol: ProtocolArg,
    message: Annotated[str, typer.Argument(help="The user's message.")],
    model: ModelOption = None,
    workspace: WorkspaceOption = None,
    project: ProjectOption = "default",
    show_tool_outputs: ShowToolOutputsOption = False,
    json_lines: Annotated[bool, typer.Option("--json", help="One event per line, as JSON.")] = False,
    setting: SettingOption = None,
    context_type: ContextTypeOption = None,
    entity_id: EntityIdOption = None,
    thread: Annotated[
        str | None,
        typer.Option(
            help="Take the turn on this durable thread, in the server's database (PHASEGRAPH_CHECKPOINTER), "
            "new or continued; without it the run keeps nothing."
        ),
    ] = None,
) -> None:
    """Run one user turn and stream its events; exit 0 on a final answer, 1 after an error.

    With --thread, a turn that ends asking you a question also exits 0 (answer with the next
    turn), and one cancelled with Ctrl-C exits 130.
    """
    spec_or_exit(protocol, json_lines)
    fields = run_fields(
        model, workspace, project, show_tool_outputs, setting, context_type, entity_id, json_lines=json_lines
    )
    render: Callable[[Event], None] = _print_json if json_lines else EventRenderer(Console())
    try:
        if thread is not None:
            ended = asyncio.run(_durable_turn(protocol, message, check_thread_id(thread), fields, render))
            raise typer.Exit(turn_exit_code(ended))
        finished = asyncio.run(_stream(protocol, message, fields, render))
    except PhasegraphError as exc:  # raised before the run started: bad spec, script, workspace, thread
        refuse(exc, json_lines)
    raise typer.Exit(0 if finished else 1)


@app.command("protocols")
def protocols_command() -> None:
    """List the registered protocols."""
    console = Console()
    for spec in PROTOCOLS.values():
        console.print(f"[bold]{spec.id}[/] (seed {spec.seed}): {spec.summary}", highlight=False)


@app.command("graph")
def graph_command(protocol: Annotated[str, typer.Argument(help="Protocol id.")]) -> None:
    """Print the protocol's graph as mermaid."""
    print(spec_or_exit(protocol).compile().get_graph().draw_mermaid())


@app.command("serve")
def serve_command(
    host: Annotated[str, typer.Option(help="Interface to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to listen on.")] = 8000,
) -> None:
    """Serve the HTTP API and web page (settings from PHASEGRAPH_* variables)."""
    import uvicorn

    uvicorn.run("phasegraph.server.app:app", host=host, port=port, log_level="info", log_config=_log_config())


def _log_config() -> dict[str, Any]:
    """Uvicorn's logging, with our own loggers on its handler and secrets masked on every handler."""
    from uvicorn.config import LOGGING_CONFIG

    config = copy.deepcopy(LOGGING_CONFIG)
    config["filters"] = {"redact": {"()": RedactingFilter}}
    for handler in config["handlers"].values():
        handler["filters"] = ["redact"]
    config["root"] = {"handlers": ["default"], "level": "WARNING"}
    # what each retention round removed
    config["loggers"]["phasegraph.server.storage.retention"] = {"level": "INFO"}
    return config


@app.command("inspect")
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
    from phasegraph.server.cli.inspect import inspect_thread

    try:
        console = Console(soft_wrap=True)
        asyncio.run(inspect_thread(thread, checkpoint, console, project, limit=limit, before=before))
    except PhasegraphError as exc:
        refuse(exc, json_lines=False)


app.command("chat")(chat_command)
app.command("usage")(usage_command)
app.command("prune")(prune_command)
app.add_typer(network_app, name="network")
app.add_typer(dataset_app, name="dataset")


def main() -> None:
    """Console-script entry point."""
    logging.basicConfig(format="%(levelname)s %(name)s: %(message)s")
    redact_logging()
    app()


async def _stream(
    protocol: str, message: str, fields: dict[str, Any], render: Callable[[Event], None]
) -> bool:
    finished = False
    async for event in stream_run(protocol, message, **fields):
        render(event)
        finished = finished or isinstance(event, Final)
    return finished


async def _durable_turn(
    protocol: str, message: str, thread_id: str, fields: dict[str, Any], render: Callable[[Event], None]
) -> Event:
    async with DurableRuns(fields) as runs:
        return await runs.turn(protocol, message, thread_id, render)


def _print_json(event: Event) -> None:
    print(event.to_json(), flush=True)
