"""``phasegraph serve`` with a project file: goal_pursuit, xml_contract, planner, agent_network use its tools.

One real server starts in a folder holding a ``phasegraph.toml`` that names the reference
``mcp-server-git`` and gives each protocol its scripted model (``[models]``) calling ``git.git_log``
in the protocol's own way; agent_network's network (``[protocols.agent_network] network_file``)
equips it. Each runs on the native route and the LangGraph API with the server's real output; the
planner's approval (a confirm tool, asked in its plan executor) is answered on the native route.
(triggered_phase and unified: tests/server/test_user_tools_server.py.)
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from langgraph_sdk import get_sync_client

from phasegraph.nodes.emit import EVENT_KEY
from phasegraph.nodes.events import Event, parse_event
from tests.graphs.test_agent_network import answer, tool
from tests.graphs.test_goal_pursuit import approve, discover, execute, finalize
from tests.helpers import turn
from tests.server.conftest import Server, stream
from tests.server.test_user_tools_server import OPERATOR_VARIABLES
from tests.tool_projects import git_repository, git_server, write_project, write_script

PROTOCOLS = ["goal_pursuit", "xml_contract", "planner", "agent_network"]


def git_log_turns(repo: Path) -> dict[str, list[dict[str, Any]]]:
    """Each protocol's turns calling ``git.git_log`` on ``repo`` once, then answering."""
    xml = f'<git><git_log>{{"repo_path": "{repo}"}}</git_log></git><execute_tools />'
    return {
        "goal_pursuit": [discover(expand_tools=["git.git_log"]), discover(), execute("git.git_log",
                         repo_path=str(repo)), approve(), discover(), finalize("Two commits."), approve()],
        "xml_contract": [turn(xml), turn("Final Answer: two commits")],
        "planner": [turn("", ("git.git_log", {"repo_path": str(repo)})), turn("Two commits.")],
        "agent_network": [tool("git.git_log", max_count=5), answer("Two commits.")],
    }  # fmt: skip


def network_file(folder: Path, repo: Path) -> Path:
    """A one-agent network equipping ``git.git_log`` on ``repo`` (the repository a system parameter)."""
    worker = {"key": "worker", "is_default": True, "allow_respond": True,
              "prompt_template": "You are {agent_key}. Tools:\n{tools}",
              "tools": [{"tool": "git.git_log", "agent_params": ["max_count"],
                         "system_params": {"repo_path": str(repo)}}]}  # fmt: skip
    network = folder / "solo.yaml"
    network.write_text(yaml.safe_dump({"name": "solo", "agents": [worker]}), encoding="utf-8")
    return network


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Server, Path, str]]:
    """The server, its repository and the planner's branch-making script (an allowed model)."""
    folder = tmp_path_factory.mktemp("user-tools-protocols")
    repo = git_repository(folder / "repo")
    models = {
        protocol: f"scripted:{write_script(folder, turns, f'{protocol}.json')}"
        for protocol, turns in git_log_turns(repo).items()
    }
    create = ("git.git_create_branch", {"repo_path": str(repo), "branch_name": "planned"})
    branch = write_script(folder, [turn("", create), turn("Made it.")], "planner-branch.json")
    network = network_file(folder, repo)
    write_project(folder, {
        "models": models,
        "protocols": {"agent_network": {"network_file": str(network)}},
        "mcp_servers": {"git": git_server(repo)},
        "tools": {"git.git_create_branch": {"confirm": True}},
    })  # fmt: skip
    env = {
        "PHASEGRAPH_CHECKPOINTER": f"sqlite:{folder / 'state.db'}",
        "PHASEGRAPH_ALLOWED_MODELS": f"scripted:{branch}",
    }
    with pytest.MonkeyPatch.context() as patch:
        for name in OPERATOR_VARIABLES:
            patch.delenv(name, raising=False)
        server = Server(env=env, log=folder / "server.log", cwd=folder).start()
    try:
        yield server, repo, f"scripted:{branch}"
    finally:
        server.stop()


def _git_log(events: list[Event]) -> None:
    """The run called the git server's git_log once and read its real output, then answered."""
    results = [e for e in events if e.type == "tool_result"]
    assert [(e.name, e.status) for e in results] == [("git.git_log", "ok")], results  # type: ignore[attr-defined]
    assert "second commit" in (results[0].output or "")  # type: ignore[attr-defined]
    assert events[-1].type == "final", events[-1]


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_native_route_runs_the_projects_git_tool(project: tuple[Server, Path, str], protocol: str):
    server = project[0]
    with httpx.Client(base_url=server.url) as client:
        body = {"message": "What happened in the repository?", "showToolOutputs": True}
        events = stream(client, "POST", f"/api/runs/{protocol}/stream", json=body)
    _git_log(events)
    status = httpx.get(f"{server.url}/api/requests/{events[0].request_id}", timeout=30).json()
    assert status["model"] == f"scripted:{protocol}.json"  # the project's model of that protocol


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_langgraph_api_runs_the_projects_git_tool(project: tuple[Server, Path, str], protocol: str):
    sdk = get_sync_client(url=project[0].url, timeout=60)
    try:
        thread_id = sdk.threads.create()["thread_id"]
        ask = {"messages": [{"role": "user", "content": "What happened in the repository?"}]}
        parts = list(sdk.runs.stream(thread_id, protocol, input=ask, context={"show_tool_outputs": True},
                                     stream_mode="custom", stream_subgraphs=True))  # fmt: skip
    finally:
        sdk.http.client.close()
    custom = [p for p in parts if p.event.split("|", 1)[0] == "custom" and EVENT_KEY in p.data]
    _git_log([parse_event(p.data[EVENT_KEY]) for p in custom])


def test_the_planners_approval_is_answered_on_the_native_resume(project: tuple[Server, Path, str]):
    server, repo, branch = project
    body = {"message": "Make a branch.", "model": branch, "showToolOutputs": True}
    with httpx.Client(base_url=server.url) as client:
        events = stream(client, "POST", "/api/runs/planner/stream", json=body)
        assert events[-1].type == "paused" and events[-1].reason == "interrupt", events[-1]  # type: ignore[union-attr]
        asked = [e for e in events if e.type == "approval_requested"]
        assert [e.name for e in asked] == ["git.git_create_branch"]  # type: ignore[attr-defined]
        url = f"/api/requests/{events[0].request_id}/resume"
        assert "planned" not in _branches(repo)
        assert client.post(url, json={}).status_code == 409
        edit = {"decision": "edit", "args": {"repo_path": str(repo), "branch_name": "edited-plan"}}
        done = stream(client, "POST", url, json={"answer": edit})
    assert [e.status for e in done if e.type == "tool_result"] == ["ok"]  # type: ignore[attr-defined]
    assert "edited-plan" in _branches(repo) and "planned" not in _branches(repo)
    assert done[-1].type == "final"


def _branches(repo: Path) -> set[str]:
    found = subprocess.run(["git", "-C", str(repo), "branch", "--format=%(refname:short)"],
                           check=True, capture_output=True, text=True)  # fmt: skip
    return set(found.stdout.split())
