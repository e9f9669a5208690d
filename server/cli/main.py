"""The ``phasegraph`` command: run a protocol (one turn), list protocols, draw a graph, serve, inspect."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable
from typing import Annotated, Any

import typer
from pydantic import ValidationError
from rich.console import Console

from phasegraph.graphs.registry import PROTOCOLS
from phasegraph.nodes.errors import ConfigurationError, PhasegraphError
from phasegraph.nodes.events import Event
from phasegraph.nodes.logs import configure_logging, dict_config
from phasegraph.server.cli.approvals import Approvals, ApproveAllOption, parse_answer
from phasegraph.server.cli.chat import chat_command
from phasegraph.server.cli.dataset import dataset_app
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
from phasegraph.server.cli.project_file import ConfigOption, config_app, use_project
from phasegraph.server.cli.prune import prune_command
from phasegraph.server.cli.render import EventRenderer
from phasegraph.server.cli.tools_list import tools_command
from phasegraph.server.cli.turns import durable_turn, plain_turn
from phasegraph.server.cli.usage import usage_command
from phasegraph.server.storage.checkpoints import DEFAULT_PAGE, MAX_PAGE

app = typer.Typer(help="Orchestration protocols for tool-using LLM agents.", no_args_is_help=True)


@app.command("run")
def run_command(
    protocol: ProtocolArg,
    message: Annotated[
        str | None, typer.Argument(help="The user's message (none with --resume).", show_default=False)
    ] = None,
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
    config: ConfigOption = None,
    approve_all: ApproveAllOption = False,
    resume: Annotated[
        str | None,
        typer.Option(
            help="Answer the approval the --thread waits for (exit 3 left it waiting): approve, reject, "
            'or JSON such as \'{"decision": "edit", "args": {...}}\' or '
            '\'{"decision": "reject", "reason": "..."}\'.'
        ),
    ] = None,
) -> None:
    """Run one user turn and stream its events; exit 0 on a final answer, 1 after an error.

    A call whose tool's policy says confirm waits for approval: on a terminal you are asked
    (approve, edit the arguments, or reject with a reason); --approve-all approves every call; with
    --json, or when standard input is no terminal, the run prints the waiting call as one JSON line
    ({"type": "interrupt", ...}) and exits 3: answer it later with --thread ID --resume ANSWER.

    With --thread, a turn that ends asking you a question also exits 0 (answer with the next
    turn), and one cancelled with Ctrl-C exits 130. Exit 2: bad input (refused before any run).
    """
    spec_or_exit(protocol, json_lines)
    use_project(config, protocols=[protocol], json_lines=json_lines)
    try:
        answer = parse_answer(resume) if resume is not None else None
        if answer is not None and thread is None:
            raise ConfigurationError("--resume answers a --thread's approval: name the thread with --thread")
        if answer is None and message is None:
            raise ConfigurationError("give the user's message (or --resume with --thread)")
    except PhasegraphError as exc:
        refuse(exc, json_lines)
    fields = run_fields(model, workspace, project, show_tool_outputs, setting, context_type, entity_id,
                        json_lines=json_lines, protocol=protocol)  # fmt: skip
    console = Console(stderr=json_lines)
    render: Callable[[Event], None] = _print_json if json_lines else EventRenderer(console)
    approvals = Approvals.for_run(approve_all, json_lines, console)
    try:
        if thread is not None:
            code = asyncio.run(
                durable_turn(protocol, message, check_thread_id(thread), fields, render, approvals, answer)
            )
        else:
            code = asyncio.run(plain_turn(protocol, message or "", fields, render, approvals))
    except PhasegraphError as exc:  # raised before the run started: bad spec, script, workspace, thread
        refuse(exc, json_lines)
    raise typer.Exit(code)


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
    workers: Annotated[
        int | None,
        typer.Option(
            min=1,
            help="Worker processes on the one port, sharing the database (PHASEGRAPH_WORKERS). "
            "Default: one per CPU; one with the memory checkpointer.",
        ),
    ] = None,
    config: ConfigOption = None,
) -> None:
    """Serve the HTTP API and web page (settings from PHASEGRAPH_* variables).

    The project file (--config, PHASEGRAPH_CONFIG or ./phasegraph.toml) is checked first: a
    malformed one is refused with exit code 2, every problem listed.
    """
    from phasegraph.server.cli.serving import serve

    use_project(config)
    try:
        serve(host, port, workers, _log_config())
    except (ConfigurationError, ValidationError) as exc:
        Console(stderr=True, soft_wrap=True).print(f"[red]error:[/] {exc}", highlight=False)
        raise typer.Exit(2) from None


def _log_config() -> dict[str, Any]:
    """Uvicorn's logging in PHASEGRAPH_LOG_FORMAT, our own loggers on its handler, secrets masked on each."""
    from uvicorn.config import LOGGING_CONFIG

    config = dict_config(LOGGING_CONFIG)
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
app.command("tools")(tools_command)
app.command("usage")(usage_command)
app.command("prune")(prune_command)
app.add_typer(network_app, name="network")
app.add_typer(dataset_app, name="dataset")
app.add_typer(config_app, name="config")


def main() -> None:
    """Console-script entry point."""
    try:
        configure_logging()
    except PhasegraphError as exc:
        print(f"error: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
    app()


def _print_json(event: Event) -> None:
    print(event.to_json(), flush=True)
