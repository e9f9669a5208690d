"""The project file on the command line: ``--config FILE`` and ``phasegraph config check [FILE]``.

``--config`` sets ``PHASEGRAPH_CONFIG`` for the process before anything reads it, so every run the
command makes (and ``phasegraph serve``'s server) reads that file. A project file in force is checked
before any run: a malformed one is refused with exit code 2 and every problem listed, each naming its
key and line. ``config check`` lists the same problems in one pass (a value with a problem is left out
and the rest still checked): the file's shape, protocol settings that are not settings of their
protocol, scripts, Python tool import paths that do not load, MCP server entries that do not parse
and ``[tools]`` rules that name nothing. With ``--connect`` it also starts the MCP servers and checks
``[tools."<server>.<tool>"]`` rules against the tools they offer.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, get_type_hints

import typer
from pydantic import TypeAdapter, ValidationError
from rich.console import Console

from phasegraph.graphs.registry import PROTOCOLS
from phasegraph.nodes.context import NOT_FROM_PROJECT
from phasegraph.nodes.errors import ScriptError
from phasegraph.nodes.events import ErrorEvent
from phasegraph.nodes.project import (
    ENV_VAR,
    FILE_NAME,
    Project,
    ProjectFile,
    examine_project,
    project_path,
)
from phasegraph.nodes.project import setting_problem as _setting_problem
from phasegraph.nodes.project_data import line_of
from phasegraph.server.cli.main import Command, Group
from phasegraph.tools.mcp.config import McpConfigError
from phasegraph.tools.sources import ToolSourceError, load_python_tools, unknown_policy_keys

if TYPE_CHECKING:
    from langchain_mcp_adapters.sessions import Connection

ConfigOption = Annotated[
    str | None,
    typer.Option(
        "--config",
        help=f"The project file ({FILE_NAME}: models, protocol settings, tools) for this command; it sets "
        f"{ENV_VAR}. Default: {ENV_VAR}, else ./{FILE_NAME} when there is one.",
    ),
]

config_app = typer.Typer(cls=Group, help="The project file (phasegraph.toml).", no_args_is_help=True)


@dataclass
class Check:
    """What checking a project file found: its problems, or the project and what it holds."""

    path: Path
    problems: list[str] = field(default_factory=list)
    project: Project | None = None
    python_tools: int = 0  # tools the Python sources give
    python_names: set[str] = field(default_factory=set)  # their names
    python_unread: bool = False  # a Python source did not load: its tools' names are not known
    mcp_servers: int = 0
    mcp_tools: int | None = None  # the tools of the servers started (``--connect``)

    def summary(self) -> str:
        """One line: how many models, MCP servers, Python tools and policies the file names."""
        assert self.project is not None
        file = self.project.file
        models = (file.model is not None) + len(file.models)
        started = f" ({self.mcp_tools} tool(s))" if self.mcp_tools is not None else ""
        return (
            f"{models} model(s), {self.mcp_servers} MCP server(s){started}, {self.python_tools} Python "
            f"tool(s) from {len(file.python_tools)} source(s), {len(file.tools)} tool policy(ies), "
            f"{len(file.protocols)} protocol section(s)"
        )


def check_project(path: Path, protocols: Iterable[str] | None = None, *, connect: bool = False) -> Check:
    """Every problem of the project file at ``path``, in file order (``protocols``: whose settings to check).

    One pass: a value with a problem is left out and the rest is still checked. MCP entries are parsed
    and Python tool import paths imported; with ``connect`` the MCP servers are started too (each
    within ``connect_timeout_seconds``) and ``[tools."<server>.<tool>"]`` rules checked against their tools.
    """
    project, problems = examine_project(path)
    check = Check(path, problems)
    if project is None:
        return check
    check.project = project
    wanted = set(protocols) if protocols is not None else set(project.file.protocols)
    for protocol, settings in project.file.protocols.items():
        if protocol in wanted:
            check.problems += _setting_problems(project, protocol, settings)
    check.problems += _script_problems(project, set(protocols) if protocols is not None else set(PROTOCOLS))
    check.problems += _python_problems(project, check)
    check.problems += _policy_problems(project, check)
    try:
        connections = project.connections(_workspace(project))
    except McpConfigError as exc:  # a servers file changed on disk since it was read above
        check.problems.append(str(exc))
        connections = {}
    check.mcp_servers = len(connections)
    if connect and connections:
        check.problems += _connected_problems(project, connections, check)
    check.problems.sort(key=line_of)  # stable: one line's problems keep their order
    return check


def _workspace(project: Project) -> Path:
    """The workspace a run of the project has unless it is given another (``${workspace}``)."""
    return project.folder / (project.file.workspace or ".")


def _connected_problems(project: Project, connections: dict[str, Connection], check: Check) -> list[str]:
    """Start the MCP servers: one that does not start is a problem, and so is a rule naming no tool of one.

    The servers are stopped again before this returns.
    """
    tools, unavailable = asyncio.run(_server_tools(connections, project.file.connect_timeout_seconds))
    check.mcp_tools = sum(len(names) for names in tools.values())
    table = isinstance(project.file.mcp_servers, dict)
    problems = [
        f"{project.where(('mcp_servers', server) if table else ('mcp_servers',))}: the MCP server {server!r} "
        f"did not start: {why}"
        for server, why in unavailable.items()
    ]
    for key, why in unknown_policy_keys(project.file.tools, tools):
        problems.append(f"{project.where(('tools', key))}: {why}")
    return problems


async def _server_tools(
    connections: dict[str, Connection], timeout: float
) -> tuple[dict[str, list[str]], dict[str, str]]:
    """The tool names of each server that started, and why each other did not."""
    from phasegraph.tools.mcp.services import McpServices  # the MCP SDK: only when connecting

    services = await McpServices.open(connections, timeout=timeout)
    try:
        return {server: list(specs) for server, specs in services.catalogue().items()}, services.unavailable
    finally:
        await services.close()


def _setting_problems(project: Project, protocol: str, settings: dict[str, Any]) -> list[str]:
    """Keys of ``[protocols.<protocol>]`` that are no setting of the protocol, or of the wrong type."""
    schema = PROTOCOLS[protocol].context_schema
    fields = {f.name: f for f in dataclasses.fields(schema)}
    hints = get_type_hints(schema, include_extras=True)
    problems: list[str] = []
    for key, value in settings.items():
        problem = _setting_problem(project, protocol, key, fields, NOT_FROM_PROJECT)
        if problem is None:
            try:
                TypeAdapter(hints[key]).validate_python(value, strict=True)  # TOML is typed: "3" is no count
            except ValidationError as exc:
                where = project.where(("protocols", protocol, key))
                problem = f"{where}: {exc.errors()[0]['msg']} (found {value!r})"
        if problem is not None:
            problems.append(problem)
    return problems


def _script_problems(project: Project, protocols: set[str]) -> list[str]:
    """Scripts of ``scripted:`` models (the top-level one, and those of ``protocols``) that are no script.

    Each is read as a run would read it, size and kind of file checked first: ``scripted:/dev/zero``
    is a problem here, not a run that grows until it is killed.
    """
    from phasegraph.nodes.scripted import load_script  # LangChain's model classes: only when checking

    problems: list[str] = []
    for key, spec in _model_specs(project.file, protocols):
        kind, _, name = spec.partition(":") if isinstance(spec, str) else ("", "", "")
        if kind != "scripted" or name in ("", "demo"):
            continue
        try:
            load_script(project.folder / name)  # an absolute path stays itself
        except ScriptError as exc:
            problems.append(f"{project.where(key)}: {exc}")
    return problems


def _model_specs(file: ProjectFile, protocols: set[str]) -> Iterator[tuple[tuple[str, ...], Any]]:
    """Each model spec the file writes that a run of ``protocols`` may use, with its key."""
    yield ("model",), file.model
    for key, spec in file.models.items():
        if key.split(".")[0] in protocols:
            yield ("models", key), spec
    for protocol, table in file.protocols.items():
        if protocol in protocols:
            yield ("protocols", protocol, "model"), table.get("model")


def _python_problems(project: Project, check: Check) -> list[str]:
    """Python tool sources whose import path does not load, and tool names two sources share."""
    problems: list[str] = []
    seen: dict[str, str] = {}
    check.python_unread = any(key[0] == "python_tools" for key in project.left_out)
    for source, target in project.file.python_tools.items():
        try:
            tools = load_python_tools(source, target, project.folder, project.file.import_timeout_seconds)
        except ToolSourceError as exc:
            problems.append(f"{project.where(('python_tools', source))}: {exc}")
            check.python_unread = True
            continue
        check.python_tools += len(tools)
        check.python_names |= {item.name for item in tools}
        for item in tools:
            if item.name in seen:
                problems.append(
                    f"{project.where(('python_tools', source))}: two tools are named {item.name!r}: "
                    f"one from python:{seen[item.name]}, one from python:{source}"
                )
            seen[item.name] = source
    return problems


def _policy_problems(project: Project, check: Check) -> list[str]:
    """``[tools]`` keys that can name nothing: a misspelt one would leave its tool without its rule.

    Without starting a server, a key is judged by what the file and the protocols name: a protocol's own
    tool, a Python tool or source, an MCP server, or ``<server>.<tool>`` of a named server (whose tool
    names ``--connect`` checks, and a run that starts the server). Globs may match nothing. A key that may
    name what a source with a problem would give is not judged: its problem is already listed.
    """
    servers: set[str] | None = (
        set(project.file.mcp_servers) | _left_out(project, "mcp_servers")
        if isinstance(project.file.mcp_servers, dict) and ("mcp_servers",) not in project.left_out
        else None
    )
    sources = {*project.file.python_tools, *_left_out(project, "python_tools")}
    known = {*_protocol_tools(), *check.python_names, *sources, *(servers or ())}
    problems: list[str] = []
    for key in project.file.tools:
        server, dot, _ = key.partition(".")
        if any(char in key for char in "*?[") or key in known or (check.python_unread and not dot):
            continue
        python = server == "python" and (check.python_names or check.python_unread)
        if dot and (servers is None or server in servers or python):
            continue  # a server's tool: its name is checked when the server runs
        where = project.where(("tools", key))
        problems.append(f"{where}: names no tool, MCP server or Python source of this project")
    return problems


def _left_out(project: Project, table: str) -> set[str]:
    """The names of ``table``'s entries left out of the project for their problems."""
    return {key[1] for key in project.left_out if len(key) > 1 and key[0] == table}


def _protocol_tools() -> set[str]:
    """The names of every protocol's own tools (workspace, resource and planning tools)."""
    from phasegraph.tools import default_registry
    from phasegraph.tools.planning import planning_registry
    from phasegraph.tools.resources import resource_registry

    return {name for registry in (default_registry(), resource_registry(), planning_registry()) for name in
            registry.names()}  # fmt: skip


def use_project(
    config: str | None, *, protocols: Iterable[str] | None = None, json_lines: bool = False
) -> Project | None:
    """Make ``config`` the process's project file (``PHASEGRAPH_CONFIG``) and check the one in force.

    Exit 2, listing every problem, when the file is malformed; ``None`` when there is no project file.
    """
    if config is not None:
        os.environ[ENV_VAR] = str(Path(config).expanduser().resolve())
    path = project_path()
    if path is None:
        return None
    check = check_project(path, protocols)
    if check.problems:
        _refuse(path, check.problems, json_lines)
    return check.project


def _refuse(path: Path, problems: list[str], json_lines: bool) -> None:
    """Print every problem of the project file and exit 2."""
    head = f"the project file {str(path)!r} has {len(problems)} problem(s)"
    if json_lines:
        print(ErrorEvent(kind="configuration", message=f"{head}: {'; '.join(problems)}").to_json())
    console = Console(stderr=True, soft_wrap=True)
    console.print(f"[red]error: {head}:[/]", highlight=False)
    for problem in problems:
        console.print(f"  {problem}", markup=False, highlight=False)
    raise typer.Exit(2)


@config_app.command("check", cls=Command)
def check_command(
    file: Annotated[
        str | None,
        typer.Argument(help=f"The project file (default: {ENV_VAR}, else ./{FILE_NAME})."),
    ] = None,
    connect: Annotated[
        bool,
        typer.Option(
            "--connect",
            help="Also start the MCP servers (each within connect_timeout_seconds, then stopped): one that "
            'does not start is a problem, and so is a [tools."<server>.<tool>"] rule naming no tool of its '
            "server.",
        ),
    ] = False,
) -> None:
    """Check a project file: every problem with its key and line (exit 2), or "ok" and a summary (exit 0).

    Every problem is listed in one pass, in file order. Protocol settings are checked against each
    protocol's Context, scripts read, Python tool import paths imported and MCP server entries parsed;
    no MCP server is started unless --connect says so.
    """
    path = Path(file).expanduser().resolve() if file is not None else project_path()
    if path is None:
        missing = f"no project file: give FILE, set {ENV_VAR} or add ./{FILE_NAME}"
        _refuse(Path(FILE_NAME).resolve(), [missing], json_lines=False)
        return
    check = check_project(path, connect=connect)
    if check.problems:
        for problem in check.problems:
            print(problem)
        Console(stderr=True, soft_wrap=True).print(
            f"[red]{len(check.problems)} problem(s) in {path}[/]", highlight=False
        )
        raise typer.Exit(2)
    print(f"ok: {path}: {check.summary()}")
