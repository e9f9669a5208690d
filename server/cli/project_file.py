"""The project file on the command line: ``--config FILE`` and ``phasegraph config check [FILE]``.

``--config`` sets ``PHASEGRAPH_CONFIG`` for the process before anything reads it, so every run the
command makes (and ``phasegraph serve``'s server) reads that file. A project file in force is checked
before any run: a malformed one is refused with exit code 2 and every problem listed, each naming its
key and line. ``config check`` lists the same problems, and also what only loading shows: protocol
settings that are not settings of their protocol, Python tool import paths that do not load and MCP
server entries that do not parse (no MCP server is started).
"""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, get_type_hints

import typer
from pydantic import TypeAdapter, ValidationError
from rich.console import Console

from phasegraph.graphs.registry import PROTOCOLS
from phasegraph.nodes.context import NOT_FROM_PROJECT
from phasegraph.nodes.errors import ConfigurationError, ScriptError
from phasegraph.nodes.events import ErrorEvent
from phasegraph.nodes.project import (
    ENV_VAR,
    FILE_NAME,
    Project,
    ProjectFile,
    load_project,
    project_path,
    project_problems,
)
from phasegraph.nodes.project import setting_problem as _setting_problem
from phasegraph.server.cli.main import Command, Group
from phasegraph.tools.sources import ToolSourceError, load_python_tools

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
    mcp_servers: int = 0

    def summary(self) -> str:
        """One line: how many models, MCP servers, Python tools and policies the file names."""
        assert self.project is not None
        file = self.project.file
        models = (file.model is not None) + len(file.models)
        return (
            f"{models} model(s), {self.mcp_servers} MCP server(s), {self.python_tools} Python tool(s) from "
            f"{len(file.python_tools)} source(s), {len(file.tools)} tool policy(ies), "
            f"{len(file.protocols)} protocol section(s)"
        )


def check_project(path: Path, protocols: Iterable[str] | None = None) -> Check:
    """Every problem of the project file at ``path`` (``protocols``: whose settings to check; all when None).

    Nothing is started: MCP entries are parsed, Python tool import paths are imported.
    """
    check = Check(path, sorted(project_problems(path), key=_line_of))
    if check.problems:
        return check
    try:
        project = load_project(path)
    except ConfigurationError as exc:  # changed on disk since it was read above
        check.problems.append(str(exc))
        return check
    assert project is not None
    check.project = project
    wanted = set(protocols) if protocols is not None else set(project.file.protocols)
    for protocol, settings in project.file.protocols.items():
        if protocol in wanted:
            check.problems += _setting_problems(project, protocol, settings)
    check.problems += _script_problems(project, set(protocols) if protocols is not None else set(PROTOCOLS))
    check.problems += _python_problems(project, check)
    check.problems += _policy_problems(project, check)
    workspace = project.folder / (project.file.workspace or ".")
    try:
        check.mcp_servers = len(project.sources(workspace).mcp_servers)
    except ConfigurationError as exc:
        check.problems.append(_server_problem(project, str(exc)))
    return check


def _server_problem(project: Project, message: str) -> str:
    """An MCP entry's problem, at the entry's key and line when it names the entry."""
    found = re.match(r"[^:]*: service '([^']*)': (.*)", message, re.DOTALL)
    if found is None or not isinstance(project.file.mcp_servers, dict):
        return f"{project.where(('mcp_servers',))}: {message}"
    return f"{project.where(('mcp_servers', found.group(1)))}: {found.group(2)}"


def _line_of(problem: str) -> int:
    """The line a problem names (``file:LINE: ...``; 0 when it names none), to list problems in file order."""
    found = re.match(r"[^:]*:(\d+):", problem)
    return int(found.group(1)) if found else 0


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
    for source, target in project.file.python_tools.items():
        try:
            tools = load_python_tools(source, target, project.folder, project.file.import_timeout_seconds)
        except ToolSourceError as exc:
            problems.append(f"{project.where(('python_tools', source))}: {exc}")
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
    names are checked when a run starts it). Globs may match nothing.
    """
    servers = set(project.file.mcp_servers) if isinstance(project.file.mcp_servers, dict) else None
    known = {*_protocol_tools(), *check.python_names, *project.file.python_tools, *(servers or ())}
    problems: list[str] = []
    for key in project.file.tools:
        server, dot, _ = key.partition(".")
        if any(char in key for char in "*?[") or key in known:
            continue
        if dot and (servers is None or server in servers or (server == "python" and check.python_names)):
            continue  # a server's tool: its name is checked when the server runs
        where = project.where(("tools", key))
        problems.append(f"{where}: names no tool, MCP server or Python source of this project")
    return problems


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
) -> None:
    """Check a project file: every problem with its key and line (exit 2), or "ok" and a summary (exit 0).

    Protocol settings are checked against each protocol's Context, Python tool import paths are
    imported and MCP server entries parsed; no MCP server is started (`phasegraph tools` starts them).
    """
    path = Path(file).expanduser().resolve() if file is not None else project_path()
    if path is None:
        missing = f"no project file: give FILE, set {ENV_VAR} or add ./{FILE_NAME}"
        _refuse(Path(FILE_NAME).resolve(), [missing], json_lines=False)
        return
    check = check_project(path)
    if check.problems:
        for problem in check.problems:
            print(problem)
        Console(stderr=True, soft_wrap=True).print(
            f"[red]{len(check.problems)} problem(s) in {path}[/]", highlight=False
        )
        raise typer.Exit(2)
    print(f"ok: {path}: {check.summary()}")
