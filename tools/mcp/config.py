"""Which MCP servers ("services") a run may call: a ``mcp_servers.json`` file, or the bundled demo.

The file has the shape ``MultiServerMCPClient`` takes, one entry per service::

    {"demo": {"transport": "stdio", "command": "${python}",
              "args": ["-m", "phasegraph.tools.mcp.demo_server"]},
     "search": {"transport": "streamable_http", "url": "http://127.0.0.1:8931/mcp"}}

Service names become XML tags in the model's replies, so they must be tag-safe and must not be one
of the contract's own tags. In a stdio entry's ``command``, ``args`` and ``cwd``, ``${python}`` stands
for this interpreter and ``${workspace}`` for the run's workspace; a relative ``cwd`` is relative to
the file's folder. ``$comment`` keys (at the top or in an entry) are documentation and are dropped.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from phasegraph.tools.config_files import read_config_text

if TYPE_CHECKING:  # typed dicts only: reading a services file does not load the MCP SDK
    from langchain_mcp_adapters.sessions import (
        Connection,
        SSEConnection,
        StdioConnection,
        StreamableHttpConnection,
    )

#: What a service name may look like: it becomes an XML tag.
SERVICE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*")
#: Tags of the XML contract itself, which no service may take.
RESERVED_NAMES = frozenset({"think", "parallel", "sequential", "result", "execute_tools"})
#: Documentation keys, ignored wherever they appear.
COMMENT_KEY = "$comment"
#: The documented example file (a stdio demo and a streamable_http entry).
EXAMPLE_CONFIG = Path(__file__).resolve().parent / "mcp_servers.example.json"

_HTTP_ALIASES = {
    "streamable_http": "streamable_http",
    "streamable-http": "streamable_http",
    "http": "streamable_http",
}
#: Valid values of the keys an entry needs, to check its other keys when one of these is wrong.
_STAND_INS = {"command": "command", "url": "http://stand-in"}
_KEYS = {
    "stdio": {"transport", "command", "args", "env", "cwd"},
    "streamable_http": {"transport", "url", "headers", "timeout", "sse_read_timeout"},
    "sse": {"transport", "url", "headers", "timeout", "sse_read_timeout"},
}


class McpConfigError(ValueError):
    """The services file cannot be read or breaks a rule; the message names the file and the entry."""


class EntryError(ValueError):
    """One problem of one service entry, at ``key`` of the entry (``None``: the entry as a whole)."""

    def __init__(self, message: str, key: str | None = None) -> None:
        super().__init__(message)
        self.key = key


def default_services(workspace: Path) -> dict[str, Connection]:
    """The bundled demo server over stdio, its file tools confined to ``workspace``."""
    args = ["-m", "phasegraph.tools.mcp.demo_server", "--root", str(workspace.resolve())]
    demo: StdioConnection = {"transport": "stdio", "command": sys.executable, "args": args}
    return {"demo": demo}


def load_services(path: str | Path | None, workspace: Path) -> dict[str, Connection]:
    """The services configured in ``path``, validated; with ``path`` None, the bundled demo.

    Raises:
        McpConfigError: The file is missing, no regular file, too large, not JSON, or an entry is invalid.
    """
    if path is None:
        return default_services(workspace)
    path = Path(path)
    try:
        data = json.loads(read_config_text(path))
    except OSError as exc:
        raise McpConfigError(f"{path.name}: cannot be read ({exc.strerror or type(exc).__name__})") from None
    except RecursionError:  # json's parser recurses once per level
        raise McpConfigError(f"{path.name}: nested too deeply to read") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        where = f" (line {exc.lineno}, column {exc.colno})" if isinstance(exc, json.JSONDecodeError) else ""
        raise McpConfigError(f"{path.name}: not valid JSON{where}") from None
    return parse_services(data, path.name, path.parent.resolve(), workspace)


def parse_services(data: Any, where: str, folder: Path, workspace: Path) -> dict[str, Connection]:
    """The services of an ``mcp_servers.json``-shaped object, validated; ``where`` names it in errors.

    Relative ``cwd`` entries start at ``folder``. Raises ``McpConfigError`` naming the first bad entry and
    every problem it has.
    """
    if not isinstance(data, dict):
        raise McpConfigError(f"{where}: expected an object mapping service names to servers")
    entries = {name: entry for name, entry in data.items() if name != COMMENT_KEY}
    if not entries:
        raise McpConfigError(f"{where}: defines no service")
    services: dict[str, Connection] = {}
    for name, entry in entries.items():
        try:
            services[name] = connection(name, entry, folder, workspace)
        except EntryError:
            problems = "; ".join(map(str, entry_problems(name, entry, folder, workspace)))
            raise McpConfigError(f"{where}: service {name!r}: {problems}") from None
    return services


def connection(name: str, entry: Any, folder: Path, workspace: Path) -> Connection:
    """The connection of one service entry, ``${python}`` and ``${workspace}`` put in.

    Raises:
        EntryError: The entry's first problem (``entry_problems`` lists them all).
    """
    placeholders = {"${python}": sys.executable, "${workspace}": str(workspace.resolve())}
    return _connection(name, entry, placeholders, folder)


def entry_problems(name: str, entry: Any, folder: Path, workspace: Path) -> list[EntryError]:
    """Every problem of one service entry, each at its key where it has one.

    The entry is checked again without each key found wrong (a required one stood in for), so a second
    misspelt key or a bad value after it is found too; a problem of the entry as a whole (its name, its
    shape, its transport) ends the search.
    """
    problems: list[EntryError] = []
    entry = dict(entry) if isinstance(entry, dict) else entry
    while True:
        try:
            connection(name, entry, folder, workspace)
            return problems
        except EntryError as exc:
            if exc.key is not None and exc.key in {found.key for found in problems}:
                return problems  # the transport, left out: nothing more can be judged
            problems.append(exc)
            if exc.key in _STAND_INS:
                entry[exc.key] = _STAND_INS[exc.key]
            elif exc.key is not None and exc.key in entry:
                del entry[exc.key]
            else:
                return problems


def _connection(name: str, entry: Any, placeholders: dict[str, str], folder: Path) -> Connection:
    _check_name(name)
    if not isinstance(entry, dict):
        raise EntryError(f"expected an object, found {type(entry).__name__}")
    entry = {key: value for key, value in entry.items() if key != COMMENT_KEY}
    raw = entry.get("transport")
    transport = _HTTP_ALIASES.get(raw, raw) if isinstance(raw, str) else raw
    if transport not in _KEYS:
        raise EntryError(
            f"'transport' must be 'stdio', 'streamable_http' or 'sse', found {raw!r}", "transport"
        )
    unknown = [key for key in entry if key not in _KEYS[transport]]
    if unknown:
        takes = ", ".join(sorted(_KEYS[transport]))
        raise EntryError(f"unknown key {unknown[0]!r} (a {transport} entry takes {takes})", unknown[0])
    if transport == "stdio":
        return _stdio(entry, placeholders, folder)
    return _http(transport, entry)


def _check_name(name: str) -> None:
    if not SERVICE_NAME.fullmatch(name):
        raise EntryError(
            "a service name becomes an XML tag: a letter or '_', then letters, digits, '_' or '-'"
        )
    if name in RESERVED_NAMES or name.lower().startswith("xml"):
        raise EntryError("this name is reserved by the XML contract (and names may not start with 'xml')")


def _stdio(entry: dict[str, Any], placeholders: dict[str, str], folder: Path) -> StdioConnection:
    command, args = entry.get("command"), entry.get("args", [])
    if not isinstance(command, str) or not command.strip():
        raise EntryError("'command' must be a non-empty string", "command")
    if not isinstance(args, list) or not all(isinstance(arg, str) for arg in args):
        raise EntryError("'args' must be a list of strings", "args")
    connection: StdioConnection = {
        "transport": "stdio",
        "command": _substitute(command, placeholders),
        "args": [_substitute(arg, placeholders) for arg in args],
    }
    if "env" in entry:
        connection["env"] = _string_map("env", entry["env"])
    if "cwd" in entry:
        if not isinstance(entry["cwd"], str):
            raise EntryError("'cwd' must be a string", "cwd")
        connection["cwd"] = folder / _substitute(entry["cwd"], placeholders)  # absolute stays absolute
    return connection


def _http(transport: str, entry: dict[str, Any]) -> StreamableHttpConnection | SSEConnection:
    url = entry.get("url")
    if not isinstance(url, str) or not re.match(r"https?://[^/\s]+", url):
        raise EntryError(f"'url' must be an http:// or https:// address, found {url!r}", "url")
    for key in ("timeout", "sse_read_timeout"):
        value = entry.get(key, 1)
        if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
            raise EntryError(f"{key!r} must be a positive number of seconds, found {value!r}", key)
    connection: StreamableHttpConnection | SSEConnection
    if transport == "sse":
        connection = {"transport": "sse", "url": url}
    else:
        connection = {"transport": "streamable_http", "url": url}
    if "timeout" in entry:
        connection["timeout"] = float(entry["timeout"])
    if "sse_read_timeout" in entry:
        connection["sse_read_timeout"] = float(entry["sse_read_timeout"])
    if "headers" in entry:
        connection["headers"] = _string_map("headers", entry["headers"])
    return connection


def _string_map(key: str, value: Any) -> dict[str, str]:
    if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
        raise EntryError(f"{key!r} must be an object of strings", key)
    return dict(value)


def _substitute(text: str, placeholders: dict[str, str]) -> str:
    for placeholder, value in placeholders.items():
        text = text.replace(placeholder, value)
    return text
