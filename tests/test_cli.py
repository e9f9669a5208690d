"""The phasegraph command: --json parsed back into the event union, exit codes, listings, help."""

import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

import pytest
from typer.testing import CliRunner

from phasegraph.nodes.events import Final, parse_event
from phasegraph.server.cli.main import COMMANDS, app
from tests.fake_openai import error, fake_openai, tool_reply
from tests.helpers import turn, write_script

runner = CliRunner()


def _events(output: str):
    return [parse_event(line) for line in output.splitlines() if line.strip()]


def test_json_output_is_one_event_per_line(workspace: Path):
    result = runner.invoke(
        app, ["run", "triggered_phase", "Summarise", "--json", "--model", "scripted:demo", "--workspace",
              str(workspace), "--project", "proj-7", "--show-tool-outputs"],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    events = _events(result.stdout)
    assert isinstance(events[-1], Final)
    assert {e.project_id for e in events} == {"proj-7"}
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    outputs = [e.output for e in events if e.type == "tool_result"]
    assert outputs[0] == "docs/roadmap.md\ndocs/team.md"


def test_repeating_script_ends_with_exit_zero(workspace: Path, tmp_path: Path):
    spec = write_script(tmp_path, turn("Again.", ("read_file", {"path": "docs/team.md"})), repeat_last=True)
    result = runner.invoke(
        app, ["run", "triggered_phase", "x", "--json", "--model", spec, "--workspace", str(workspace)]
    )
    assert result.exit_code == 0
    events = _events(result.stdout)
    assert sum(e.type == "tool_call" for e in events) == 1
    assert sum(e.type == "duplicate_tool_call" for e in events) == 4
    assert events[-1].type == "final"


def test_ten_distinct_calls_exhaust_the_cycle_budget(workspace: Path, tmp_path: Path):
    spec = write_script(tmp_path, *[turn("", ("search_files", {"query": f"q{i}"})) for i in range(10)])
    result = runner.invoke(
        app, ["run", "triggered_phase", "x", "--json", "--model", spec, "--workspace", str(workspace)]
    )
    assert result.exit_code == 0
    events = _events(result.stdout)
    assert sum(e.type == "tool_call" for e in events) == 3
    assert [e.budget for e in events if e.type == "budget_exhausted"] == ["cycles"]
    assert events[-1].type == "final"


def test_an_error_event_exits_non_zero(workspace: Path, tmp_path: Path):
    spec = write_script(tmp_path, turn("", ("list_files", {})))
    result = runner.invoke(
        app, ["run", "triggered_phase", "x", "--json", "--model", spec, "--workspace", str(workspace)]
    )
    assert result.exit_code == 1
    assert _events(result.stdout)[-1].type == "error"


def test_bad_input_gets_a_clear_error_and_exit_two(tmp_path: Path):
    unknown = runner.invoke(app, ["run", "nope", "x"])
    assert unknown.exit_code == 2 and "unknown protocol 'nope'" in unknown.stderr
    missing = runner.invoke(app, ["run", "triggered_phase", "x", "--workspace", str(tmp_path / "missing")])
    assert missing.exit_code == 2 and "is not a folder" in missing.stderr
    empty = runner.invoke(app, ["run", "triggered_phase", "  ", "--json"])
    assert empty.exit_code == 2 and "the message is empty" in _events(empty.stdout)[0].message
    bad_model = runner.invoke(app, ["run", "unified", "x", "--json", "--model", "gpt-4o"])
    assert bad_model.exit_code == 2
    assert _events(bad_model.stdout)[0].kind == "configuration"


def test_goal_pursuit_folders_missing_exit_two_and_an_empty_resource_folder_runs(tmp_path: Path):
    def pursue(*settings: str):
        pairs = [part for setting in settings for part in ("-s", setting)]
        return runner.invoke(app, ["run", "goal_pursuit", "Find the Grey Fox's compass", "--json", *pairs])

    no_resources = pursue(f"resources={tmp_path / 'missing'}")
    assert no_resources.exit_code == 2 and "is not a folder" in no_resources.stderr
    no_templates = pursue(f"template_dir={tmp_path / 'missing'}")
    assert no_templates.exit_code == 2
    assert _events(no_templates.stdout)[0].kind == "configuration"
    assert "template folder 'missing' does not exist or is not a folder" in no_templates.stderr
    (tmp_path / "empty").mkdir()
    lacking = pursue(f"template_dir={tmp_path / 'empty'}")  # the language asked for is the fallback
    assert lacking.exit_code == 2
    message = _events(lacking.stdout)[0].message
    assert "in 'en' (looked in en/)" in message and "'en' and 'en'" not in message
    # an empty repository is a world where nothing is found: the demo pursuit runs to its final answer
    empty = pursue(f"resources={tmp_path / 'empty'}")
    assert empty.exit_code == 0, empty.output
    events = _events(empty.stdout)
    assert isinstance(events[-1], Final) and "error" not in {e.type for e in events}
    assert all(not e.uris for e in events if e.type == "context_update" and e.action == "searched")
    assert [e.status for e in events if e.type == "tool_result"] == ["error", "error"]


def test_a_failed_model_call_is_counted_by_phasegraph_usage(tmp_path: Path, provider_env):
    database = f"sqlite:{tmp_path / 'planner.db'}"
    replies = [tool_reply("list_templates", {}), error(500, "the upstream model crashed")]
    with fake_openai(*replies) as fake:
        provider_env(fake.url, PHASEGRAPH_MODEL_MAX_RETRIES="0")
        ran = runner.invoke(
            app, ["run", "planner", "Which templates are there?", "--json", "--model", "openai:gpt-4o-mini",
                  "-s", f"database={database}"],
        )  # fmt: skip
    assert ran.exit_code == 1 and _events(ran.stdout)[-1].kind == "provider"
    assert len(fake.requests) == 2
    shown = runner.invoke(app, ["usage", "--database", database, "--by", "status"])
    assert shown.exit_code == 0, shown.output
    lines = [line.split() for line in shown.stdout.splitlines()]
    assert ["status", "calls", "failed", "input", "tokens", "output", "tokens", "cost", "(USD)"] in [
        [cell for cell in line if cell != "┃"] for line in lines
    ]
    cells = {line[1]: [cell for cell in line[2:] if cell != "│"] for line in lines if len(line) > 2}
    assert cells["error"][:2] == ["1", "1"] and cells["ok"][:2] == ["1", "0"]  # calls, failed
    assert cells["total"][:2] == ["2", "1"]


def test_human_output_shows_phases(workspace: Path):
    result = runner.invoke(app, ["run", "triggered_phase", "Summarise"])
    assert result.exit_code == 0
    assert "running offline on the bundled demo script" in result.stderr
    for fragment in (
        "▶ action_phase #1 (cycle 1)",
        "▶ tool_phase #2 (cycle 1)",
        "refused duplicate",
        "final answer",
    ):
        assert fragment in result.stdout


DEMO = "Summarise the roadmap in the docs folder."  # the README's demo (make demo)


def test_the_demo_prints_its_answer_once():
    answer = _events(runner.invoke(app, ["run", "triggered_phase", DEMO, "--json"]).stdout)[-1].answer
    shown = runner.invoke(app, ["run", "triggered_phase", DEMO], env={"COLUMNS": "200"})
    assert shown.exit_code == 0, shown.output
    first = answer.split(". ")[0]  # a panel would wrap the answer: its first sentence fits a line
    assert shown.stdout.count(first) == 1, shown.stdout
    assert "final answer" in shown.stdout  # the run still says how it ended


def test_goal_pursuit_runs_offline_with_readable_progress_and_json_lines():
    goal = "The Grey Fox found her compass: give it back to her and note it in chapter 3."
    result = runner.invoke(app, ["run", "goal_pursuit", goal])
    assert result.exit_code == 0, result.output
    text = " ".join(result.stdout.split())  # rich wraps long lines
    for fragment in (
        "▶ context_discovery #1 (iteration 1, round 1)",
        '⌕ search "Grey Fox": res://character/mira-voss',
        "≡ excluded res://place/saltmarsh-lighthouse",
        "◆ decided: execute move_item(",
        "↻ refine: required_context",
        "✔ approved (confidence 0.9)",
        "▶ execution #10 (iteration 2, step 1)",
        "final answer",
    ):
        assert fragment in text, fragment
    lines = runner.invoke(app, ["run", "goal_pursuit", goal, "--json"])
    events = _events(lines.stdout)
    assert lines.exit_code == 0 and isinstance(events[-1], Final)
    assert events[-1].resolution["status"] == "success"
    assert {"context_update", "decision", "verdict"} <= {e.type for e in events}


def test_protocols_and_graph_commands():
    listed = runner.invoke(app, ["protocols"])
    assert listed.exit_code == 0 and "triggered_phase" in listed.stdout and "unified" in listed.stdout
    drawn = runner.invoke(app, ["graph", "triggered_phase"])
    assert drawn.exit_code == 0 and "tool_phase -. &nbsp;cycles_spent&nbsp; .-> final_phase" in drawn.stdout
    assert runner.invoke(app, ["graph", "nope"]).exit_code == 2


def test_console_script_is_installed():
    script = Path(sys.executable).parent / "phasegraph"
    done = subprocess.run(
        [str(script), "run", "unified", "hi", "--json"], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert parse_event(done.stdout.splitlines()[-1]).type == "final"


def test_a_run_whose_every_tool_failed_says_so(tmp_path: Path):
    result = runner.invoke(app, ["run", "triggered_phase", "Summarise", "--workspace", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert "every tool call failed" in result.stdout
    assert "every tool call failed" not in runner.invoke(app, ["run", "triggered_phase", "Summarise"]).stdout


BROKEN = str(Path(__file__).parents[1] / "tools" / "networks" / "examples" / "broken.yaml")
EXAMPLE = str(Path(__file__).parents[1] / "tools" / "networks" / "examples" / "research.yaml")


def test_network_validate_lists_every_problem_and_exits_one():
    result = runner.invoke(app, ["network", "validate", BROKEN])
    assert result.exit_code == 1
    problems = [line for line in result.stderr.splitlines() if line.startswith("  - ")]
    assert len(problems) == 5 and "routes to 'editor'" in result.stderr
    valid = runner.invoke(app, ["network", "validate", EXAMPLE])
    assert valid.exit_code == 0 and "network 'research' is valid (3 agents" in valid.stdout


def test_network_publish_list_and_run_by_name(tmp_path: Path, workspace: Path):
    database = ["--database", f"sqlite:{tmp_path / 'state.db'}"]
    first = runner.invoke(app, ["network", "publish", EXAMPLE, "--project", "p1", *database])
    assert first.exit_code == 0 and "published research version 1 in project 'p1'" in first.stdout
    again = runner.invoke(app, ["network", "publish", EXAMPLE, "--project", "p1", *database])
    assert "unchanged: already published research version 1" in again.stdout
    listed = runner.invoke(app, ["network", "list", *database])
    assert listed.exit_code == 0 and "p1/research v1: 3 agents, starts at triage" in listed.stdout
    refused = runner.invoke(app, ["network", "publish", BROKEN, *database])
    assert refused.exit_code == 1 and "cannot be published" in refused.stderr
    memory = runner.invoke(app, ["network", "publish", EXAMPLE, "--database", "memory"])
    assert memory.exit_code == 1 and "keeps nothing" in memory.stderr
    ran = runner.invoke(
        app, ["run", "agent_network", "Who works on the streaming server?", "--json", "--model",
              "scripted:demo", "--workspace", str(workspace), "--project", "p1", "-s", "network=research",
              "-s", "network_version=1", "-s", f"database=sqlite:{tmp_path / 'state.db'}"],
    )  # fmt: skip
    assert ran.exit_code == 0, ran.output
    events = _events(ran.stdout)
    assert isinstance(events[-1], Final) and events[-1].agent == "writer"
    missing = runner.invoke(app, ["run", "agent_network", "x", "--json", "-s", "network=research", "-s",
                                  f"database=sqlite:{tmp_path / 'state.db'}"])  # fmt: skip
    assert missing.exit_code == 1 and _events(missing.stdout)[-1].type == "error"  # project default has none


def test_settings_must_be_key_value_and_known_fields():
    bad = runner.invoke(app, ["run", "agent_network", "x", "--json", "-s", "max_steps"])
    assert bad.exit_code == 2 and "KEY=VALUE" in bad.stderr
    unknown = runner.invoke(app, ["run", "agent_network", "x", "--json", "-s", "colour=blue"])
    assert (
        unknown.exit_code == 2 and _events(unknown.stdout)[0].type == "error" and "colour" in unknown.stderr
    )


def test_network_publish_makes_the_databases_folder_and_reports_what_it_cannot_store(tmp_path: Path):
    nested = tmp_path / "not" / "yet" / "state.db"
    first = runner.invoke(app, ["network", "publish", EXAMPLE, "--database", f"sqlite:{nested}"])
    assert first.exit_code == 0, first.output
    assert nested.is_file()
    blocked = tmp_path / "file"
    blocked.write_text("", encoding="utf-8")  # a file where the folder should be
    failed = runner.invoke(
        app, ["network", "publish", EXAMPLE, "--database", f"sqlite:{blocked / 'state.db'}"]
    )
    assert failed.exit_code == 1 and "could not be stored in sqlite:" in failed.stderr
    assert "Traceback" not in failed.output
    hidden = runner.invoke(
        app, ["network", "publish", EXAMPLE, "--database", "postgresql://who:s3cret@127.0.0.1:1/none"]
    )
    assert hidden.exit_code == 1 and "s3cret" not in hidden.output and "***" in hidden.stderr


def test_version_prints_the_installed_version():
    shown = runner.invoke(app, ["--version"])
    assert shown.exit_code == 0, shown.output
    assert shown.stdout == f"phasegraph {version('phasegraph')}\n"


def _command_paths() -> list[list[str]]:
    """Every command's words: the root, each sub-command, and each sub-command of a group."""
    paths: list[list[str]] = [[]]
    for name, entry in COMMANDS.items():
        paths.append([name])
        command = entry.load(name)
        paths += [[name, sub] for sub in getattr(command, "commands", {})]
    return paths


@pytest.mark.parametrize("words", _command_paths(), ids=lambda words: " ".join(words) or "phasegraph")
def test_help_shows_no_type_after_a_flag(words: list[str]):
    shown = runner.invoke(app, [*words, "--help"], env={"COLUMNS": "200"})
    assert shown.exit_code == 0, shown.output
    assert "--help" in shown.stdout and "<bool>" not in shown.stdout, shown.stdout
    # shell completion is installed for the whole command, so only the root offers it
    assert ("--install-completion" in shown.stdout) == (words == []), shown.stdout
