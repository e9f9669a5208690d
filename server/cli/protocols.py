"""``phasegraph protocols`` and ``phasegraph graph``: what protocols there are, and one's graph as mermaid."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.console import Console

from phasegraph.graphs.registry import PROTOCOLS
from phasegraph.server.cli.options import spec_or_exit


def protocols_command() -> None:
    """List the registered protocols."""
    console = Console()
    for spec in PROTOCOLS.values():
        console.print(f"[bold]{spec.id}[/] (seed {spec.seed}): {spec.summary}", highlight=False)


def graph_command(protocol: Annotated[str, typer.Argument(help="Protocol id.")]) -> None:
    """Print the protocol's graph as mermaid."""
    print(spec_or_exit(protocol).compile().get_graph().draw_mermaid())
