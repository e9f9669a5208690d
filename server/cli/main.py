"""The ``phasegraph`` command: run a protocol, list protocols, draw a graph."""

from __future__ import annotations

import asyncio
import copy
import json
import logging
from collections.abc import Callable
from typing import Annotated, Any, NoReturn

import typer
from rich.console import Console

from phasegraph.graphs.registry import PROTOCOLS, ProtocolSpec, get_protocol
from phasegraph.graphs.run import stream_run
from phasegraph.nodes.errors import ConfigurationError, PhasegraphError
from phasegraph.nodes.events import ErrorEvent, Event, Final
from phasegraph.nodes.models import DEMO_MODEL, DEMO_WORKSPACE
from phasegraph.nodes.redact import RedactingFilter, redact_logging
from phasegraph.server.cli.dataset import dataset_app
from phasegraph.server.cli.networks import network_app
from phasegraph.server.cli.prune import prune_command
from phasegraph.server.cli.render import EventRenderer
from phasegraph.server.cli.usage import usage_command
from phasegraph.server.storage.checkpoints import DEFAULT_PAGE, MAX_PAGE

app = typer.Typer(help="Orchestration protocols for tool-using LLM agents.", no_args_is_help=True)


@app.command("run")
def run_command(
    protocol: Annotated[str, typer.Argument(help="Protocol id (see `phasegraph protocols`).")],
    message: Annotated[str, typer.Argument(help="The user's message.")],
    model: Annotated[str | None, typer.Option(help="Model spec: provider:model or scripted:<path>.")] = None,
    workspace: Annotated[str | None, typer.Option(help="Folder the workspace tools may read.")] = None,
    project: Annotated[str, typer.Option(help="Project id.")] = "default",
    show_tool_outputs: Annotated[bool, typer.Option(help="Include raw tool outputs.")] = False,
    json_lines: Annotated[bool, typer.Option("--json", help="One event per line, as JSON.")] = False,
    setting: Annotated[
        list[str] | None,
        typer.Option(
            "--setting",
            "-s",
            help="A Context field of the protocol as KEY=VALUE (VALUE read as JSON when it parses), "
            "e.g. -s network=research -s max_steps=6. Repeatable.",
        ),
    ] = None,
    context_type: Annotated[
        str | None,
        typer.Option(help="planner: project_create, project, task, project_audit or general."),
    ] = None,
    entity_id: Annotated[str | None, typer.Option(help="planner: the project in scope.")] = None,
) -> None:
    """Run one user turn and stream its events; exit 0 on a final answer, 1 after an error."""
    out, notes = Console(), Console(stderr=True, soft_wrap=True)
    _spec_or_exit(protocol, json_lines)
    try:
        extra = _settings(setting or [])
    except ConfigurationError as exc:
        _refuse(exc, json_lines)
    if context_type is not None:
        extra["context_type"] = context_type
    if entity_id is not None:
        extra["entity_id"] = entity_id
    if model is None:
        model = DEMO_MODEL
        workspace = workspace or str(DEMO_WORKSPACE)
        notes.print(f"No --model given: running offline on the bundled demo script and data ({workspace}).")
    fields = {
        "model": model,
        "workspace": workspace or ".",
        "project_id": project,
        "show_tool_outputs": show_tool_outputs,
        **extra,
    }
    render: Callable[[Event], None] = _print_json if json_lines else EventRenderer(out)
    try:
        finished = asyncio.run(_stream(protocol, message, fields, render))
    except PhasegraphError as exc:  # raised before the run started: bad spec, script or workspace
        _refuse(exc, json_lines)
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
    print(_spec_or_exit(protocol).compile().get_graph().draw_mermaid())


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
        _refuse(exc, json_lines=False)


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


def _settings(pairs: list[str]) -> dict[str, Any]:
    """``KEY=VALUE`` pairs as Context fields; a value is JSON when it parses as JSON, else text."""
    fields: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise ConfigurationError(f"--setting takes KEY=VALUE, got {pair!r}")
        try:
            fields[key.strip()] = json.loads(value)
        except json.JSONDecodeError:
            fields[key.strip()] = value
    return fields


def _spec_or_exit(protocol: str, json_lines: bool = False) -> ProtocolSpec:
    try:
        return get_protocol(protocol)
    except ConfigurationError as exc:
        _refuse(exc, json_lines)


def _refuse(exc: PhasegraphError, json_lines: bool) -> NoReturn:
    """Report input that was refused before any run started, and exit 2."""
    if json_lines:
        print(ErrorEvent(kind=exc.kind, message=str(exc)).to_json())
    Console(stderr=True, soft_wrap=True).print(f"[red]error: {exc}[/]", highlight=False)
    raise typer.Exit(2)


def _print_json(event: Event) -> None:
    print(event.to_json(), flush=True)
