"""The "Bring your own tools and model" page: its example works as copied and is shown word for word."""

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from phasegraph.graphs.registry import PROTOCOLS
from phasegraph.nodes.project import ENV_VAR, load_project, project_problems
from phasegraph.nodes.settings import provider_settings
from phasegraph.server.cli.main import app
from tests.helpers import turn
from tests.tool_projects import git_repository, write_script

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "docs" / "examples" / "phasegraph.toml"
MODULE = ROOT / "docs" / "examples" / "my_tools.py"  # the Python tools the example names
PAGE = ROOT / "docs" / "your-tools.md"
PHASEGRAPH = str(Path(sys.executable).parent / "phasegraph")


def test_the_example_project_file_has_no_problem() -> None:
    assert project_problems(EXAMPLE) == []


def test_the_example_passes_config_check_as_shipped(monkeypatch: pytest.MonkeyPatch) -> None:
    """It named a module nobody had: config check failed on the page's own file."""
    monkeypatch.setenv(ENV_VAR, "")
    result = CliRunner().invoke(app, ["config", "check", str(EXAMPLE)])
    assert result.exit_code == 0, result.output
    assert "3 MCP server(s), 2 Python tool(s) from 1 source(s)" in result.stdout


def test_the_page_shows_the_example_and_its_module_word_for_word() -> None:
    page = PAGE.read_text(encoding="utf-8")
    assert f"```toml\n{EXAMPLE.read_text(encoding='utf-8')}```" in page
    assert f"```python\n{MODULE.read_text(encoding='utf-8')}```" in page


def test_the_example_works_as_copied_into_a_git_repository(tmp_path: Path) -> None:
    """Copied into a project, with no provider key: ``tools`` lists its tools, ``config check --connect``
    finds every rule real (only ``search``, an address to replace, does not answer), and the git server reads
    "." as the workspace (its ``cwd``) though the command runs elsewhere."""
    project = git_repository(tmp_path / "project")
    for source in (EXAMPLE, MODULE):
        shutil.copy(source, project)
    env = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", ENV_VAR)}
    env |= {"PYTHONPATH": str(ROOT), "NO_COLOR": "1", "COLUMNS": "200"}
    config = ["--config", str(project / "phasegraph.toml")]

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([PHASEGRAPH, *args], cwd=tmp_path, env=env, capture_output=True, text=True,
                              timeout=240)  # fmt: skip

    listed = cli("tools", "--json", "--protocol", "triggered_phase", *config)
    assert listed.returncode == 0, listed.stderr
    found = json.loads(listed.stdout)["triggered_phase"]
    assert {"read_file", "git.git_status", "git.git_commit"} <= {t["name"] for t in found["tools"]}
    assert set(found["unavailable"]) <= {"search"}
    checked = cli("config", "check", "--connect", str(project / "phasegraph.toml"))
    assert all(": mcp_servers.search: " in line for line in checked.stdout.splitlines()), checked.stdout
    status = ("git.git_status", {"repo_path": "."})
    script = write_script(tmp_path, [turn("", status), turn("The tree is clean.")])
    ran = cli("run", "triggered_phase", "Is the tree clean?", "--model", f"scripted:{script}", "--json",
              "--show-tool-outputs", *config)  # fmt: skip
    assert ran.returncode == 0, ran.stdout + ran.stderr
    results = [
        event for line in ran.stdout.splitlines() if (event := json.loads(line))["type"] == "tool_result"
    ]
    assert [(r["name"], r["status"]) for r in results] == [("git.git_status", "ok")], results
    assert "On branch" in results[0]["output"]


def test_the_readme_links_the_page_on_its_first_screen() -> None:
    first_screen = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()[:40]
    assert any("(docs/your-tools.md)" in line for line in first_screen)


@pytest.fixture
def openai_key(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The example names openai: models, which need a key to be built (never used: nothing runs)."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-used")
    provider_settings.cache_clear()  # read once per process: an earlier test may have read it unset
    yield
    provider_settings.cache_clear()


@pytest.mark.parametrize("protocol", ["triggered_phase", "unified", "xml_contract"])
@pytest.mark.usefixtures("openai_key")
def test_every_protocol_setting_of_the_example_applies(protocol: str) -> None:
    project = load_project(EXAMPLE)
    assert project is not None
    context = PROTOCOLS[protocol].make_context(project_file=str(EXAMPLE))
    for key, value in project.file.protocols.get(protocol, {}).items():
        assert getattr(context, key) == value
    assert context.model == "openai:gpt-4.1-mini"
    assert context.workspace == str(EXAMPLE.parent)
