"""``phasegraph network validate|publish`` with a project's tools: MCP and Python tools equipped by name."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from phasegraph.nodes.events import parse_event
from phasegraph.server.cli.main import app
from tests.graphs.test_agent_network import answer, tool
from tests.tool_projects import git_repository, git_server, write_project, write_script

runner = CliRunner()


def network_file(folder: Path, *tools: dict[str, Any]) -> str:
    """A one-agent network (``historian`` starts and answers) equipped with ``tools``."""
    agent = {"key": "historian", "is_default": True, "allow_respond": True, "tools": list(tools),
             "prompt_template": "You are {agent_key}. Tools:\n{tools}"}  # fmt: skip
    path = folder / "history.yaml"
    path.write_text(yaml.safe_dump({"name": "history", "agents": [agent]}), encoding="utf-8")
    return str(path)


@pytest.fixture
def project(tmp_path: Path) -> tuple[Path, Path]:
    """A project with the reference git server on a fresh repository and a Python tool."""
    repo = git_repository(tmp_path / "repo")
    path = write_project(
        tmp_path,
        {"mcp_servers": {"git": git_server(repo)}, "python_tools": {"count": "tests.user_tools:word_count"}},
    )
    return path, repo


def test_publishing_refuses_a_tool_the_project_does_not_have(tmp_path: Path, project: tuple[Path, Path]):
    config, _ = project
    unknown = network_file(tmp_path, {"tool": "git.git_nope"}, {"tool": "word_count"})
    database = ["--database", f"sqlite:{tmp_path / 'state.db'}"]
    refused = runner.invoke(app, ["network", "publish", unknown, "--config", str(config), *database])
    assert refused.exit_code == 1
    assert (
        "Agent 'historian' is equipped with the tool 'git.git_nope', which does not exist" in refused.stderr
    )
    assert "'git.git_log'" in refused.stderr and "word_count" in refused.stderr
    assert "no networks are published yet" in runner.invoke(app, ["network", "list", *database]).stdout
    # without the project, its tools are unknown: the same network's word_count is refused too
    bare = runner.invoke(app, ["network", "validate", unknown])
    assert bare.exit_code == 1 and "the tool 'word_count', which does not exist" in bare.stderr


def test_a_network_equipping_git_log_publishes_and_runs_from_the_cli(
    tmp_path: Path, project: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
):
    config, repo = project
    equipped = {
        "tool": "git.git_log",
        "agent_params": ["max_count"],
        "system_params": {"repo_path": str(repo)},
    }
    file = network_file(tmp_path, equipped, {"tool": "word_count"})
    state = f"sqlite:{tmp_path / 'state.db'}"
    valid = runner.invoke(app, ["network", "validate", file, "--config", str(config)])
    assert valid.exit_code == 0 and "network 'history' is valid" in valid.stdout
    monkeypatch.setenv("PHASEGRAPH_CONFIG", str(config))  # what a project names without --config
    published = runner.invoke(app, ["network", "publish", file, "--database", state])
    assert published.exit_code == 0, published.output
    assert "published history version 1" in published.stdout
    script = write_script(tmp_path, [tool("git.git_log", max_count=3), answer("Two commits so far.")])
    ran = runner.invoke(
        app, ["run", "agent_network", "What happened?", "--json", "--model", f"scripted:{script}",
              "--workspace", str(tmp_path), "--show-tool-outputs", "-s", "network=history",
              "-s", f"database={state}"],
    )  # fmt: skip
    assert ran.exit_code == 0, ran.output
    events = [parse_event(line) for line in ran.stdout.splitlines() if line.startswith("{")]
    (result,) = [e for e in events if e.type == "tool_result"]
    assert result.name == "git.git_log" and result.status == "ok" and "second commit" in (result.output or "")
    assert events[-1].type == "final" and events[-1].answer == "Two commits so far."
