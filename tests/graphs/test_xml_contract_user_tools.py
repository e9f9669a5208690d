"""xml_contract with a project's tools: its MCP servers as services, its Python tools as service ``python``.

The servers are real (the reference ``mcp-server-git`` on a repository the test makes, the bundled
demo server), the Python tools are ``tests/user_tools.py``; approvals are answered at graph level
with ``Command(resume=...)`` on an ``InMemorySaver`` thread.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any
from uuid import uuid4

from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from phasegraph.graphs.registry import get_protocol
from phasegraph.graphs.run import RunResult, run, stream_graph
from phasegraph.nodes.events import Event
from phasegraph.nodes.scripted import ScriptedChatModel
from phasegraph.nodes.trace import MemoryTraceStore
from phasegraph.nodes.xml_contract.context import XmlContractContext
from tests import user_tools
from tests.helpers import of_type, scripted, turn
from tests.tool_projects import git_repository, git_server, write_project

TASK = "Use the project's tools."
DONE = "Final Answer: done"
PYTHON_TOOLS = {"count": "tests.user_tools:word_count", "user": "tests.user_tools:TOOLS"}


def context(
    tmp_path: Path, workspace: Path, project: dict[str, Any], *answers: str
) -> tuple[XmlContractContext, ScriptedChatModel]:
    """A Context on a project file holding ``project``, its model answering ``answers`` in turn."""
    model = scripted(*(turn(a) for a in answers))
    path = write_project(tmp_path, project)
    found = XmlContractContext(
        project_file=str(path),
        chat_model=model,
        workspace=str(workspace),
        dataset_dir="",
        show_tool_outputs=True,
    )
    return found, model


async def run_project(
    tmp_path: Path, workspace: Path, project: dict[str, Any], *answers: str
) -> tuple[RunResult, ScriptedChatModel]:
    found, model = context(tmp_path, workspace, project, *answers)
    return await run("xml_contract", TASK, context=found, traces=MemoryTraceStore()), model


def results(result: RunResult) -> list[tuple[str, str, str | None]]:
    """Each call's tool, status and output or error."""
    return [
        (r.name, r.status, r.output if r.status == "ok" else r.error) for r in of_type(result, "tool_result")
    ]


async def test_a_project_naming_the_git_server_runs_its_tools_as_service_git(tmp_path, workspace):
    repo = git_repository(tmp_path / "repo")
    call = f'<git><git_log>{{"repo_path": "{repo}"}}</git_log></git><execute_tools />'
    result, model = await run_project(
        tmp_path, workspace, {"mcp_servers": {"git": git_server(repo)}}, call, DONE
    )
    assert result.error is None, result.error
    system = model.prompts[0][0].text.partition("Services and tools:")[2]
    assert (
        "<git>" in system and "git_log(" in system and "<demo>" not in system
    )  # the project's, not the demo
    [(name, status, output)] = results(result)
    assert (name, status) == ("git.git_log", "ok") and "second commit" in (output or "")
    read_back = model.prompts[1][-1].text  # what the model read: the call's <result>
    assert 'service="git" tool="git_log" status="ok"' in read_back and "second commit" in read_back
    assert result.final is not None and result.final.answer == "done"


async def test_python_tools_are_one_service_and_the_tools_patterns_choose_what_is_shown(tmp_path, workspace):
    before = list(user_tools.ARCHIVED)
    project = {
        "python_tools": PYTHON_TOOLS,
        "protocols": {"xml_contract": {"tools": ["python.word_count", "python.sh*"]}},
    }
    calls = (
        "<parallel><python><word_count>three little words</word_count></python>"
        "<python><shout>hi</shout></python></parallel><execute_tools />"
    )
    hidden = "<python><archive_everything>all</archive_everything></python><execute_tools />"
    result, model = await run_project(tmp_path, workspace, project, calls, hidden, DONE)
    assert result.error is None, result.error
    system = model.prompts[0][0].text.partition("Services and tools:")[2]
    assert "<python>" in system and "word_count(text: string)" in system and "shout(" in system
    assert "archive_everything" not in system and "<demo>" not in system  # not chosen by the patterns
    assert results(result) == [("python.word_count", "ok", "3 words"), ("python.shout", "ok", "HI")]
    refused = model.prompts[2][-1].text  # a tool not shown is an unknown tool: nothing ran
    assert "unknown tool (tools of python: shout, word_count)" in refused
    assert before == user_tools.ARCHIVED


async def test_policies_set_a_calls_timeout_and_its_calls_per_turn(tmp_path, workspace):
    project = {
        "python_tools": PYTHON_TOOLS,
        "tools": {
            "demo.slow_echo": {"timeout_seconds": 0.3},
            "shout": {"max_calls_per_turn": 1},
            "python.word_count": {"normalizers": {"text": "lower"}},
        },
    }
    slow = "<demo><slow_echo><text>late</text><ms>3000</ms></slow_echo></demo>"
    quick = "<demo><slow_echo><text>soon</text><ms>10</ms></slow_echo></demo>"
    shouts = (
        "<sequential><python><shout>a</shout></python>"
        "<python><word_count>B c</word_count></python></sequential>"
    )
    second = "<python><shout>again</shout></python><execute_tools />"
    result, model = await run_project(
        tmp_path,
        workspace,
        project,
        f"<parallel>{slow}{quick}</parallel>{shouts}<execute_tools />",
        second,
        DONE,
    )
    assert result.error is None, result.error
    ended = results(result)
    assert sorted(ended[:2], key=str) == [  # a parallel block's results come as its calls end
        ("demo.slow_echo", "error", "demo.slow_echo gave no answer within 0.3 s"),
        ("demo.slow_echo", "ok", "soon"),
    ]
    assert ended[2:] == [
        ("python.shout", "ok", "A"),
        ("python.word_count", "ok", "2 words"),
        (
            "python.shout",
            "error",
            "python.shout may run at most 1 time(s) per user turn; this call was not run.",
        ),
    ]
    assert "may run at most 1 time(s)" in model.prompts[2][-1].text
    counted = next(c for c in of_type(result, "tool_call") if c.name == "python.word_count")
    assert (
        counted.args == {"text": "B c"} and counted.signature == 'python.word_count||{"text":"b c"}|default'
    )
    assert "no answer within 0.3 s" in model.prompts[1][-1].text


async def stream(graph: Any, payload: Any, found: XmlContractContext, thread: str) -> list[Event]:
    config = {"configurable": {"thread_id": thread}}
    spec = get_protocol("xml_contract")
    return [e async for e in stream_graph(spec, graph, payload, found, config, traces=MemoryTraceStore())]


async def waiting(graph: Any, thread: str) -> dict[str, Any] | None:
    """The approval the thread waits for (``None`` when it waits for none)."""
    snapshot = await graph.aget_state({"configurable": {"thread_id": thread}})
    return snapshot.interrupts[0].value if snapshot.interrupts else None


ARCHIVE_THEN_SHOUT = (
    "<sequential><python><archive_everything>old files</archive_everything></python>"
    "<python><shout>$result_of_step_1</shout></python></sequential><execute_tools />"
)
CONFIRM_ARCHIVE = {"python_tools": PYTHON_TOOLS, "tools": {"archive_everything": {"confirm": True}}}


async def paused_archive(tmp_path: Path, workspace: Path) -> tuple[Any, XmlContractContext, str, list[Event]]:
    """A thread stopped at the approval of ``archive_everything``, nothing of its block run."""
    found, _ = context(tmp_path, workspace, CONFIRM_ARCHIVE, ARCHIVE_THEN_SHOUT, DONE)
    graph, thread = get_protocol("xml_contract").compile(InMemorySaver()), uuid4().hex
    events = await stream(graph, {"messages": [("user", TASK)]}, found, thread)
    asked = await waiting(graph, thread)
    assert asked is not None and asked["type"] == "approval"
    assert asked["call"] == {
        "id": "1.1.1",
        "name": "python.archive_everything",
        "args": {"reason": "old files"},
    }
    kinds = [e.type for e in events]
    assert "approval_requested" in kinds and "xml_block" not in kinds and "tool_call" not in kinds
    return graph, found, thread, events


async def test_a_confirm_tool_waits_for_approval_and_runs_once_approved(tmp_path, workspace):
    before = list(user_tools.ARCHIVED)
    graph, found, thread, _ = await paused_archive(tmp_path, workspace)
    assert before == user_tools.ARCHIVED  # nothing ran before the answer
    events = await stream(graph, Command(resume="approve"), found, thread)
    assert await waiting(graph, thread) is None
    assert [*before, "old files"] == user_tools.ARCHIVED
    ended = [(e.name, e.status) for e in events if e.type == "tool_result"]
    assert ended == [("python.archive_everything", "ok"), ("python.shout", "ok")]
    values = (await graph.aget_state({"configurable": {"thread_id": thread}})).values
    assert "ARCHIVED (OLD FILES)" in values["transcript"][-2].text and values["answer"] == "done"


async def test_an_edited_call_runs_with_the_edited_arguments_checked_first(tmp_path, workspace):
    before = list(user_tools.ARCHIVED)
    graph, found, thread, _ = await paused_archive(tmp_path, workspace)
    await stream(graph, Command(resume={"decision": "edit", "args": {"everything": True}}), found, thread)
    asked = await waiting(graph, thread)  # a wrong edit asks again, saying why
    assert asked is not None and "do not fit python.archive_everything" in asked["problem"]
    assert before == user_tools.ARCHIVED
    events = await stream(
        graph, Command(resume={"decision": "edit", "args": {"reason": "logs only"}}), found, thread
    )
    assert [*before, "logs only"] == user_tools.ARCHIVED
    call = next(e for e in events if e.type == "tool_call")
    assert (call.name, call.args) == ("python.archive_everything", {"reason": "logs only"})
    shout = [e for e in events if e.type == "tool_call"][1]
    assert shout.args == {"text": "archived (logs only)"}  # the next step reads the edited call's output


async def test_a_rejected_call_never_runs_and_the_model_reads_why(tmp_path, workspace):
    before = list(user_tools.ARCHIVED)
    graph, found, thread, _ = await paused_archive(tmp_path, workspace)
    events = await stream(graph, Command(resume={"decision": "reject", "reason": "keep them"}), found, thread)
    assert before == user_tools.ARCHIVED
    assert [(e.name, e.status) for e in events if e.type == "tool_result"] == [
        ("python.archive_everything", "error")
    ]
    values = (await graph.aget_state({"configurable": {"thread_id": thread}})).values
    read_back = values["transcript"][-2].text
    assert "rejected this call; it did not run. Their reason: keep them" in read_back
    assert "not run: step 1 failed" in read_back  # the step that depended on it stops too
    chat = [m for m in values["messages"] if m.type == "tool"]
    assert [m.status for m in chat] == ["error", "error"] and values["answer"] == "done"


async def test_every_approval_of_a_block_is_asked_before_any_of_its_calls_runs(tmp_path, workspace):
    before = list(user_tools.ARCHIVED)
    project = {"python_tools": PYTHON_TOOLS, "tools": {"archive_everything": {"confirm": True}}}
    block = (
        "<parallel><python><archive_everything>a</archive_everything></python><python><shout>x</shout></python>"
        "<python><archive_everything>b</archive_everything></python></parallel><execute_tools />"
    )
    found, _ = context(tmp_path, workspace, project, block, DONE)
    graph, thread = get_protocol("xml_contract").compile(InMemorySaver()), uuid4().hex
    await stream(graph, {"messages": [("user", TASK)]}, found, thread)
    first = await waiting(graph, thread)
    assert first is not None and first["call"]["args"] == {"reason": "a"}
    events = await stream(graph, Command(resume="approve"), found, thread)
    second = await waiting(graph, thread)
    assert second is not None and second["call"]["args"] == {"reason": "b"}
    assert before == user_tools.ARCHIVED and not [e for e in events if e.type == "tool_call"]
    events = await stream(graph, Command(resume={"decision": "reject", "reason": "not b"}), found, thread)
    assert [*before, "a"] == user_tools.ARCHIVED
    ended = [(e.name, e.status) for e in events if e.type == "tool_result"]
    assert sorted(ended) == [
        ("python.archive_everything", "error"), ("python.archive_everything", "ok"), ("python.shout", "ok")
    ]  # fmt: skip


async def test_an_mcp_tool_waits_too_and_an_edit_is_checked_against_its_json_schema(tmp_path, workspace):
    repo = git_repository(tmp_path / "repo")
    project = {"mcp_servers": {"git": git_server(repo)}, "tools": {"git.*": {"confirm": True}}}
    call = f'<git><git_log>{{"repo_path": "{repo}"}}</git_log></git><execute_tools />'
    found, _ = context(tmp_path, workspace, project, call, DONE)
    graph, thread = get_protocol("xml_contract").compile(InMemorySaver()), uuid4().hex
    await stream(graph, {"messages": [("user", TASK)]}, found, thread)
    asked = await waiting(graph, thread)
    assert asked is not None and asked["call"]["name"] == "git.git_log"
    await stream(graph, Command(resume={"decision": "edit", "args": {"repo_path": 7}}), found, thread)
    asked = await waiting(graph, thread)
    assert asked is not None and "repo_path" in asked["problem"]  # 7 is not a string
    edited = {"decision": "edit", "args": {"repo_path": str(repo), "max_count": 1}}
    events = await stream(graph, Command(resume=edited), found, thread)
    [ended] = [e for e in events if e.type == "tool_result"]
    assert ended.status == "ok" and "second commit" in ended.output and "first commit" not in ended.output


async def test_a_project_whose_python_tools_cannot_be_offered_fails_the_run_saying_why(tmp_path, workspace):
    broken = {
        "tests.user_tools:NOT_A_TOOL": {"python_tools": {"bad": "tests.user_tools:NOT_A_TOOL"}},
        "two tools are named 'shout'": {
            "python_tools": {"one": "tests.user_tools:shout", "two": "tests.user_tools:TOOLS"}
        },
        "unknown tool(s) ['python.nope']": {
            "python_tools": PYTHON_TOOLS,
            "protocols": {"xml_contract": {"tools": ["python.nope"]}},
        },
    }
    for why, project in broken.items():
        result, model = await run_project(tmp_path, workspace, project, "<python><shout>x</shout></python>")
        assert result.error is not None and why in result.error.message, (why, result.error)
        assert model.prompts == []  # refused before the model was asked


async def test_the_project_files_call_timeout_bounds_every_call_without_a_policy(tmp_path, workspace):
    slow = "<demo><slow_echo><text>late</text><ms>3000</ms></slow_echo></demo><execute_tools />"
    result, _ = await run_project(tmp_path, workspace, {"call_timeout_seconds": 0.3}, slow, DONE)
    assert results(result) == [("demo.slow_echo", "error", "demo.slow_echo gave no answer within 0.3 s")]
