"""``phasegraph tools``: what each protocol's runs may call, as the project file makes them.

Each protocol's Context is built from the project file in force and its tools opened as a run opens
them (``open_tools``: the protocol's own, the MCP servers' (started here) and the Python tools, kept
by the protocol's ``tools`` patterns), then closed. A server that did not start is listed with why. No
model is made (``models_unchecked``): listing needs no provider key.
"""

from __future__ import annotations

import asyncio
import json
from typing import Annotated, Any

import typer
from rich.console import Console

from phasegraph.graphs.registry import PROTOCOLS, get_protocol
from phasegraph.nodes.context import models_unchecked
from phasegraph.nodes.errors import PhasegraphError
from phasegraph.server.cli.options import refuse
from phasegraph.server.cli.project_file import ConfigOption, use_project
from phasegraph.tools.sources import policy_of, source_of

#: What a listing says of protocols whose own tools are not what ``open_tools`` gives.
NOTES = {
    "xml_contract": "xml_contract calls these as XML blocks, <service><tool>: the project's MCP servers "
    "(else mcp_config, else the bundled demo server) and its Python tools as the service 'python'",
}


def tools_command(
    protocol: Annotated[
        str | None, typer.Option("--protocol", help="Only this protocol (default: every protocol).")
    ] = None,
    json_out: Annotated[bool, typer.Option("--json", help="One JSON object, keyed by protocol.")] = False,
    config: ConfigOption = None,
) -> None:
    """List the tools each protocol will see: name, source, description, parameters and policy.

    Source is builtin, mcp:<server> or python:<name>. MCP servers are started to list their tools
    (and stopped); a server that did not start is listed with why, and the command still exits 0.
    No model is made, so no provider key is needed. Exit 2 when the project file or a protocol's tools
    cannot be used.
    """
    ids = list(PROTOCOLS)
    if protocol is not None:
        try:
            ids = [get_protocol(protocol).id]
        except PhasegraphError as exc:
            refuse(exc, json_lines=False)
    use_project(config, protocols=ids)
    try:
        listing = asyncio.run(_listing(ids))
    except PhasegraphError as exc:
        refuse(exc, json_lines=False)
    if json_out:
        print(json.dumps(listing, indent=1))
        return
    _print(listing, Console(soft_wrap=True))


async def _listing(ids: list[str]) -> dict[str, Any]:
    """Every protocol's tools, listed at once (each opens its own MCP sessions)."""
    found = await asyncio.gather(*(_protocol_tools(p) for p in ids))
    return dict(zip(ids, found, strict=True))


async def _protocol_tools(protocol: str) -> dict[str, Any]:
    """One protocol's tools as its runs see them, with the servers that did not start."""
    with models_unchecked():  # listing runs no model: an openai: model needs no key here
        context = get_protocol(protocol).make_context()
    try:
        registry = await context.open_tools()
        unavailable = context.unavailable_tools()
        tools = []
        for name in registry.names():
            item = registry.get(name)
            assert item is not None
            tools.append(
                {
                    "name": name,
                    "source": source_of(item),
                    "description": item.description,
                    "parameters": item.args,
                    "policy": policy_of(item).model_dump(exclude_defaults=True),
                }
            )
    finally:
        await context.aclose()
    listed: dict[str, Any] = {"tools": tools, "unavailable": unavailable}
    if protocol in NOTES:
        listed["note"] = NOTES[protocol]
    return listed


def _print(listing: dict[str, Any], console: Console) -> None:
    for protocol, found in listing.items():
        console.print(f"[bold]{protocol}[/] ({len(found['tools'])} tool(s))", highlight=False)
        if "note" in found:
            console.print(f"  [dim]note: {found['note']}[/]", highlight=False)
        for item in found["tools"]:
            params = ", ".join(item["parameters"]) or "-"
            policy = ", ".join(f"{k}={json.dumps(v)}" for k, v in item["policy"].items())
            console.print(
                f"  {item['name']} [dim]\\[{item['source']}][/] ({params})"
                + (f" [yellow]{policy}[/]" if policy else ""),
                highlight=False,
            )
            console.print(f"      {_first_line(item['description'])}", markup=False, highlight=False)
        for server, why in found["unavailable"].items():
            console.print(f"  [red]MCP server {server!r} did not start: {why}[/]", highlight=False)


def _first_line(text: str) -> str:
    return (text or "").strip().splitlines()[0] if (text or "").strip() else ""
