"""The issue's acceptance: with only a ``phasegraph.toml`` naming an MCP server, every protocol runs its tools
from ``phasegraph run`` and from AG-UI (the native route and the LangGraph API: test_user_tools_server.py and
test_user_tools_protocols.py; ``langgraph dev``: tests/studio/test_user_tools_studio.py).

The folder holds the project file (the reference ``mcp-server-git`` on a repository made here, and each
protocol's scripted model in ``[models]``; agent_network's network file equips ``git.git_log``) and nothing
else: no Python tool, no PYTHONPATH. The CLI finds ``./phasegraph.toml`` by itself; ``phasegraph serve``
started in the folder does too.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from ag_ui.core import RunFinishedEvent, ToolCallResultEvent, ToolCallStartEvent

from tests.helpers import turn
from tests.server.agui_client import Agent
from tests.server.conftest import Server
from tests.server.test_user_tools_protocols import git_log_turns, network_file
from tests.server.test_user_tools_server import OPERATOR_VARIABLES
from tests.tool_projects import git_repository, git_server, write_project, write_script

PROTOCOLS = ["triggered_phase", "unified", "goal_pursuit", "agent_network", "xml_contract", "planner"]
PHASEGRAPH = Path(sys.executable).parent / "phasegraph"
QUESTION = "What happened in the repository?"


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A project folder: its phasegraph.toml names only the git server (and each protocol's script)."""
    folder = tmp_path_factory.mktemp("everywhere")
    repo = git_repository(folder / "repo")
    native = [turn("", ("git.git_log", {"repo_path": str(repo)})), turn("Two commits.")]
    turns = {"triggered_phase": native, "unified": native, **git_log_turns(repo)}
    models = {p: f"scripted:{write_script(folder, t, f'{p}.json')}" for p, t in turns.items()}
    write_project(folder, {
        "models": models,
        "protocols": {"agent_network": {"network_file": str(network_file(folder, repo))}},
        "mcp_servers": {"git": git_server(repo)},
    })  # fmt: skip
    return folder


def _clean_env(folder: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in OPERATOR_VARIABLES and k != "PYTHONPATH"}
    return {**env, "PHASEGRAPH_CHECKPOINTER": f"sqlite:{folder / 'state.db'}", "NO_COLOR": "1"}


def _read_git_log(results: list[dict[str, Any]]) -> None:
    assert [(r["name"], r["status"]) for r in results] == [("git.git_log", "ok")], results
    assert "second commit" in (results[0].get("output") or "")


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_phasegraph_run_uses_the_projects_mcp_server(folder: Path, protocol: str):
    done = subprocess.run(
        [str(PHASEGRAPH), "run", protocol, QUESTION, "--json", "--show-tool-outputs"],
        cwd=folder, env=_clean_env(folder), capture_output=True, text=True, timeout=180,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    events = [json.loads(line) for line in done.stdout.splitlines() if line.strip()]
    _read_git_log([e for e in events if e["type"] == "tool_result"])
    assert events[-1]["type"] == "final"


@pytest.fixture(scope="module")
def served(folder: Path) -> Iterator[Server]:
    """``phasegraph serve`` started in the project folder (it finds ./phasegraph.toml)."""
    with pytest.MonkeyPatch.context() as patch:
        for name in OPERATOR_VARIABLES:
            patch.delenv(name, raising=False)
        server = Server(env={"PHASEGRAPH_CHECKPOINTER": f"sqlite:{folder / 'served.db'}"},
                        log=folder / "server.log", cwd=folder).start()  # fmt: skip
    try:
        yield server
    finally:
        server.stop()


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_ag_ui_uses_the_projects_mcp_server(served: Server, protocol: str):
    agent, run_id = Agent(served.url, f"everywhere-{protocol}"), uuid.uuid4().hex
    agent.say(uuid.uuid4().hex, QUESTION)
    with httpx.Client(base_url=served.url, timeout=120) as client:
        events = agent.run(client, f"/ag-ui/{protocol}", agent.input(run_id))
        trace = client.get(f"/api/requests/{run_id}/trace").json()
    started = [e for e in events if isinstance(e, ToolCallStartEvent)]
    assert [e.tool_call_name for e in started] == ["git.git_log"], started
    (result,) = [e for e in events if isinstance(e, ToolCallResultEvent)]
    assert result.tool_call_id == started[0].tool_call_id and json.loads(result.content)["status"] == "ok"
    assert isinstance(events[-1], RunFinishedEvent) and agent.pending_interrupts == []  # ended, not paused
    # AG-UI shows no tool output; the server's trace holds what the real server answered
    _read_git_log([e["details"] for e in trace if e["type"] == "tool_result"])
