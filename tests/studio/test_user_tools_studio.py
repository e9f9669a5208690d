"""``langgraph dev`` (what Studio runs) in a folder holding a ``phasegraph.toml``: its tools and model.

The project names the reference ``mcp-server-git`` on a repository the test made and gives every
protocol a scripted model calling ``git.git_log`` its own way (``[models]``; agent_network's network
from ``[protocols.agent_network]``); ``git.git_create_branch`` waits for approval, answered as Studio
and langgraph-sdk answer an interrupt, ``Command(resume=...)``. A branch made or not is read from outside.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import pytest
from langgraph_sdk import get_sync_client
from langgraph_sdk.client import SyncLangGraphClient

from tests.server.test_user_tools_protocols import git_log_turns, network_file
from tests.studio.conftest import LANGGRAPH, START_SECONDS
from tests.studio.conftest import langgraph_dev as studio_server
from tests.studio.conftest import stream_events as _stream_events
from tests.tool_projects import git_repository, git_server, write_project, write_script

PROTOCOLS = ["triggered_phase", "unified", "goal_pursuit", "xml_contract", "planner", "agent_network"]
#: Settings of the environment the tests run in that would decide instead of the project file.
OPERATOR_VARIABLES = ("PHASEGRAPH_CONFIG", "PHASEGRAPH_MCP_CONFIG")


def _call(name: str, args: dict[str, Any]) -> dict[str, Any]:
    return {"content": "", "tool_calls": [{"name": name, "args": args}]}


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path, str]]:
    """``langgraph dev`` started in a project folder: (its URL, the repository, the branch script's spec)."""
    if not LANGGRAPH.exists():
        message = f"{LANGGRAPH} is missing: run `make test` (or `make studio`) to build .venv-studio"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    folder = tmp_path_factory.mktemp("studio-user-tools")
    repo = git_repository(folder / "repo")
    log = write_script(folder, [_call("git.git_log", {"repo_path": str(repo)}), {"content": "Two commits."}],
                       "log.json")  # fmt: skip
    create = _call("git.git_create_branch", {"repo_path": str(repo), "branch_name": "feature-x"})
    branch = write_script(folder, [create, {"content": "Done."}], "branch.json")
    models = {
        protocol: f"scripted:{write_script(folder, turns, f'{protocol}.json')}"
        for protocol, turns in git_log_turns(repo).items()
    }
    write_project(folder, {
        "model": f"scripted:{log}",
        "models": models,
        "protocols": {"agent_network": {"network_file": str(network_file(folder, repo))}},
        "mcp_servers": {"git": git_server(repo)},
        "tools": {"git.git_create_branch": {"confirm": True}},
    })  # fmt: skip
    with langgraph_dev(folder) as url:
        yield url, repo, f"scripted:{branch}"


def langgraph_dev(folder: Path) -> AbstractContextManager[str]:
    """``langgraph dev`` started in ``folder`` (its project file read there), no operator variables."""
    return studio_server(folder, {k: v for k, v in os.environ.items() if k not in OPERATOR_VARIABLES})


@pytest.fixture
def client(project: tuple[str, Path, str]) -> Iterator[SyncLangGraphClient]:
    sdk = get_sync_client(url=project[0], timeout=START_SECONDS)
    yield sdk
    sdk.http.client.close()


def _branches(repo: Path) -> set[str]:
    found = subprocess.run(["git", "-C", str(repo), "branch", "--format=%(refname:short)"],
                           check=True, capture_output=True, text=True)  # fmt: skip
    return set(found.stdout.split())


def _ask(text: str) -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": text}]}


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_a_run_uses_the_projects_git_tool_and_model(client: SyncLangGraphClient, protocol: str):
    thread_id = client.threads.create()["thread_id"]
    events, errors = _stream_events(client, thread_id, protocol, _ask("Show the history."),
                                    context={"show_tool_outputs": True}, stream_subgraphs=True)  # fmt: skip
    assert not errors
    results = [e for e in events if e.type == "tool_result"]
    assert [(e.name, e.status) for e in results] == [("git.git_log", "ok")]  # type: ignore[attr-defined]
    assert "second commit" in (results[0].output or "")  # type: ignore[attr-defined]
    assert events[-1].type == "final"


@pytest.mark.parametrize(
    ("protocol", "answer", "made"),
    [
        ("triggered_phase", "approve", {"feature-x"}),
        ("unified", {"decision": "edit", "args": {"branch_name": "studio-edit"}}, {"studio-edit"}),
        ("triggered_phase", {"decision": "reject", "reason": "not now"}, set()),
    ],
)
def test_approval_is_answered_with_a_command(
    project: tuple[str, Path, str], client: SyncLangGraphClient, protocol: str, answer: Any, made: set[str]
):
    _, repo, branch_model = project
    for name in _branches(repo) - {"master", "main"}:
        subprocess.run(["git", "-C", str(repo), "branch", "-D", name], check=True, capture_output=True)
    before = _branches(repo)
    thread_id = client.threads.create()["thread_id"]
    context = {"model": branch_model, "show_tool_outputs": True}
    events, _ = _stream_events(client, thread_id, protocol, _ask("Make a branch."), context=context)
    asked = [e for e in events if e.type == "approval_requested"]
    assert [e.name for e in asked] == ["git.git_create_branch"]  # type: ignore[attr-defined]
    assert not [e for e in events if e.type == "tool_result"] and _branches(repo) == before
    state = client.threads.get_state(thread_id)
    value = state["interrupts"][0]["value"]
    assert value["type"] == "approval" and value["call"]["args"]["branch_name"] == "feature-x"
    if isinstance(answer, dict) and "args" in answer:
        answer = {**answer, "args": {**answer["args"], "repo_path": str(repo)}}
    done, errors = _stream_events(client, thread_id, protocol, None, command={"resume": answer},
                                  context=context)  # fmt: skip
    assert not errors
    results = [e for e in done if e.type == "tool_result"]
    assert [e.status for e in results] == ["error" if made == set() else "ok"]  # type: ignore[attr-defined]
    assert _branches(repo) - before == made
    assert done[-1].type == "final"


def test_a_server_started_by_a_bare_command_name_runs_under_langgraph_dev(
    project: tuple[str, Path, str], tmp_path: Path
):
    repo = git_repository(tmp_path / "repo")
    log = write_script(
        tmp_path, [_call("git.git_log", {"repo_path": str(repo)}), {"content": "ok"}], "log.json"
    )
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', os.defpath)}"  # git too
    bare = {**git_server(repo), "command": "python", "env": {"PATH": path}}
    write_project(tmp_path, {"model": f"scripted:{log}", "mcp_servers": {"git": bare}})
    with langgraph_dev(tmp_path) as url:
        sdk = get_sync_client(url=url, timeout=START_SECONDS)
        try:
            thread_id = sdk.threads.create()["thread_id"]
            events, errors = _stream_events(sdk, thread_id, "triggered_phase", _ask("Show the history."))
        finally:
            sdk.http.client.close()
    assert not errors, errors
    assert [(e.name, e.status) for e in events if e.type == "tool_result"] == [("git.git_log", "ok")]  # type: ignore[attr-defined]
