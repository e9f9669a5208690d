"""Runs with a project's own tools: sources that fail (missing, dying mid-run) and the per-tool policies.

Real servers over stdio (the bundled demo server, a small FastMCP server that dies on its second
call), Python tools from ``tests.user_tools``, a scripted model whose prompts show what it read.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from langgraph.checkpoint.memory import InMemorySaver

from phasegraph.graphs.run import RunResult, run
from phasegraph.nodes.scripted import ScriptedChatModel
from phasegraph.nodes.trace import MemoryTraceStore
from tests.helpers import of_type, scripted, turn
from tests.tool_checks import FRAGILE_SERVER, script_server
from tests.tool_projects import demo_server, write_project

PROTOCOLS = ["triggered_phase", "unified"]
COUNT = {"count": "tests.user_tools:word_count"}


async def _run(
    protocol: str, folder: Path, workspace: Path, project: dict[str, Any], *turns: dict[str, Any]
) -> tuple[RunResult, ScriptedChatModel]:
    """One turn of ``protocol`` on a project file holding ``project``, the model answering ``turns``."""
    path = write_project(folder, {"model": "scripted:demo", **project})
    model = scripted(*turns)
    result = await run(
        protocol, "Go.", project_file=str(path), workspace=str(workspace), chat_model=model,
        traces=MemoryTraceStore(),
    )  # fmt: skip
    assert result.final is not None, result.events
    return result, model


def _read(model: ScriptedChatModel) -> str:
    """Everything the model was shown on its last call."""
    return "\n".join(str(m.content) for m in model.prompts[-1])


async def test_a_missing_server_leaves_the_run_going_with_the_others(tmp_path: Path, workspace: Path):
    servers = {"ghost": {"transport": "stdio", "command": "phasegraph-ghost-server"}, "demo": demo_server()}
    result, _ = await _run(
        "triggered_phase", tmp_path, workspace, {"mcp_servers": servers},
        turn("", ("demo.calculate", {"expression": "6 * 7"})), turn("It is 42."),
    )  # fmt: skip
    assert [(r.name, r.status) for r in of_type(result, "tool_result")] == [("demo.calculate", "ok")]
    assert result.final is not None and result.final.answer == "It is 42."
    registration = next(t for t in result.trace if t.type == "tool_registration")
    assert registration.details["unavailable"] == {"ghost": "command not found: phasegraph-ghost-server"}
    assert "demo.calculate" in [t["name"] for t in registration.details["tools"]]


@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_a_protocols_tools_naming_an_unknown_tool_end_the_run_with_an_error_naming_it(
    protocol: str, tmp_path: Path, workspace: Path
):
    project = {"python_tools": COUNT, "protocols": {protocol: {"tools": ["word_count", "word_cuont"]}}}
    path = write_project(tmp_path, {"model": "scripted:demo", **project})
    result = await run(
        protocol, "Go.", project_file=str(path), workspace=str(workspace), chat_model=scripted(turn("Hi.")),
        traces=MemoryTraceStore(),
    )  # fmt: skip
    assert result.final is None and result.error is not None
    assert "unknown tool(s) ['word_cuont']" in result.error.message
    assert of_type(result, "tool_call") == []


@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_a_server_that_dies_mid_run_fails_the_next_call_naming_it(
    protocol: str, tmp_path: Path, workspace: Path
):
    fragile = script_server(tmp_path, "fragile", FRAGILE_SERVER)
    result, model = await _run(
        protocol, tmp_path, workspace, {"mcp_servers": {"fragile": fragile}},
        turn("", ("fragile.ping", {"text": "one"})), turn("", ("fragile.ping", {"text": "two"})),
        turn("Done."),
    )  # fmt: skip
    first, second = of_type(result, "tool_result")
    assert (first.status, second.status) == ("ok", "error")
    assert second.error.startswith("fragile.ping failed: the server closed the connection")
    assert second.duration_ms < 10_000  # known at once, not at the call timeout
    assert "fragile.ping failed: the server closed the connection" in _read(model)
    assert result.final is not None and result.final.answer == "Done."


@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_max_calls_per_turn_counts_each_user_turn_afresh(
    protocol: str, tmp_path: Path, workspace: Path
):
    path = write_project(
        tmp_path,
        {"model": "scripted:demo", "python_tools": COUNT, "tools": {"word_count": {"max_calls_per_turn": 1}}},
    )
    model = scripted(
        turn("", ("word_count", {"text": "one two"})), turn("Two."),
        turn("", ("word_count", {"text": "three four five"})), turn("Three."),
    )  # fmt: skip
    thread = {"checkpointer": InMemorySaver(), "thread_id": "two turns", "chat_model": model}
    for message in ("Count.", "Count again."):
        result = await run(
            protocol,
            message,
            project_file=str(path),
            workspace=str(workspace),
            traces=MemoryTraceStore(),
            **thread,
        )
        assert [r.status for r in of_type(result, "tool_result")] == ["ok"], message


@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_max_calls_per_turn_refuses_the_second_call_and_the_model_reads_why(
    protocol: str, tmp_path: Path, workspace: Path
):
    project = {"python_tools": COUNT, "tools": {"word_count": {"max_calls_per_turn": 1}}}
    result, model = await _run(
        protocol, tmp_path, workspace, project,
        turn("", ("word_count", {"text": "one two"})), turn("", ("word_count", {"text": "three four five"})),
        turn("Done."),
    )  # fmt: skip
    results = of_type(result, "tool_result")
    assert [r.status for r in results] == ["ok", "error"]
    assert results[1].error == "word_count may run at most 1 time(s) per user turn; this call was not run."
    assert "may run at most 1 time(s) per user turn" in _read(model)


async def test_a_call_past_max_calls_per_turn_made_again_is_refused_by_the_limit_not_as_a_repeat(
    tmp_path: Path, workspace: Path
):
    project = {"python_tools": COUNT, "tools": {"word_count": {"max_calls_per_turn": 1}}}
    again = turn("", ("word_count", {"text": "three four five"}))
    result, _ = await _run(
        "triggered_phase", tmp_path, workspace, project,
        turn("", ("word_count", {"text": "one two"})), again, again, turn("Done."),
    )  # fmt: skip
    limit = "word_count may run at most 1 time(s) per user turn; this call was not run."
    assert [(r.status, r.error) for r in of_type(result, "tool_result")] == [
        ("ok", None),
        *[("error", limit)] * 2,
    ]
    assert of_type(result, "duplicate_tool_call") == []  # it never ran: no "already executed in this turn"


async def test_max_calls_per_turn_holds_for_calls_of_one_unified_message(tmp_path: Path, workspace: Path):
    project = {"python_tools": COUNT, "tools": {"word_count": {"max_calls_per_turn": 1}}}
    calls = (("word_count", {"text": "one two"}), ("word_count", {"text": "three four five"}))
    result, _ = await _run("unified", tmp_path, workspace, project, turn("", *calls), turn("Done."))
    assert sorted(r.status for r in of_type(result, "tool_result")) == ["error", "ok"]


@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_a_slow_mcp_tool_past_its_timeout_is_an_error_result(
    protocol: str, tmp_path: Path, workspace: Path
):
    project = {"mcp_servers": {"demo": demo_server()}, "tools": {"demo.slow_echo": {"timeout_seconds": 0.5}}}
    result, model = await _run(
        protocol, tmp_path, workspace, project,
        turn("", ("demo.slow_echo", {"text": "late", "ms": 5000})), turn("Too slow."),
    )  # fmt: skip
    (late,) = of_type(result, "tool_result")
    assert late.status == "error" and late.error == "demo.slow_echo gave no answer within 0.5 s"
    assert late.duration_ms < 4000
    assert "gave no answer within 0.5 s" in _read(model)


@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_a_slow_python_tool_past_its_timeout_is_an_error_result(
    protocol: str, tmp_path: Path, workspace: Path
):
    project = {"python_tools": {"slow": "tests.slow_tools:nap"}, "tools": {"nap": {"timeout_seconds": 0.3}}}
    result, model = await _run(
        protocol, tmp_path, workspace, project,
        turn("", ("nap", {"seconds": 0.01})), turn("", ("nap", {"seconds": 30})), turn("Too slow."),
    )  # fmt: skip
    quick, late = of_type(result, "tool_result")
    assert quick.status == "ok" and late.status == "error"
    assert late.error == "nap gave no answer within 0.3 s" and late.duration_ms < 4000
    assert "nap gave no answer within 0.3 s" in _read(model)


@pytest.mark.parametrize(("normalized", "runs"), [(True, 1), (False, 2)])
async def test_normalizers_make_two_spellings_of_a_path_one_signature(
    tmp_path: Path, workspace: Path, normalized: bool, runs: int
):
    policy = {"demo.list_files": {"normalizers": {"path": "path"}}} if normalized else {}
    result, _ = await _run(
        "triggered_phase", tmp_path, workspace, {"mcp_servers": {"demo": demo_server()}, "tools": policy},
        turn("", ("demo.list_files", {"path": "./docs/"})), turn("", ("demo.list_files", {"path": "docs"})),
        turn("Done."),
    )  # fmt: skip
    assert len(of_type(result, "tool_call")) == runs
    assert len(of_type(result, "duplicate_tool_call")) == 2 - runs


@pytest.mark.parametrize(
    ("project", "first", "again"),
    [
        (
            {"mcp_servers": {"demo": demo_server()}},
            ("demo.slow_echo", {"text": "x", "ms": 0}),
            ("demo.slow_echo", {"ms": 0, "text": "x"}),  # the same call, its arguments in another order
        ),
        ({"python_tools": COUNT}, ("word_count", {"text": "a b"}), ("word_count", {"text": "a b"})),
    ],
    ids=["mcp", "python"],
)
async def test_triggered_phase_refuses_a_repeated_mcp_or_python_call_as_a_duplicate(
    tmp_path: Path, workspace: Path, project: dict[str, Any], first: Any, again: Any
):
    result, _ = await _run(
        "triggered_phase", tmp_path, workspace, project, turn("", first), turn("", again), turn("Done."),
    )  # fmt: skip
    assert [c.name for c in of_type(result, "tool_call")] == [first[0]]
    (duplicate,) = of_type(result, "duplicate_tool_call")
    assert duplicate.name == first[0]
    assert duplicate.signature == of_type(result, "tool_call")[0].signature
