"""Project-file rules found by review: nothing a file says may be silently ignored or crash a run.

Role keys are checked; fields only the Python API sets are refused; a role model beats the protocol's
own ``model``; a relative ``scripted:`` path starts at the file's folder, like the workspace does.
"""

from pathlib import Path

import pytest

from phasegraph.graphs.registry import get_protocol
from phasegraph.nodes.errors import ConfigurationError
from phasegraph.nodes.project import load_project, project_problems
from tests.tool_projects import write_project, write_script


def test_a_misspelt_role_is_a_problem_at_its_line(tmp_path: Path) -> None:
    path = write_project(tmp_path, {"models": {"planner.reviewr": "scripted:demo"}})
    (problem,) = project_problems(path)
    assert problem.startswith(
        "phasegraph.toml:1: models.planner.reviewr:"
    )  # an inline table on line 1 and "reviewer" in problem


@pytest.mark.parametrize(
    ("protocol", "key"), [("xml_contract", "mcp_services"), ("planner", "planning_store")]
)
def test_a_field_only_python_sets_is_refused_not_a_crash(tmp_path: Path, protocol: str, key: str) -> None:
    path = write_project(tmp_path, {"protocols": {protocol: {key: "oops"}}})
    with pytest.raises(
        ConfigurationError, match=f"protocols.{protocol}.{key}: set by the server or the caller"
    ):
        get_protocol(protocol).make_context(project_file=str(path))


def test_a_role_model_beats_the_protocols_own_model(tmp_path: Path) -> None:
    main, role = (write_script(tmp_path, [{"content": text}], f"{text}.json") for text in ("main", "role"))
    path = write_project(tmp_path, {
        "models": {"goal_pursuit.refinement_analysis": f"scripted:{role}"},
        "protocols": {"goal_pursuit": {"model": f"scripted:{main}"}},
    })  # fmt: skip
    context = get_protocol("goal_pursuit").make_context(project_file=str(path))
    assert context.model == f"scripted:{main}"
    assert context.model_for("refinement_analysis") == f"scripted:{role}"
    assert context.model_for("action_decision") == f"scripted:{main}"


def test_a_relative_scripted_model_starts_at_the_files_folder(tmp_path: Path) -> None:
    folder = tmp_path / "project"
    folder.mkdir()
    write_script(folder, [{"content": "Hello."}])
    path = write_project(folder, {"model": "scripted:script.json"})
    project = load_project(path)
    assert project is not None and project.model_for("unified") == f"scripted:{folder / 'script.json'}"
    context = get_protocol("unified").make_context(project_file=str(path))  # started elsewhere: still found
    assert context.model == f"scripted:{folder / 'script.json'}"


def test_two_tools_one_wire_name_are_refused() -> None:
    from langchain_core.tools import tool

    from phasegraph.tools import ToolRegistry

    @tool("git.git_log")
    def dotted() -> str:
        """One."""
        return "1"

    @tool("git__git_log")
    def wired() -> str:
        """Two."""
        return "2"

    with pytest.raises(ValueError, match="would both reach models as 'git__git_log'"):
        ToolRegistry([dotted, wired])


def test_tool_globs_select_without_any_tool_source(tmp_path: Path) -> None:
    """A ``tools`` glob works when the project names no MCP server or Python tool (no toolset is opened)."""
    context = get_protocol("triggered_phase").make_context(
        tools=["read_*", "list_files"], workspace=str(tmp_path)
    )
    assert context.registry().names() == ["list_files", "read_file"]
    with pytest.raises(ConfigurationError, match="unknown tool"):
        get_protocol("triggered_phase").make_context(tools=["reed_file"], workspace=str(tmp_path)).registry()
