from pathlib import Path
from typing import Annotated

import pytest
from langchain_core.tools import InjectedToolArg, tool

from phasegraph.tools import ToolContext, ToolRegistry, ToolRunner, default_registry


@pytest.fixture
def runner(workspace: Path) -> ToolRunner:
    return ToolRunner(default_registry(), ToolContext(workspace=workspace, project_id="p"))


async def test_list_and_read_files(runner: ToolRunner):
    listed = await runner.run("list_files", {"path": "docs"})
    assert listed.status == "ok"
    assert listed.output.splitlines() == ["docs/roadmap.md", "docs/team.md"]
    read = await runner.run("read_file", {"path": "./docs/roadmap.md"})
    assert read.status == "ok" and "Milestone 2" in read.output
    assert read.duration_ms >= 0


async def test_search_files_finds_lines(runner: ToolRunner):
    found = await runner.run("search_files", {"query": "milestone", "path": "docs"})
    assert found.status == "ok"
    assert "docs/roadmap.md:3: ## Milestone 1 — March" in found.output.splitlines()


async def test_a_raising_tool_becomes_an_error_result(workspace: Path):
    @tool
    def explode(reason: str) -> str:
        """Always fails."""
        raise RuntimeError(f"boom: {reason}")

    result = await ToolRunner(ToolRegistry([explode]), ToolContext(workspace, "p")).run(
        "explode", {"reason": "x"}
    )
    assert result.status == "error"
    assert result.error == "RuntimeError: boom: x"
    assert result.output is None


async def test_unknown_tool_is_an_error_naming_the_available_ones(runner: ToolRunner):
    result = await runner.run("delete_everything", {})
    assert result.status == "error"
    assert "unknown tool 'delete_everything'" in result.error
    assert "list_files, read_file, search_files" in result.error


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        ({}, "path: Field required"),
        ({"path": 5}, "path: Input should be a valid string"),
        ({"path": "docs/roadmap.md", "mode": "rb"}, "unexpected argument(s) ['mode']"),
    ],
)
async def test_bad_arguments_are_error_results(runner: ToolRunner, args, fragment):
    result = await runner.run("read_file", args)
    assert result.status == "error"
    assert fragment in result.error


@pytest.mark.parametrize("path", ["../outside.txt", "/etc/passwd", "docs/../../outside.txt"])
async def test_paths_escaping_the_workspace_are_refused(runner: ToolRunner, workspace: Path, path: str):
    (workspace.parent / "outside.txt").write_text("secret", encoding="utf-8")
    result = await runner.run("read_file", {"path": path})
    assert result.status == "error"
    assert "outside the workspace" in result.error


async def test_symlinks_out_of_the_workspace_are_not_followed(runner: ToolRunner, workspace: Path):
    secret = workspace.parent / "secret.txt"
    secret.write_text("the secret milestone", encoding="utf-8")
    (workspace / "docs" / "link.txt").symlink_to(secret)
    read = await runner.run("read_file", {"path": "docs/link.txt"})
    assert read.status == "error" and "outside the workspace" in read.error
    searched = await runner.run("search_files", {"query": "secret"})
    assert searched.output == "no matches for 'secret'"


async def test_tools_without_a_context_argument_still_run(workspace: Path):
    @tool
    def add(a: int, b: int) -> int:
        """Add two numbers."""
        return a + b

    result = await ToolRunner(ToolRegistry([add]), ToolContext(workspace, "p")).run("add", {"a": 2, "b": 3})
    assert result.status == "ok" and result.output == "5"


def test_registry_refuses_two_tools_with_one_name():
    registry = default_registry()
    with pytest.raises(ValueError, match="already registered"):
        registry.register(next(iter(registry)))


def test_the_default_trace_store_keeps_only_recent_requests():
    from phasegraph.nodes.trace import DEFAULT_TRACES, MemoryTraceStore, TraceEntry

    assert isinstance(DEFAULT_TRACES, MemoryTraceStore) and DEFAULT_TRACES.max_requests <= 1_000
    store = MemoryTraceStore(max_requests=3)
    for n in range(5):
        store.append(TraceEntry(type="tool_call", request_id=f"r{n}"))
    store.append(TraceEntry(type="tool_result", request_id="r2"))  # r2 is written again: recent
    store.append(TraceEntry(type="tool_call", request_id="r5"))
    assert store.request_ids() == ["r4", "r2", "r5"]
    assert [len(store.get(f"r{n}")) for n in range(6)] == [0, 0, 2, 0, 1, 1]


async def test_tool_errors_name_files_relative_to_the_workspace_and_it_by_a_mark(workspace: Path):
    @tool
    def open_missing(name: str, *, context: Annotated[ToolContext, InjectedToolArg]) -> str:
        """Opens a file that is not there (the OSError names its absolute path)."""
        return (context.workspace.resolve() / "docs" / name).read_text()

    @tool
    def fail_loudly(*, context: Annotated[ToolContext, InjectedToolArg]) -> str:
        """Fails with an arbitrary exception naming the workspace root."""
        raise RuntimeError(f"cannot index {context.workspace.absolute()}")

    runner = ToolRunner(ToolRegistry([open_missing, fail_loudly]), ToolContext(workspace, "p"))
    missing = await runner.run("open_missing", {"name": "gone.md"})
    assert missing.status == "error" and "'docs/gone.md'" in missing.error  # as the tools take paths
    loud = await runner.run("fail_loudly", {})
    assert loud.status == "error" and loud.error == "RuntimeError: cannot index [workspace]"
    for result in (missing, loud):
        assert str(workspace) not in result.error and str(workspace.resolve()) not in result.error


async def test_a_masked_error_keeps_what_the_tool_said_true(workspace: Path):
    """The workspace's path read "." once, so mcp-server-git's refusal of "." read "'.' is outside '.'"."""

    @tool
    def check_repo(repo_path: str, *, context: Annotated[ToolContext, InjectedToolArg]) -> str:
        """Refuses a repository path outside the workspace, as mcp-server-git does."""
        root = context.workspace.resolve()
        raise ValueError(
            f"Repository path '{repo_path}' is outside the allowed repository '{root}' "
            f"(not {root}2, {root}.bak or /other{root}); see {root}."
        )

    runner = ToolRunner(ToolRegistry([check_repo]), ToolContext(workspace, "p"))
    refused = await runner.run("check_repo", {"repo_path": "."})
    root = workspace.resolve()
    assert refused.error == (
        "Repository path '.' is outside the allowed repository '[workspace]' "
        f"(not {root}2, {root}.bak or /other{root}); see [workspace]."
    )  # only the workspace's own path is masked: a longer path that starts the same is another one


def test_registry_schemas_follow_registrations():
    registry = default_registry()
    assert [s["function"]["name"] for s in registry.schemas()] == ["list_files", "read_file", "search_files"]

    @tool
    def shout(text: str) -> str:
        """Repeat loudly."""
        return text.upper()

    registry.register(shout)
    assert [s["function"]["name"] for s in registry.schemas()][-1] == "shout"
    # the injected context argument is never offered to the model
    assert "context" not in registry.schemas()[0]["function"]["parameters"]["properties"]
