"""agent_network with the project's tools.

Agents equip MCP tools (``git.git_log`` of the reference git server) and Python tools by name, unknown
names are refused naming the agent, and approval holds before a call runs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from phasegraph.graphs.registry import get_protocol
from phasegraph.graphs.run import stream_graph
from phasegraph.nodes.agent_network.context import AgentNetworkContext
from phasegraph.nodes.agent_network.tools import compile_for_project, project_tools
from phasegraph.nodes.conversation import is_rejected
from phasegraph.nodes.errors import ConfigurationError
from phasegraph.nodes.events import Event
from phasegraph.nodes.trace import MemoryTraceStore
from phasegraph.tools.networks import NetworkValidationError, parse_definition
from tests import user_tools
from tests.graphs.test_agent_network import answer, tool
from tests.helpers import scripted
from tests.tool_projects import git_repository, git_server, write_project

QUESTION = "What happened in the repository?"


def network(**agent: Any) -> dict[str, Any]:
    """A one-agent network: ``worker`` starts, has the given tools, and answers."""
    worker = {"key": "worker", "is_default": True, "allow_respond": True,
              "prompt_template": "You are {agent_key}. Tools:\n{tools}", **agent}  # fmt: skip
    return {"name": "solo", "agents": [worker]}


def network_file(tmp_path: Path, definition: dict[str, Any]) -> str:
    path = tmp_path / "solo.yaml"
    path.write_text(yaml.safe_dump(definition), encoding="utf-8")
    return str(path)


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    return root


@pytest.fixture
def archived() -> Any:
    """``archive_everything``'s record, empty before and after the test."""
    user_tools.ARCHIVED.clear()
    yield user_tools.ARCHIVED
    user_tools.ARCHIVED.clear()


class Thread:
    """One checkpointed agent_network thread: run a turn, resume it, read its state and prompts."""

    def __init__(self, context: AgentNetworkContext) -> None:
        self.context, self.spec, self.traces = context, get_protocol("agent_network"), MemoryTraceStore()
        self.graph = self.spec.compile(InMemorySaver())
        self.config: Any = {"configurable": {"thread_id": context.request_id}}

    async def send(self, graph_input: Any) -> list[Event]:
        stream = stream_graph(
            self.spec, self.graph, graph_input, self.context, self.config, traces=self.traces
        )
        return [event async for event in stream]

    async def state(self) -> Any:
        return await self.graph.aget_state(self.config)

    def prompts(self) -> list[str]:
        return [
            e.details["prompt"] for e in self.traces.get(self.context.request_id) if e.type == "agent_prompt"
        ]


def of(events: list[Event], kind: str) -> list[Any]:
    return [e for e in events if e.type == kind]


async def test_an_agent_equipped_with_git_log_runs_the_reference_git_server(tmp_path: Path, workspace: Path):
    repo = git_repository(tmp_path / "repo")
    project = write_project(tmp_path, {"mcp_servers": {"git": git_server(repo)}})
    equipped = {
        "tool": "git.git_log",
        "agent_params": ["max_count"],
        "system_params": {"repo_path": str(repo)},
    }
    context = AgentNetworkContext(
        chat_model=scripted(tool("git.git_log", max_count=5), answer("Two commits.")),
        workspace=str(workspace), project_file=str(project), show_tool_outputs=True,
        network_file=network_file(tmp_path, network(tools=[equipped])),
    )  # fmt: skip
    thread = Thread(context)
    events = await thread.send({"messages": [("user", QUESTION)]})
    assert [e.type for e in events] == ["agent_step", "tool_call", "tool_result", "agent_step", "final"]
    call, result = of(events, "tool_call")[0], of(events, "tool_result")[0]
    # the agent gave max_count; the network's system parameter gave the repository
    assert call.name == "git.git_log" and call.args == {"repo_path": str(repo), "max_count": 5}
    assert result.status == "ok" and "second commit" in result.output and "first commit" in result.output
    values = (await thread.state()).values
    assert "- git.git_log(max_count): " in values["network"]["agents"]["worker"]["prompt"]
    (payload,) = values["tool_execution_log"].values()
    assert "second commit" in payload["result"] and values["answer"] == "Two commits."
    assert "second commit" in thread.prompts()[1]  # the agent read the server's output
    with pytest.raises(ConfigurationError, match="not open yet"):
        context.registry()  # the turn's final closed the MCP sessions


async def test_agents_equip_python_tools_by_their_own_names(tmp_path: Path, workspace: Path):
    project = write_project(
        tmp_path, {"python_tools": {"count": "tests.user_tools:word_count", "mine": "tests.user_tools:TOOLS"}}
    )
    turns = [tool("word_count", text="one two three"), tool("shout", text="hello"), answer("ok")]
    context = AgentNetworkContext(
        chat_model=scripted(*turns),
        workspace=str(workspace), project_file=str(project), show_tool_outputs=True,
        network_file=network_file(tmp_path, network(tools=[{"tool": "word_count"}, {"tool": "shout"}])),
    )  # fmt: skip
    events = await Thread(context).send({"messages": [("user", "count and shout")]})
    assert [(r.name, r.status, r.output) for r in of(events, "tool_result")] == [
        ("word_count", "ok", "3 words"),
        ("shout", "ok", "HELLO"),
    ]
    assert events[-1].type == "final"


async def test_a_run_refuses_a_network_equipping_a_tool_it_does_not_have(tmp_path: Path, workspace: Path):
    repo = git_repository(tmp_path / "repo")
    project = write_project(tmp_path, {"mcp_servers": {"git": git_server(repo)}})
    definition = network(tools=[{"tool": "git.git_blame"}])
    context = AgentNetworkContext(
        chat_model=scripted(answer("unused")), workspace=str(workspace), project_file=str(project),
        network_file=network_file(tmp_path, definition),
    )  # fmt: skip
    events = await Thread(context).send({"messages": [("user", QUESTION)]})
    assert [e.type for e in events] == ["error"]
    message = events[0].message
    assert "Agent 'worker' is equipped with the tool 'git.git_blame', which does not exist" in message
    assert "'git.git_log'" in message and "'read_file'" in message  # what exists is listed


async def test_publishing_refuses_an_unknown_tool_and_names_an_unavailable_server(tmp_path: Path):
    repo = git_repository(tmp_path / "repo")
    ghost = {"transport": "stdio", "command": str(tmp_path / "no-such-server"), "args": []}
    project = write_project(tmp_path, {"mcp_servers": {"git": git_server(repo), "ghost": ghost}})
    offered = await project_tools(project_file=str(project))
    assert "git.git_log" in offered.registry.names() and "list_files" in offered.registry.names()
    assert list(offered.unavailable) == ["ghost"]
    definition = parse_definition(
        yaml.safe_dump(
            network(tools=[{"tool": "git.git_log"}, {"tool": "git.nope"}, {"tool": "ghost.haunt"}])
        )
    )
    with pytest.raises(NetworkValidationError) as refused:
        await compile_for_project(definition, project_file=str(project))
    unknown, unavailable = refused.value.problems
    assert unknown.startswith("Agent 'worker' is equipped with the tool 'git.nope', which does not exist")
    assert "'git.git_log'" in unknown
    assert unavailable.startswith(
        "Agent 'worker' is equipped with the tool 'ghost.haunt', but the MCP server"
    )
    assert "'ghost' is unavailable" in unavailable
    fine = parse_definition(yaml.safe_dump(network(tools=[{"tool": "git.git_log"}])))
    snapshot = await compile_for_project(fine, project_file=str(project))
    assert "repo_path" in snapshot.agents["worker"].tools["git.git_log"].agent_params


def approval_context(tmp_path: Path, workspace: Path) -> AgentNetworkContext:
    project = write_project(
        tmp_path,
        {
            "python_tools": {"mine": "tests.user_tools:TOOLS"},
            "tools": {"archive_everything": {"confirm": True}},
        },
    )
    return AgentNetworkContext(
        chat_model=scripted(tool("archive_everything", reason="tidy up"), answer("Done.")),
        workspace=str(workspace), project_file=str(project), show_tool_outputs=True,
        network_file=network_file(tmp_path, network(tools=[{"tool": "archive_everything"}])),
    )  # fmt: skip


async def paused(tmp_path: Path, workspace: Path, archived: list[str]) -> tuple[Thread, dict[str, Any]]:
    """A thread stopped at the approval of ``archive_everything``: nothing of the call ran or was emitted."""
    thread = Thread(approval_context(tmp_path, workspace))
    events = await thread.send({"messages": [("user", "archive it all")]})
    assert [e.type for e in events] == ["agent_step", "approval_requested"]
    snapshot = await thread.state()
    question = snapshot.interrupts[0].value
    assert question["type"] == "approval" and snapshot.next == ("use_tool",)
    assert (question["call"]["name"], question["call"]["args"]) == (
        "archive_everything",
        {"reason": "tidy up"},
    )
    assert archived == []
    return thread, question


@pytest.mark.parametrize(
    ("answer_given", "expected"),
    [
        ("approve", ["tidy up"]),
        ({"decision": "edit", "args": {"reason": "only the old ones"}}, ["only the old ones"]),
    ],
)
async def test_an_approved_or_edited_call_runs_once_after_the_answer(
    tmp_path: Path, workspace: Path, archived: list[str], answer_given: Any, expected: list[str]
):
    thread, question = await paused(tmp_path, workspace, archived)
    events = await thread.send(Command(resume=answer_given))
    assert [e.type for e in events] == [
        "approval_answered", "tool_call", "tool_result", "agent_step", "final",
    ]  # fmt: skip
    assert archived == expected
    result = of(events, "tool_result")[0]
    assert result.status == "ok" and result.output == f"archived ({expected[0]})"
    values = (await thread.state()).values
    (instruction,) = [i for i in values["instructions"] if i["action"] == "USE_TOOL"]
    assert (
        instruction["params"] == {"reason": expected[0]}
        and instruction["execution_id"] == question["call"]["id"]
    )


async def test_a_rejected_call_never_runs_and_the_agent_reads_the_reason(
    tmp_path: Path, workspace: Path, archived: list[str]
):
    thread, _ = await paused(tmp_path, workspace, archived)
    events = await thread.send(Command(resume={"decision": "reject", "reason": "not before the audit"}))
    assert [e.type for e in events] == [
        "approval_answered", "tool_call", "tool_result", "agent_step", "final",
    ]  # fmt: skip
    assert archived == []
    result = of(events, "tool_result")[0]
    assert result.status == "error" and "not before the audit" in (result.error or "")
    assert "Their reason: not before the audit" in thread.prompts()[1]
    values = (await thread.state()).values
    rejected = [m for m in values["messages"] if m.type == "tool"]
    assert len(rejected) == 1 and "not before the audit" in rejected[0].text


async def test_rejections_are_no_tool_errors_and_the_call_made_again_is_asked_again(
    tmp_path: Path, workspace: Path, archived: list[str]
):
    limit = AgentNetworkContext.max_tool_errors  # the default: 3 a turn
    context = approval_context(tmp_path, workspace)
    again = tool("archive_everything", reason="tidy up")
    context.chat_model = scripted(*[again] * (limit + 1), answer("Archived at last."))
    thread = Thread(context)
    await thread.send({"messages": [("user", "archive it all")]})
    for n in range(limit):  # as many rejections as the turn tolerates tool errors: each call is asked again
        await thread.send(Command(resume={"decision": "reject", "reason": f"not yet ({n})"}))
        assert (await thread.state()).interrupts, f"rejection {n} ended the run"
    events = await thread.send(Command(resume="approve"))
    assert archived == ["tidy up"]
    assert events[-1].type == "final" and events[-1].answer == "Archived at last."
    values = (await thread.state()).values
    assert values["tool_errors"] == 0
    answers = [m for m in values["messages"] if m.type == "tool"]
    assert [is_rejected(m) for m in answers] == [True] * limit + [False]
