"""What ``phasegraph run`` and ``phasegraph chat`` share: their options and how a run's fields are made."""

from __future__ import annotations

import json
import re
from typing import Annotated, Any, NoReturn

import typer
from rich.console import Console

from phasegraph.graphs.registry import ProtocolSpec, get_protocol
from phasegraph.nodes.errors import ConfigurationError, PhasegraphError
from phasegraph.nodes.events import ErrorEvent
from phasegraph.nodes.models import DEMO_MODEL, DEMO_WORKSPACE
from phasegraph.nodes.project import load_project

ProtocolArg = Annotated[str, typer.Argument(help="Protocol id (see `phasegraph protocols`).")]
ModelOption = Annotated[str | None, typer.Option(help="Model spec: provider:model or scripted:<path>.")]
WorkspaceOption = Annotated[str | None, typer.Option(help="Folder the workspace tools may read.")]
ProjectOption = Annotated[str, typer.Option(help="Project id.")]
ShowToolOutputsOption = Annotated[bool, typer.Option(help="Include raw tool outputs.")]
SettingOption = Annotated[
    list[str] | None,
    typer.Option(
        "--setting",
        "-s",
        help="A Context field of the protocol as KEY=VALUE (VALUE read as JSON when it parses), "
        "e.g. -s network=research -s max_steps=6. Repeatable.",
    ),
]
ContextTypeOption = Annotated[
    str | None, typer.Option(help="planner: project_create, project, task, project_audit or general.")
]
EntityIdOption = Annotated[str | None, typer.Option(help="planner: the project in scope.")]

#: Thread ids the server's routes accept (its ``ID_PATTERN``), so every thread made here is reachable there.
THREAD_ID = re.compile(r"[A-Za-z0-9._:-]{1,200}")


def run_fields(
    model: str | None, workspace: str | None, project: str, show_tool_outputs: bool,
    setting: list[str] | None, context_type: str | None, entity_id: str | None, *, json_lines: bool = False,
    protocol: str = "",
) -> dict[str, Any]:  # fmt: skip
    """The Context fields of a run the command's options ask for (exit 2 on a malformed ``--setting``).

    Without ``--model`` the run is offline, on the bundled demo script and data (a note says so),
    unless the project file in force names a model (and maybe a workspace): the run takes the
    file's (an option given on the command line wins over the file).
    """
    try:
        extra = parse_settings(setting or [])
        in_force = load_project()
    except ConfigurationError as exc:
        refuse(exc, json_lines)
    if context_type is not None:
        extra["context_type"] = context_type
    if entity_id is not None:
        extra["entity_id"] = entity_id
    if in_force is not None:  # left at the Context's defaults, the project file's model and workspace apply
        if model is None and in_force.model_for(protocol) is None:
            Console(stderr=True, soft_wrap=True).print(
                f"No --model given and {in_force.path.name} names none: running offline on the bundled "
                "demo script."
            )
        model, workspace = model or DEMO_MODEL, workspace or ""
    elif model is None:
        model = DEMO_MODEL
        workspace = workspace or str(DEMO_WORKSPACE)
        Console(stderr=True, soft_wrap=True).print(
            f"No --model given: running offline on the bundled demo script and data ({workspace})."
        )
    return {
        "model": model,
        "workspace": workspace if workspace is not None else ".",
        "project_id": project,
        "show_tool_outputs": show_tool_outputs,
        **extra,
    }


def parse_settings(pairs: list[str]) -> dict[str, Any]:
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


def check_thread_id(thread_id: str) -> str:
    """``thread_id`` when the server could serve it, else a ConfigurationError saying what it may hold."""
    if not THREAD_ID.fullmatch(thread_id):
        raise ConfigurationError(
            f"--thread {thread_id!r}: a thread id is 1 to 200 letters, digits, '.', '_', ':' or '-'"
        )
    return thread_id


def spec_or_exit(protocol: str, json_lines: bool = False) -> ProtocolSpec:
    """The protocol's spec, or exit 2 naming the known ones."""
    try:
        return get_protocol(protocol)
    except ConfigurationError as exc:
        refuse(exc, json_lines)


def error_exit_code(error: ErrorEvent) -> int:
    """The exit code of a run that ended with ``error``: 2 when it was refused for its configuration.

    A run whose first step finds its configuration unusable (a ``[tools]`` rule naming no tool of a
    server it just started, say) did nothing, as a run ``refuse`` stopped before it started; 1 else.
    """
    return 2 if error.kind == ConfigurationError.kind else 1


def refuse(exc: PhasegraphError, json_lines: bool) -> NoReturn:
    """Report input that was refused before any run started, and exit 2."""
    if json_lines:
        print(ErrorEvent(kind=exc.kind, message=str(exc)).to_json())
    Console(stderr=True, soft_wrap=True).print(f"[red]error: {exc}[/]", highlight=False)
    raise typer.Exit(2)
