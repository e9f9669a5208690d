"""``phasegraph run``: one user turn of a protocol, its events streamed to the terminal or as JSON lines."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Annotated

import typer
from rich.console import Console

from phasegraph.nodes.errors import ConfigurationError, PhasegraphError
from phasegraph.nodes.events import Event
from phasegraph.server.cli.approvals import Approvals, ApproveAllOption, parse_answer
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
from phasegraph.server.cli.project_file import ConfigOption, use_project
from phasegraph.server.cli.render import EventRenderer
from phasegraph.server.cli.turns import durable_turn, plain_turn


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
    turn), and one cancelled with Ctrl-C exits 130. Exit 2: bad input (refused before any run, or by the
    run's first step for its configuration: a [tools] rule naming no tool of its MCP server, say).
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


def _print_json(event: Event) -> None:
    print(event.to_json(), flush=True)
