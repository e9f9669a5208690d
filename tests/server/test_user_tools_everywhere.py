"""The issue's acceptance: with only a ``phasegraph.toml`` naming an MCP server, every protocol runs its tools
from ``phasegraph run`` and from AG-UI (the native route and the LangGraph API: test_user_tools_server.py and
test_user_tools_protocols.py; ``langgraph dev``: tests/studio/test_user_tools_studio.py).

Two real servers, each alone in a project folder: the bundled demo MCP server (``demo.calculate``) and the
reference ``mcp-server-git`` on a repository made here (``git.git_log``). Each folder's file names the
server and each protocol's scripted model (``[models]``) calling that tool its protocol's way;
agent_network's network file equips it. Nothing else: no Python tool, no PYTHONPATH. The CLI finds
``./phasegraph.toml`` by itself; ``phasegraph serve`` started in the folder does too.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from ag_ui.core import RunFinishedEvent, ToolCallResultEvent, ToolCallStartEvent

from tests.graphs.test_agent_network import answer, tool
from tests.graphs.test_goal_pursuit import approve, discover, execute, finalize
from tests.helpers import turn
from tests.server.agui_client import Agent
from tests.server.conftest import Server
from tests.server.test_user_tools_server import OPERATOR_VARIABLES
from tests.tool_projects import demo_server, git_repository, git_server, write_project, write_script

PROTOCOLS = ["triggered_phase", "unified", "goal_pursuit", "agent_network", "xml_contract", "planner"]
PHASEGRAPH = Path(sys.executable).parent / "phasegraph"
QUESTION = "What do the tools say?"


@dataclass(frozen=True)
class Served:
    """One MCP server's project: the tool every protocol calls, its arguments and what its output holds."""

    server: str
    tool: str
    args: dict[str, Any]
    expect: str

    def entry(self, folder: Path) -> dict[str, Any]:
        return git_server(git_repository(folder / "repo")) if self.server == "git" else demo_server()


SERVERS = {
    "git": Served("git", "git_log", {"max_count": 5}, "second commit"),
    "demo": Served("demo", "calculate", {"expression": "6 * 7"}, "42"),
}


def protocol_turns(served: Served, fixed: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    """Each protocol's turns calling the tool once, then answering (``fixed``: arguments no agent gives)."""
    name, args = f"{served.server}.{served.tool}", {**served.args, **fixed}
    call = f"<{served.tool}>{json.dumps(args)}</{served.tool}>"
    xml = f"<{served.server}>{call}</{served.server}><execute_tools />"
    native = [turn("", (name, args)), turn("Done.")]
    return {
        "triggered_phase": native, "unified": native, "planner": native,
        "goal_pursuit": [discover(expand_tools=[name]), discover(), execute(name, **args), approve(),
                         discover(), finalize("Done."), approve()],
        "xml_contract": [turn(xml), turn("Final Answer: done")],
        "agent_network": [tool(name, **served.args), answer("Done.")],
    }  # fmt: skip


def network(folder: Path, served: Served, fixed: dict[str, Any]) -> Path:
    """A one-agent network equipping the tool (``fixed`` as system parameters)."""
    worker = {"key": "worker", "is_default": True, "allow_respond": True,
              "prompt_template": "You are {agent_key}. Tools:\n{tools}",
              "tools": [{"tool": f"{served.server}.{served.tool}", "agent_params": sorted(served.args),
                         "system_params": fixed}]}  # fmt: skip
    path = folder / "solo.yaml"
    path.write_text(yaml.safe_dump({"name": "solo", "agents": [worker]}), encoding="utf-8")
    return path


@pytest.fixture(scope="module", params=sorted(SERVERS))
def project(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Served]:
    """A project folder whose phasegraph.toml names one MCP server (and each protocol's script)."""
    served: Served = SERVERS[request.param]
    folder = tmp_path_factory.mktemp(f"everywhere-{served.server}")
    entry = served.entry(folder)
    fixed = {"repo_path": str(folder / "repo")} if served.server == "git" else {}
    models = {
        p: f"scripted:{write_script(folder, t, f'{p}.json')}"
        for p, t in protocol_turns(served, fixed).items()
    }
    write_project(folder, {
        "models": models,
        "protocols": {"agent_network": {"network_file": str(network(folder, served, fixed))}},
        "mcp_servers": {served.server: entry},
    })  # fmt: skip
    return folder, served


def _clean_env(folder: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in OPERATOR_VARIABLES and k != "PYTHONPATH"}
    return {**env, "PHASEGRAPH_CHECKPOINTER": f"sqlite:{folder / 'state.db'}", "NO_COLOR": "1"}


def _ran(results: list[dict[str, Any]], served: Served) -> None:
    """The run called the server's tool once and read its real output."""
    assert [(r["name"], r["status"]) for r in results] == [(f"{served.server}.{served.tool}", "ok")], results
    assert served.expect in (results[0].get("output") or "")


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_phasegraph_run_uses_the_projects_mcp_server(project: tuple[Path, Served], protocol: str):
    folder, served = project
    done = subprocess.run(
        [str(PHASEGRAPH), "run", protocol, QUESTION, "--json", "--show-tool-outputs"],
        cwd=folder, env=_clean_env(folder), capture_output=True, text=True, timeout=180,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    events = [json.loads(line) for line in done.stdout.splitlines() if line.strip()]
    _ran([e for e in events if e["type"] == "tool_result"], served)
    assert events[-1]["type"] == "final"


@pytest.fixture(scope="module")
def served(project: tuple[Path, Served]) -> Iterator[tuple[Server, Served]]:
    """``phasegraph serve`` started in the project folder (it finds ./phasegraph.toml)."""
    folder, served = project
    with pytest.MonkeyPatch.context() as patch:
        for name in OPERATOR_VARIABLES:
            patch.delenv(name, raising=False)
        patch.delenv("PYTHONPATH", raising=False)
        server = Server(env={"PHASEGRAPH_CHECKPOINTER": f"sqlite:{folder / 'served.db'}"},
                        log=folder / "server.log", cwd=folder).start()  # fmt: skip
    try:
        yield server, served
    finally:
        server.stop()


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_ag_ui_uses_the_projects_mcp_server(served: tuple[Server, Served], protocol: str):
    server, project = served
    agent, run_id = Agent(server.url, f"everywhere-{protocol}"), uuid.uuid4().hex
    agent.say(uuid.uuid4().hex, QUESTION)
    with httpx.Client(base_url=server.url, timeout=120) as client:
        events = agent.run(client, f"/ag-ui/{protocol}", agent.input(run_id))
        trace = client.get(f"/api/requests/{run_id}/trace").json()
    started = [e for e in events if isinstance(e, ToolCallStartEvent)]
    assert [e.tool_call_name for e in started] == [f"{project.server}.{project.tool}"], started
    (result,) = [e for e in events if isinstance(e, ToolCallResultEvent)]
    assert result.tool_call_id == started[0].tool_call_id and json.loads(result.content)["status"] == "ok"
    assert isinstance(events[-1], RunFinishedEvent) and agent.pending_interrupts == []  # ended, not paused
    # AG-UI shows no tool output; the server's trace holds what the real server answered
    _ran([e["details"] for e in trace if e["type"] == "tool_result"], project)
