"""The ``phasegraph`` command: run a protocol (one turn), list protocols, draw a graph, serve, inspect.

Only Typer is imported here. Each sub-command lives in a module of its own that is imported when the
sub-command runs (or shows its own help), so ``phasegraph --help`` and a command that needs no server,
no database and no provider SDK never pay for importing them.
"""

from __future__ import annotations

import importlib
import sys
from dataclasses import dataclass
from typing import Annotated, Any

import typer
from typer.core import TyperCommand, TyperGroup


def _untyped_flags(params: list[Any]) -> list[Any]:
    """``params``, each flag without a type in the help: ``--json``, not ``--json <bool>``.

    Typer's help shows every option's type, a flag's too, though a flag takes no value; an empty
    metavar leaves the type column blank (a flag is never parsed with a metavar).
    """
    for param in params:
        if getattr(param, "is_flag", False):
            param.metavar = ""
    return params


class Command(TyperCommand):
    """A sub-command whose help lists its flags without a type (``cls=`` of every command)."""

    def get_params(self, ctx: Any) -> list[Any]:
        """The command's parameters, its help option included."""
        return _untyped_flags(super().get_params(ctx))


class Group(TyperGroup):
    """A group of sub-commands whose help lists its flags without a type (``cls=`` of every group)."""

    def get_params(self, ctx: Any) -> list[Any]:
        """The group's parameters, its help option included."""
        return _untyped_flags(super().get_params(ctx))


@dataclass(frozen=True)
class Entry:
    """Where a sub-command is defined (``module:attribute`` in ``phasegraph.server.cli``), and its summary.

    The summary is what the listing shows without importing the command: its docstring's first line
    (a test holds the two together).
    """

    where: str
    summary: str

    def load(self, name: str) -> Any:
        """The sub-command as a click command (a Typer app becomes a group, a function a command)."""
        module, _, attribute = self.where.partition(":")
        target = getattr(importlib.import_module(f"phasegraph.server.cli.{module}"), attribute)
        if isinstance(target, typer.Typer):  # a group, even of one command (``config check``)
            command: Any = typer.main.get_group(target)
        else:  # completion is installed for the whole command: only the root offers it
            single = typer.Typer(add_completion=False)
            single.command(name, cls=Command)(target)
            command = typer.main.get_command(single)
        command.name = name
        return command


#: Every sub-command, in the order ``--help`` lists them.
COMMANDS: dict[str, Entry] = {
    "run": Entry(
        "run:run_command",
        "Run one user turn and stream its events; exit 0 on a final answer, 1 after an error.",
    ),
    "protocols": Entry("protocols:protocols_command", "List the registered protocols."),
    "graph": Entry("protocols:graph_command", "Print the protocol's graph as mermaid."),
    "serve": Entry(
        "serving:serve_command",
        "Serve the HTTP API and web page (settings from PHASEGRAPH_* variables).",
    ),
    "inspect": Entry(
        "inspect:inspect_command",
        "Print a thread's checkpoint timeline, or one checkpoint's values (PHASEGRAPH_CHECKPOINTER).",
    ),
    "chat": Entry(
        "chat:chat_command",
        "Chat with a protocol on a durable thread: one turn per line; /exit, /quit or Ctrl-D ends it.",
    ),
    "tools": Entry(
        "tools_list:tools_command",
        "List the tools each protocol will see: name, source, description, parameters and policy.",
    ),
    "usage": Entry(
        "usage:usage_command",
        "Print model usage (calls, failed calls, tokens, cost) per group, and the totals.",
    ),
    "prune": Entry(
        "prune:prune_command",
        "Remove old checkpoints by the retention policy; print what went and the space reclaimed.",
    ),
    "network": Entry(
        "networks:network_app",
        "Validate, publish and list agent networks (protocol agent_network).",
    ),
    "dataset": Entry("dataset:dataset_app", "Training data the runs logged (one JSON line per iteration)."),
    "config": Entry("project_file:config_app", "The project file (phasegraph.toml)."),
}


class LazyCommands(Group):
    """A group that lists its sub-commands by name and summary, and imports one only when it is chosen.

    Click's lazy-loading pattern: the listing (``--help``, suggestions for a misspelt name) reads
    stand-ins that carry the summary; ``resolve_command`` swaps the chosen one for the real command.
    """

    def __init__(self, **attrs: Any) -> None:
        super().__init__(**attrs)
        for name, entry in COMMANDS.items():
            self.commands[name] = TyperCommand(name=name, short_help=entry.summary, help=entry.summary)

    def resolve_command(self, ctx: Any, args: list[str]) -> Any:
        """The chosen sub-command, imported now, with the arguments left for it."""
        name, command, rest = super().resolve_command(ctx, args)
        if name in COMMANDS:
            command = COMMANDS[name].load(name)
        return name, command, rest


app = typer.Typer(
    cls=LazyCommands, help="Orchestration protocols for tool-using LLM agents.", no_args_is_help=True
)


def _print_version(asked: bool) -> None:
    """``--version``: print ``phasegraph <version>`` from the installed package's metadata, and exit 0."""
    if not asked:
        return
    from importlib.metadata import PackageNotFoundError, version

    try:
        installed = version("phasegraph")
    except PackageNotFoundError:  # imported from a source tree that was never installed
        installed = "unknown (not installed)"
    print(f"phasegraph {installed}")
    raise typer.Exit()


@app.callback()
def _configure(
    _version: Annotated[
        bool,
        typer.Option("--version", help="Print the version and exit.", is_eager=True, callback=_print_version),
    ] = False,
) -> None:
    """Set up logging (PHASEGRAPH_LOG_FORMAT) before a sub-command runs; exit 2 when it cannot be."""
    from phasegraph.nodes.errors import PhasegraphError
    from phasegraph.nodes.logs import configure_logging

    try:
        configure_logging()
    except PhasegraphError as exc:
        print(f"error: {exc}", file=sys.stderr)
        raise typer.Exit(2) from None


def main() -> None:
    """Console-script entry point."""
    app()
