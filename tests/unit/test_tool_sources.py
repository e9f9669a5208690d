"""Tool sources opened for a run: real MCP servers over stdio, Python tools by import path, globs, policies.

Every source is named in a real ``phasegraph.toml`` and opened by the run's Context, as a run does.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from phasegraph.nodes.approval import needs_approval
from phasegraph.nodes.errors import ConfigurationError
from phasegraph.nodes.triggered_phase.context import TriggeredPhaseContext
from phasegraph.tools import ToolRegistry
from phasegraph.tools.sources import policy_of, source_of
from tests.tool_checks import HANGING_SERVER, left_running, script_server, server_processes
from tests.tool_projects import demo_server, git_repository, git_server, write_project

Opener = Callable[..., Any]


@pytest.fixture
async def opened(tmp_path: Path, workspace: Path) -> AsyncIterator[Opener]:
    """Open the tools of a project file holding ``data`` (closed after the test)."""
    contexts: list[TriggeredPhaseContext] = []

    async def _open(data: dict[str, Any], **fields: Any) -> tuple[TriggeredPhaseContext, ToolRegistry]:
        path = write_project(tmp_path, {"model": "scripted:demo", **data}, name=f"p{len(contexts)}.toml")
        context = TriggeredPhaseContext(project_file=str(path), workspace=str(workspace), **fields)
        contexts.append(context)
        return context, await context.open_tools()

    yield _open
    for context in contexts:
        await context.close_tools()


async def test_the_git_servers_tools_are_git_dot_names_with_their_json_schemas(
    opened: Opener, tmp_path: Path
):
    repo = git_repository(tmp_path / "repo")
    _, registry = await opened({"mcp_servers": {"git": git_server(repo)}})
    names = registry.names()
    assert {"git.git_log", "git.git_status", "git.git_show", "list_files", "read_file"} <= set(names)
    assert not {"git_log", "git_status"} & set(names)  # never under the bare name
    log = registry.get("git.git_log")
    assert (
        log is not None and source_of(log) == "mcp:git" and source_of(registry.get("read_file")) == "builtin"
    )
    schema = log.args_schema
    assert isinstance(schema, dict)
    assert schema["properties"]["repo_path"]["type"] == "string" and "repo_path" in schema["required"]
    assert "max_count" in schema["properties"]
    output = await log.ainvoke({"repo_path": str(repo), "max_count": 5})
    assert "second commit" in output and "first commit" in output


async def test_python_tools_by_import_path_a_function_a_base_tool_and_a_list(opened: Opener):
    sources = {
        "count": "tests.user_tools:word_count",
        "loud": "tests.user_tools:shout",
        "all": "tests.user_tools:TOOLS",
    }
    with pytest.raises(ConfigurationError, match="two tools are named 'shout'"):
        await opened({"python_tools": sources})  # shout twice: by itself and in the list
    del sources["loud"]
    _, registry = await opened({"python_tools": sources})
    assert {"word_count", "shout", "archive_everything", "list_files"} <= set(registry.names())
    assert [source_of(registry.get(n)) for n in ("word_count", "shout")] == ["python:count", "python:all"]
    assert await registry.get("word_count").ainvoke({"text": "three little words"}) == "3 words"
    assert await registry.get("shout").ainvoke({"text": "hi"}) == "HI"


@pytest.mark.parametrize(
    ("target", "why"),
    [
        ("tests.user_tools", "'tests.user_tools' must look like 'package.module:attr'"),
        ("tests.no_such_module:tool", "cannot import 'tests.no_such_module'"),
        ("tests.user_tools:missing", "'tests.user_tools' has no 'missing'"),
        (
            "tests.user_tools:NOT_A_TOOL",
            "must be a LangChain BaseTool, a list of them or a function; found int",
        ),
    ],
)
async def test_a_python_tool_source_that_does_not_load_is_refused(opened: Opener, target: str, why: str):
    with pytest.raises(ConfigurationError) as caught:
        await opened({"python_tools": {"mine": target}})
    assert str(caught.value).startswith("python tool source 'mine': ") and why in str(caught.value)


async def test_a_server_whose_command_does_not_exist_is_unavailable_and_the_others_work(opened: Opener):
    ghost = {"transport": "stdio", "command": "phasegraph-ghost-server", "args": ["--stdio"]}
    context, registry = await opened({"mcp_servers": {"ghost": ghost, "demo": demo_server()}})
    assert context.unavailable_tools() == {"ghost": "command not found: phasegraph-ghost-server"}
    assert not [n for n in registry.names() if n.startswith("ghost.")]
    assert await registry.get("demo.calculate").ainvoke({"expression": "6 * 7"}) == "42"


async def test_a_server_whose_command_path_does_not_exist_says_command_not_found(opened: Opener):
    ghost = {"transport": "stdio", "command": "/nonexistent/phasegraph-ghost-server"}
    context, _ = await opened({"mcp_servers": {"ghost": ghost}})
    assert context.unavailable_tools() == {"ghost": "command not found: /nonexistent/phasegraph-ghost-server"}


async def test_a_server_that_never_answers_at_start_is_unavailable_after_the_connect_timeout(
    opened: Opener, tmp_path: Path
):
    hang = script_server(tmp_path, "hang", HANGING_SERVER)
    started = time.monotonic()
    context, registry = await opened(
        {
            "connect_timeout_seconds": 1,
            "mcp_servers": {"hang": hang},
            "python_tools": {"count": "tests.user_tools:word_count"},
        }
    )
    assert time.monotonic() - started < 10
    assert context.unavailable_tools() == {"hang": "no answer within 1 s"}
    assert not [n for n in registry.names() if n.startswith("hang.")]
    assert await registry.get("word_count").ainvoke({"text": "still here"}) == "2 words"
    assert left_running("hang_server.py") == []  # the silent server was not left behind


async def test_a_python_tool_named_like_a_builtin_is_refused_naming_both_sources(opened: Opener):
    with pytest.raises(ConfigurationError) as caught:
        await opened({"python_tools": {"mine": "tests.clashing_tools:read_file"}})
    assert str(caught.value) == "two tools are named 'read_file': one from builtin, one from python:mine"


async def test_a_python_tool_named_like_an_mcp_tool_is_refused_and_no_server_is_left(opened: Opener):
    data = {
        "mcp_servers": {"demo": demo_server()},
        "python_tools": {"mine": "tests.clashing_tools:calculate"},
    }
    with pytest.raises(ConfigurationError) as caught:
        await opened(data)
    assert (
        str(caught.value) == "two tools are named 'demo.calculate': one from python:mine, one from mcp:demo"
    )
    assert left_running("phasegraph.tools.mcp.demo_server") == []


async def test_protocol_tool_globs_select_and_an_unknown_name_is_refused(opened: Opener, tmp_path: Path):
    repo = git_repository(tmp_path / "repo")
    sources = {
        "mcp_servers": {"git": git_server(repo)},
        "python_tools": {"count": "tests.user_tools:word_count"},
    }
    chosen = {"protocols": {"triggered_phase": {"tools": ["git.git_l*", "git.git_s*", "word_count"]}}}
    first, registry = await opened({**sources, **chosen})
    assert sorted(registry.names()) == ["git.git_log", "git.git_show", "git.git_status", "word_count"]
    second, every_git = await opened(sources, tools=["git.*"])  # the Context field, as a caller passes it
    assert every_git.names() and all(n.startswith("git.") for n in every_git.names())
    assert "git.git_log" in every_git.names()
    for context in (first, second):
        await context.close_tools()
    assert left_running("mcp_server_git") == []
    with pytest.raises(ConfigurationError, match=r"unknown tool\(s\) \['git\.nope'\]"):
        await opened(sources, tools=["git.*", "git.nope"])
    assert left_running("mcp_server_git") == []  # the refused run's server was closed


async def test_policies_by_server_glob_and_exact_name_the_exact_name_last(opened: Opener, tmp_path: Path):
    repo = git_repository(tmp_path / "repo")
    policies = {
        "git.git_log": {"confirm": False},
        "git": {"confirm": True},
        "git.git_s*": {"timeout_seconds": 2},
        "word_count": {"max_calls_per_turn": 1, "normalizers": {"text": "lower"}},
    }
    data = {
        "mcp_servers": {"git": git_server(repo)},
        "python_tools": {"count": "tests.user_tools:word_count"},
        "tools": policies,
    }
    _, registry = await opened(data)
    log, status, diff = (registry.get(n) for n in ("git.git_log", "git.git_status", "git.git_diff"))
    assert (policy_of(log).confirm, policy_of(status).confirm, policy_of(diff).confirm) == (False, True, True)
    assert (policy_of(status).timeout_seconds, policy_of(diff).timeout_seconds) == (2, None)
    assert [needs_approval(registry, n) for n in ("git.git_log", "git.git_diff", "list_files")] == [
        False,
        True,
        False,
    ]
    assert policy_of(registry.get("word_count")).max_calls_per_turn == 1
    same = registry.signature("word_count", {"text": "Two Words"}, "p")
    assert same == registry.signature("word_count", {"text": "two words"}, "p")
    assert same != registry.signature("word_count", {"text": "two words"}, "other project")


async def test_closing_the_tools_ends_the_servers_and_opening_again_starts_them(opened: Opener):
    context, _ = await opened({"mcp_servers": {"demo": demo_server()}})
    assert len(server_processes("phasegraph.tools.mcp.demo_server")) == 1  # the check sees a live server
    await context.close_tools()
    assert left_running("phasegraph.tools.mcp.demo_server") == []
    registry = await context.open_tools()
    assert await registry.get("demo.calculate").ainvoke({"expression": "2 + 3"}) == "5"
