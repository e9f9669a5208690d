"""The project file, ``phasegraph.toml``: a project's models, protocol settings, tool sources and tool rules.

Found as ``PHASEGRAPH_CONFIG`` names it, else ``phasegraph.toml`` in the folder the process started
in; read with ``tomllib`` and validated with pydantic; every problem is reported with its key and
line (``examine_project``). Every interface builds its runs' Contexts through ``RunContext``, which
applies the file (``ProjectFile.apply``): a Context field still at its default takes the file's
value, a value a caller gave stays.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError

from phasegraph.nodes.errors import ConfigurationError
from phasegraph.nodes.project_data import MAX_NESTING, leave_out, line_of, located, problem_of, too_deep
from phasegraph.nodes.project_lines import KeyLines
from phasegraph.tools.config_files import read_config_text
from phasegraph.tools.mcp.config import (
    COMMENT_KEY,
    McpConfigError,
    entry_problems,
    load_services,
    parse_services,
)
from phasegraph.tools.sources import IMPORT_TIMEOUT_SECONDS, ToolPolicy, ToolSources

if TYPE_CHECKING:
    from langchain_mcp_adapters.sessions import Connection

#: The file looked for in the working folder.
FILE_NAME = "phasegraph.toml"
#: The variable naming a project file elsewhere.
ENV_VAR = "PHASEGRAPH_CONFIG"
#: Validations of one file, each without the values the one before found wrong (one is the rule).
_PASSES = 4
PROTOCOL_IDS = ("triggered_phase", "unified", "goal_pursuit", "agent_network", "xml_contract", "planner")
#: The roles a protocol gives a model of their own (``[models] "<protocol>.<role>"``).
ROLES = {
    "planner": ("reviewer",),
    "goal_pursuit": ("context_discovery", "context_refinement", "action_decision", "refinement_analysis"),
}


def _protocol_key(key: str) -> str:
    if key not in PROTOCOL_IDS:
        raise ValueError(f"unknown protocol {key!r}; known: {', '.join(PROTOCOL_IDS)}")
    return key


def _model_key(key: str) -> str:
    protocol, dot, role = key.partition(".")
    if protocol not in PROTOCOL_IDS:
        raise ValueError(f"{key!r}: models are keyed by protocol ({', '.join(PROTOCOL_IDS)})")
    if dot and role not in ROLES.get(protocol, ()):
        roles = ", ".join(ROLES.get(protocol, ())) or "none"
        raise ValueError(f"{key!r}: {protocol} has no role {role!r} (its roles: {roles})")
    return key


# Checked as keys, so a problem's place is the key itself (its line), not the whole table.
ProtocolKey = Annotated[str, AfterValidator(_protocol_key)]
ModelKey = Annotated[str, AfterValidator(_model_key)]


class ProjectFile(BaseModel):
    """What ``phasegraph.toml`` may hold (unknown keys are refused)."""

    model_config = ConfigDict(extra="forbid", strict=True)  # TOML is typed: "3" is no number

    model: str | None = Field(
        default=None, description="Model spec every protocol uses unless [models] says."
    )
    workspace: str | None = Field(
        default=None, description="Workspace folder of the built-in file tools (relative to this file)."
    )
    models: dict[ModelKey, str] = Field(
        default_factory=dict,
        description="Model per protocol ('planner') or per role ('planner.reviewer', "
        "'goal_pursuit.refinement_analysis').",
    )
    protocols: dict[ProtocolKey, dict[str, Any]] = Field(
        default_factory=dict, description="Each protocol's settings (its Context fields), 'tools' included."
    )
    mcp_servers: dict[str, Any] | str = Field(  # an entry's shape is checked with its keys' lines
        default_factory=dict,
        description="MCP servers: tables shaped as mcp_servers.json entries, or the path of such a file.",
    )
    python_tools: dict[str, str] = Field(
        default_factory=dict, description="Python tools: source name = 'package.module:attr'."
    )
    tools: dict[str, ToolPolicy] = Field(
        default_factory=dict, description="Tool policies by tool name, glob ('git.*') or MCP server name."
    )
    connect_timeout_seconds: float = Field(default=20.0, gt=0, description="Longest MCP server start.")
    call_timeout_seconds: float = Field(
        default=30.0, gt=0, description="Longest MCP call (unless a policy says)."
    )
    import_timeout_seconds: float = Field(
        default=IMPORT_TIMEOUT_SECONDS, gt=0, description="Longest import of a Python tool module."
    )

    def model_for(self, protocol: str, role: str = "") -> str | None:
        """The model a protocol (or one of its roles) uses: the role's, the protocol's, the default."""
        if role and f"{protocol}.{role}" in self.models:
            return self.models[f"{protocol}.{role}"]
        return self.models.get(protocol, self.model)


@dataclass(frozen=True)
class Project:
    """A read, valid project file and where it lies."""

    path: Path
    file: ProjectFile
    lines: KeyLines = field(compare=False)  # where the text it was read from writes each key
    #: Keys the file writes whose value has a problem, left out of ``file`` (see ``examine_project``).
    left_out: frozenset[tuple[str, ...]] = field(default=frozenset(), compare=False)

    @property
    def folder(self) -> Path:
        """The folder relative paths of the file start at."""
        return self.path.parent

    def sources(self, workspace: Path) -> ToolSources:
        """The tool sources and rules, ``${workspace}`` standing for ``workspace`` in stdio servers."""
        try:
            connections = self.connections(workspace)
        except McpConfigError as exc:
            raise ConfigurationError(str(exc)) from None
        return ToolSources(
            mcp_servers=connections,
            python_tools=dict(self.file.python_tools),
            policies=dict(self.file.tools),
            connect_timeout_seconds=self.file.connect_timeout_seconds,
            call_timeout_seconds=self.file.call_timeout_seconds,
            import_timeout_seconds=self.file.import_timeout_seconds,
            folder=self.folder,
        )

    def connections(self, workspace: Path) -> dict[str, Connection]:
        """The MCP servers, checked; a bad one raises ``McpConfigError`` naming its key and line."""
        servers = self.file.mcp_servers
        if isinstance(servers, str):
            try:
                return load_services(self.folder / servers, workspace)
            except McpConfigError as exc:
                raise McpConfigError(f"{self.where(('mcp_servers',))}: {exc}") from None
        connections: dict[str, Connection] = {}
        for name, entry in servers.items():  # one at a time, so a problem names its entry's line
            if name != COMMENT_KEY:
                where = self.where(("mcp_servers", name))
                connections |= parse_services({name: entry}, where, self.folder, workspace)
        return connections

    def where(self, key: tuple[str, ...]) -> str:
        """``file:line: dotted.key`` for a problem with ``key``."""
        return located(self.path.name, self.lines.line(key), key)

    def model_for(self, protocol: str, role: str = "") -> str | None:
        """The model of a protocol, or of one of its roles.

        The role's, else ``[protocols.<id>] model``, ``[models] <id>``, the top-level ``model``; a
        relative ``scripted:`` path starts at the file's folder.
        """
        table = self.file.protocols.get(protocol, {})
        role_spec = self.file.models.get(f"{protocol}.{role}") if role else None
        spec = role_spec or table.get("model") or self.file.model_for(protocol)
        if not isinstance(spec, str):
            return None
        kind, _, path = spec.partition(":")
        if kind == "scripted" and path and path != "demo" and not Path(path).is_absolute():
            return f"scripted:{self.folder / path}"
        return spec

    def settings(self, protocol: str) -> dict[str, Any]:
        """The protocol's settings as the file gives them (``model`` and ``workspace`` included)."""
        found = dict(self.file.protocols.get(protocol, {}))
        model = self.model_for(protocol)
        if model is not None:
            found["model"] = model
        workspace = found.get("workspace", self.file.workspace)
        if workspace is not None:
            found["workspace"] = str(self.folder / workspace)  # absolute stays absolute
        return found


def setting_problem(
    project: Project, protocol: str, key: str, fields: Mapping[str, Any], forbidden: frozenset[str]
) -> str | None:
    """Why ``[protocols.<protocol>] key`` cannot be set (``None``: it can)."""
    if key in forbidden or "SkipJsonSchema" in str(getattr(fields.get(key), "type", "")):
        return (
            f"{project.where(('protocols', protocol, key))}: set by the server or the caller, not a project"
        )
    if key not in fields:
        settable = ", ".join(sorted(k for k in fields if k not in forbidden))
        where = project.where(("protocols", protocol, key))
        return f"{where}: {protocol} has no such setting (it has: {settable})"
    return None


_cache: dict[Path, tuple[tuple[int, int, int], Project]] = {}


def project_path(explicit: str | Path | None = None) -> Path | None:
    """The project file in force: ``explicit``, else ``PHASEGRAPH_CONFIG``, else ``./phasegraph.toml``."""
    named = explicit or os.environ.get(ENV_VAR, "")
    if named:
        return _STARTED_IN / Path(named).expanduser()  # an absolute path stays itself
    found = _STARTED_IN / FILE_NAME
    return found if found.is_file() else None


def load_project(explicit: str | Path | None = None) -> Project | None:
    """The project in force, read once per change of the file; ``None`` when there is none.

    Raises:
        ConfigurationError: The file is missing (when named), not TOML, or breaks a rule; the
            message names the first problem's key and line (``project_problems`` lists them all).
    """
    path = project_path(explicit)
    if path is None:
        return None
    try:
        found = path.stat()
    except OSError:
        raise ConfigurationError(f"project file {str(path)!r} does not exist") from None
    # size and inode too: an edit within one tick of a coarse clock keeps the time stamp
    stamp = (found.st_mtime_ns, found.st_size, found.st_ino)
    cached = _cache.get(path)
    if cached is not None and cached[0] == stamp:
        return cached[1]
    project, problems = examine_project(path)
    if project is None or problems:
        more = f" (and {len(problems) - 1} more: phasegraph config check)" if len(problems) > 1 else ""
        raise ConfigurationError(f"{problems[0]}{more}")
    _cache[path] = (stamp, project)
    return project


def project_problems(path: Path) -> list[str]:
    """Every problem of the file at ``path``, each as ``file:line: key: what is wrong``."""
    return examine_project(path)[1]


def examine_project(path: Path) -> tuple[Project | None, list[str]]:
    """The project the file at ``path`` holds, and every problem of its shape, in one pass.

    A value with a problem is left out of the project (its key is in ``left_out``), so the checks that
    read a valid project (protocol settings, scripts, Python tools, ``[tools]`` rules) still see the
    rest. The project is ``None`` when the file cannot be read as TOML (one problem then).
    """
    try:
        text, data = _read(path)
    except ConfigurationError as exc:
        return None, [str(exc)]
    lines = KeyLines(text)
    problems: list[str] = []
    left_out: set[tuple[str, ...]] = set()
    while (deep := too_deep(data)) is not None:
        key = deep[:3]  # the setting whose value nests, not 33 keys
        problems.append(
            f"{located(path.name, lines.line(deep), key)}: nested deeper than {MAX_NESTING} levels"
        )
        removed = leave_out(data, key, empty_too=True)
        if not removed:  # nothing was taken out: the next look would find the same
            return None, problems
        left_out.add(removed)
    for _ in range(_PASSES):
        try:
            file = ProjectFile.model_validate(data)
            break
        except ValidationError as exc:
            for error in exc.errors():
                problem = problem_of(path.name, lines, error)
                if problem not in problems:  # found again by a later pass
                    problems.append(problem)
                left_out.add(leave_out(data, error["loc"]))
    else:
        return None, problems
    file = _servers_checked(Project(path, file, lines), problems, left_out)
    return Project(path, file, lines, frozenset(left_out)), sorted(problems, key=line_of)


def _servers_checked(project: Project, problems: list[str], left_out: set[tuple[str, ...]]) -> ProjectFile:
    """The project's file without the MCP server entries that have a problem, each problem listed.

    The file's folder stands in for a run's workspace. Each problem of an entry is at its own key (a
    misspelt key at its line, not at the table's).
    """
    servers, folder = project.file.mcp_servers, project.folder
    if isinstance(servers, str):
        try:
            load_services(folder / servers, folder)
        except McpConfigError as exc:
            problems.append(f"{project.where(('mcp_servers',))}: {exc}")
            left_out.add(("mcp_servers",))
            return project.file.model_copy(update={"mcp_servers": {}})
        return project.file
    good: dict[str, Any] = {}
    for name, entry in servers.items():
        found = entry_problems(name, entry, folder, folder) if name != COMMENT_KEY else []
        for problem in found:
            key = ("mcp_servers", name) if problem.key is None else ("mcp_servers", name, problem.key)
            problems.append(f"{project.where(key)}: {problem}")
        if found:
            left_out.add(("mcp_servers", name))
        else:
            good[name] = entry
    return project.file.model_copy(update={"mcp_servers": good}) if good != servers else project.file


def _read(path: Path) -> tuple[str, dict[str, Any]]:
    """The text of the file at ``path`` and its TOML data.

    Raises:
        ConfigurationError: The file cannot be read (missing, no regular file, too large, not UTF-8) or
            is not TOML.
    """
    try:
        text = read_config_text(path)
    except (OSError, UnicodeDecodeError) as exc:
        why = getattr(exc, "strerror", None) or type(exc).__name__
        raise ConfigurationError(f"{path.name}: cannot be read ({why})") from None
    try:
        return text, tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigurationError(f"{path.name}: not valid TOML: {exc}") from None
    except RecursionError:  # tomllib recurses once per level of nested arrays and inline tables
        raise ConfigurationError(f"{path.name}: nested deeper than {MAX_NESTING} levels") from None


#: Where a relative ``PHASEGRAPH_CONFIG`` and ``./phasegraph.toml`` are looked for: the folder the
#: process started in (read once; under ``langgraph dev`` a run may not ask the OS).
_STARTED_IN = Path.cwd()
