"""MCP services against the real demo server, as a subprocess over stdio and over streamable HTTP.

The servers are started once per module (each takes most of a second), so every test here runs on
one module-wide event loop.
"""

import asyncio
import json
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from phasegraph.tools.mcp import EXAMPLE_CONFIG, McpConfigError, McpServices, default_services, load_services
from tests.processes import Process, free_port, listens, running

#: Async tests share the module's loop, on which the module-wide services were opened.
on_module_loop = pytest.mark.asyncio(loop_scope="module")

DEMO_TOOLS = {"list_files", "read_file", "calculate", "slow_echo", "always_fails"}


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A workspace with a file, a folder, and a symlink leading to a secret beside it."""
    base = tmp_path_factory.mktemp("mcp")
    (base / "secret.txt").write_text("do not read", encoding="utf-8")
    workspace = base / "workspace"
    (workspace / "docs").mkdir(parents=True)
    (workspace / "docs" / "notes.md").write_text("# Notes\nhello from the workspace\n", encoding="utf-8")
    (workspace / "escape.txt").symlink_to(base / "secret.txt")
    return workspace


@pytest.fixture(scope="module")
def http_url(root: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The demo server over streamable HTTP, as its own process, stopped at the end of the module."""
    port = free_port()
    log = tmp_path_factory.mktemp("http") / "stderr.txt"
    with running(_demo_over_http(root, port, log), listens(port)):
        yield f"http://127.0.0.1:{port}/mcp"


def _demo_over_http(root: Path, port: int, log: Path) -> Process:
    command = [sys.executable, "-m", "phasegraph.tools.mcp.demo_server", "--root", str(root)]
    return Process([*command, "--transport", "streamable-http", "--port", str(port)], log)


@pytest_asyncio.fixture(scope="module", loop_scope="module", params=["stdio", "streamable_http"])
async def services(request: pytest.FixtureRequest, root: Path) -> AsyncIterator[McpServices]:
    """The demo service, as the bundled default (stdio) or over HTTP."""
    if request.param == "stdio":
        connections = load_services(None, root)
    else:
        connections = {"demo": {"transport": "streamable_http", "url": request.getfixturevalue("http_url")}}
    opened = await McpServices.open(connections, timeout=15)
    assert opened.unavailable == {}
    yield opened
    await opened.close()


async def _call(services: McpServices, tool: str, **args: Any) -> Any:
    return await services.call("demo", tool, args, timeout=5)


@on_module_loop
async def test_catalogue_lists_the_five_tools_with_their_schemas(services: McpServices):
    tools = services.catalogue()["demo"]
    assert set(tools) == DEMO_TOOLS
    assert all(spec.description and spec.input_schema["type"] == "object" for spec in tools.values())
    echo = tools["slow_echo"].input_schema
    assert echo["required"] == ["text", "ms"]
    ms = echo["properties"]["ms"]
    assert (ms["type"], ms["minimum"], ms["maximum"]) == ("integer", 0, 10_000)
    assert "description" in tools["read_file"].input_schema["properties"]["path"]


@on_module_loop
async def test_files_are_read_and_listed_inside_the_root(services: McpServices):
    listed = await _call(services, "list_files")
    assert listed.status == "ok" and listed.output.splitlines() == ["docs/", "escape.txt"]
    read = await _call(services, "read_file", path="docs/notes.md")
    assert read.status == "ok" and "hello from the workspace" in read.output
    assert read.duration_ms > 0


@pytest.mark.parametrize("path", ["../secret.txt", "escape.txt", "/etc/passwd", "docs/../../secret.txt"])
@on_module_loop
async def test_read_file_never_leaves_the_root(services: McpServices, path: str):
    result = await _call(services, "read_file", path=path)
    assert result.status == "error" and "outside the workspace" in result.error
    assert "do not read" not in result.as_text()


@on_module_loop
async def test_list_files_never_leaves_the_root(services: McpServices):
    result = await _call(services, "list_files", path="..")
    assert result.status == "error" and "outside the workspace" in result.error


@pytest.mark.parametrize(
    ("expression", "value"),
    [("(2 + 3) * 4 / 5", "4.0"), ("2 ** 10 % 7", "2"), ("-7 // 2", "-4"), ("+1.5 - -1", "2.5")],
)
@on_module_loop
async def test_calculate_computes_arithmetic(services: McpServices, expression: str, value: str):
    result = await _call(services, "calculate", expression=expression)
    assert (result.status, result.output) == ("ok", value)


@pytest.mark.parametrize(
    ("expression", "why"),
    [
        ("__import__('os').system('echo hacked')", "not allowed"),
        ("().__class__.__bases__", "not allowed"),
        ("[1] * 10", "not allowed"),
        ("'a' * 10", "is not a number"),
        ("True + 1", "is not a number"),
        ("x + 1", "not allowed"),
        ("9**9**9", "too large"),
        ("10 ** 10 ** 10", "too large"),
        ("2 ** 4000", "too large"),
        ("1e308 * 10", "too large"),
        ("1 / 0", "division by zero"),
        ("1 +", "not an arithmetic expression"),
    ],
)
@on_module_loop
async def test_calculate_refuses_anything_else(services: McpServices, expression: str, why: str):
    result = await _call(services, "calculate", expression=expression)
    assert result.status == "error" and why in result.error


@on_module_loop
async def test_slow_echo_calls_run_concurrently(services: McpServices):
    results = await asyncio.gather(*(_call(services, "slow_echo", text=str(n), ms=300) for n in range(4)))
    assert [r.output for r in results] == ["0", "1", "2", "3"]
    durations = [r.duration_ms for r in results]
    # one after the other, the last would wait 1200 ms; side by side each takes about 300
    assert min(durations) >= 300 and max(durations) < 2 * 300


@on_module_loop
async def test_a_failing_tool_gives_an_error_result(services: McpServices):
    result = await _call(services, "always_fails", reason="out of coffee")
    assert result.status == "error" and "out of coffee" in result.error
    assert result.as_text().startswith("ERROR: ")


@on_module_loop
async def test_bad_arguments_give_an_error_result(services: McpServices):
    result = await _call(services, "slow_echo", text="x", ms=20_000)
    assert result.status == "error" and "less than or equal to 10000" in result.error


@on_module_loop
async def test_a_timeout_fails_that_call_alone(services: McpServices):
    late = await services.call("demo", "slow_echo", {"text": "late", "ms": 1000}, timeout=0.2)
    assert late.status == "error" and "no answer within 0.2 s" in late.error
    assert 200 <= late.duration_ms < 900
    after = await _call(services, "calculate", expression="6 * 7")
    assert (after.status, after.output) == ("ok", "42")


@on_module_loop
async def test_unknown_services_tools_and_arguments_are_error_results(services: McpServices):
    assert "unknown service 'nope'" in (await services.call("nope", "x", {}, timeout=1)).error
    assert "has no tool 'nope'" in (await services.call("demo", "nope", {}, timeout=1)).error
    assert "must be a JSON object" in (await services.call("demo", "calculate", [], timeout=1)).error  # type: ignore[arg-type]


@on_module_loop
async def test_one_server_down_leaves_the_others_working(root: Path, http_url: str):
    connections: dict[str, Any] = {
        "web": {"transport": "streamable_http", "url": http_url},
        "closed_port": {"transport": "streamable_http", "url": f"http://127.0.0.1:{free_port()}/mcp"},
        "no_command": {"transport": "stdio", "command": "phasegraph-no-such-command", "args": []},
        "silent": {
            "transport": "stdio",
            "command": sys.executable,
            "args": ["-c", "import sys; sys.stdin.read()"],
        },
        "exits": {"transport": "stdio", "command": sys.executable, "args": ["-c", "pass"]},
    }
    services = await McpServices.open(connections, timeout=0.5)
    try:
        assert set(services.catalogue()) == {"web"}
        assert services.unavailable == {
            "closed_port": "cannot connect (All connection attempts failed)",
            "no_command": "command not found: phasegraph-no-such-command",
            "silent": "no answer within 0.5 s",
            "exits": "the server closed the connection (did it exit? its stderr may say why)",
        }
        down = await services.call("closed_port", "calculate", {"expression": "1"}, timeout=1)
        assert down.status == "error" and "is unavailable: cannot connect" in down.error
        ok = await services.call("web", "calculate", {"expression": "1 + 1"}, timeout=5)
        assert (ok.status, ok.output) == ("ok", "2")
    finally:
        await services.close()


@on_module_loop
async def test_a_service_lost_mid_run_fails_fast_and_alone(root: Path, http_url: str, tmp_path: Path):
    port = free_port()
    server = _demo_over_http(root, port, tmp_path / "doomed.log")
    try:
        server.start(listens(port))
        connections: dict[str, Any] = {
            "web": {"transport": "streamable_http", "url": http_url},
            "doomed": {"transport": "streamable_http", "url": f"http://127.0.0.1:{port}/mcp"},
        }
        services = await McpServices.open(connections, timeout=15)
    finally:
        server.kill()  # gone at once, as a crashed server would be
    try:
        # the transport's failure ends that service's holder task, not the others' (nor the wait)
        lost = await services.call("doomed", "calculate", {"expression": "1"}, timeout=5)
        assert lost.status == "error" and "no longer connected" in lost.error and lost.duration_ms < 2000
        assert services.unavailable["doomed"].startswith("connection lost: cannot connect")
        assert set(services.catalogue()) == {"web"}
        ok = await services.call("web", "calculate", {"expression": "2 * 2"}, timeout=5)
        assert (ok.status, ok.output) == ("ok", "4")
    finally:
        await services.close()


@on_module_loop
async def test_close_works_from_another_task_and_twice(http_url: str):
    connections: dict[str, Any] = {"web": {"transport": "streamable_http", "url": http_url}}
    services = await asyncio.create_task(McpServices.open(connections, timeout=15))
    pending = asyncio.create_task(services.call("web", "slow_echo", {"text": "x", "ms": 2000}, timeout=5))
    await asyncio.sleep(0.1)
    await asyncio.create_task(services.close())
    await services.close()
    cut = await pending
    assert cut.status == "error" and "no longer connected" in cut.error
    after = await services.call("web", "calculate", {"expression": "1"}, timeout=1)
    assert after.status == "error" and "closed" in after.error
    assert services.catalogue() == {}


@on_module_loop
async def test_cancelling_open_leaves_nothing_running():
    connections: dict[str, Any] = {
        "silent": {
            "transport": "stdio",
            "command": sys.executable,
            "args": ["-c", "import sys; sys.stdin.read()"],
        }
    }
    opening = asyncio.create_task(McpServices.open(connections, timeout=30))
    await asyncio.sleep(0.2)
    opening.cancel()
    with pytest.raises(asyncio.CancelledError):
        await opening
    assert "mcp-service-silent" not in {task.get_name() for task in asyncio.all_tasks()}


# -- configuration -----------------------------------------------------------------------------------


def test_no_file_means_the_bundled_demo_over_stdio(tmp_path: Path):
    services = load_services(None, tmp_path)
    assert services == default_services(tmp_path)
    demo = services["demo"]
    assert demo["transport"] == "stdio" and demo["command"] == sys.executable
    assert demo["args"] == ["-m", "phasegraph.tools.mcp.demo_server", "--root", str(tmp_path.resolve())]


def test_the_example_file_is_valid(tmp_path: Path):
    services = load_services(EXAMPLE_CONFIG, tmp_path)
    assert services["demo"]["transport"] == "stdio" and services["demo"]["command"] == sys.executable
    assert services["demo"]["args"][-1] == str(tmp_path.resolve())
    assert services["demo_http"] == {
        "transport": "streamable_http",
        "url": "http://127.0.0.1:8931/mcp",
        "timeout": 10.0,
    }


def test_a_valid_file_is_read_as_connections(tmp_path: Path):
    config = tmp_path / "mcp_servers.json"
    entries = {
        "$comment": "ignored",
        "local-tools": {
            "transport": "stdio",
            "command": "srv",
            "args": ["--x"],
            "cwd": "sub",
            "env": {"A": "1"},
        },
        "_remote": {"transport": "http", "url": "https://example.test/mcp", "headers": {"X-Key": "k"}},
    }
    config.write_text(json.dumps(entries), encoding="utf-8")
    services = load_services(config, tmp_path)
    assert services["local-tools"] == {
        "transport": "stdio",
        "command": "srv",
        "args": ["--x"],
        "cwd": tmp_path.resolve() / "sub",
        "env": {"A": "1"},
    }
    assert services["_remote"] == {
        "transport": "streamable_http",
        "url": "https://example.test/mcp",
        "headers": {"X-Key": "k"},
    }


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("{not json", "mcp_servers.json: not valid JSON (line 1, column 2)"),
        ("[]", "mcp_servers.json: expected an object mapping service names to servers"),
        ("{}", "mcp_servers.json: defines no service"),
        (
            '{"bad name": {"transport": "stdio", "command": "x"}}',
            "service 'bad name': a service name becomes",
        ),
        (
            '{"1st": {"transport": "stdio", "command": "x"}}',
            "service '1st': a service name becomes an XML tag",
        ),
        ('{"parallel": {"transport": "stdio", "command": "x"}}', "service 'parallel': this name is reserved"),
        ('{"xmlthing": {"transport": "stdio", "command": "x"}}', "service 'xmlthing': this name is reserved"),
        ('{"a": "stdio"}', "service 'a': expected an object, found str"),
        ('{"a": {"command": "x"}}', "service 'a': 'transport' must be 'stdio', 'streamable_http' or 'sse'"),
        ('{"a": {"transport": "pigeon"}}', "found 'pigeon'"),
        ('{"a": {"transport": "stdio"}}', "service 'a': 'command' must be a non-empty string"),
        ('{"a": {"transport": "stdio", "command": "x", "args": "-v"}}', "'args' must be a list of strings"),
        (
            '{"a": {"transport": "stdio", "commnd": "x"}}',
            "service 'a': unknown key 'commnd' (a stdio entry takes args, command, cwd, env, transport); "
            "'command' must be a non-empty string",  # every problem of the entry
        ),
        (
            '{"a": {"transport": "stdio", "command": "x", "env": {"A": 1}}}',
            "'env' must be an object of strings",
        ),
        ('{"a": {"transport": "streamable_http", "url": "ftp://h"}}', "'url' must be an http:// or https://"),
        (
            '{"a": {"transport": "sse", "url": "http://h", "timeout": 0}}',
            "'timeout' must be a positive number",
        ),
        (
            '{"a": {"transport": "streamable_http", "command": "x", "url": "http://h"}}',
            "unknown key 'command' (a streamable_http entry takes headers, sse_read_timeout, timeout",
        ),
    ],
)
def test_invalid_files_are_refused_naming_file_and_entry(tmp_path: Path, content: str, message: str):
    config = tmp_path / "mcp_servers.json"
    config.write_text(content, encoding="utf-8")
    with pytest.raises(McpConfigError) as raised:
        load_services(config, tmp_path)
    assert message in str(raised.value)
    assert str(tmp_path) not in str(raised.value)  # messages reach clients: no server paths


def test_a_missing_file_is_refused_by_name(tmp_path: Path):
    with pytest.raises(McpConfigError, match=r"^absent\.json: cannot be read \(No such file or directory\)$"):
        load_services(tmp_path / "absent.json", tmp_path)


async def test_stdio_services_start_where_stderr_is_no_file(tmp_path: Path):
    import io

    from mcp.client import stdio

    client = stdio.stdio_client.__wrapped__  # type: ignore[attr-defined]
    saved = client.__defaults__
    client.__defaults__ = (io.StringIO(),)  # what a Jupyter kernel under a runner gives
    try:
        services = await McpServices.open(load_services(None, tmp_path))
        try:
            assert services.unavailable == {} and "read_file" in services.catalogue()["demo"]
        finally:
            await services.close()
    finally:
        client.__defaults__ = saved
