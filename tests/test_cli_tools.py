"""The command line of a project file: ``--config``, ``config check``, ``tools`` and approvals.

Projects name the reference ``mcp-server-git`` (a real server over stdio, on a repository each test
makes) and Python tools from ``tests/user_tools.py``. Runs are the installed console script in a
subprocess (``tests`` importable through PYTHONPATH), on the scripted model; approvals are answered
on a real pseudo-terminal, through ``phasegraph chat``'s input lines, by ``--approve-all`` and by a
later ``--resume``. What a call did is read from the repository itself (``git branch``).
"""

from __future__ import annotations

import json
import os
import pty
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from phasegraph.nodes.project import ENV_VAR
from phasegraph.server.cli.main import app
from tests.helpers import turn
from tests.tool_projects import demo_server, git_repository, git_server, write_project, write_script

PHASEGRAPH = str(Path(sys.executable).parent / "phasegraph")
ROOT = Path(__file__).resolve().parent.parent
#: One command can take a while on a loaded machine (Python, LangChain and an MCP server start).
TIMEOUT = 240
runner = CliRunner()
USER_TOOLS = "tests.user_tools:"


@pytest.fixture(autouse=True)
def _no_project_in_force(monkeypatch: pytest.MonkeyPatch) -> None:
    """``--config`` sets PHASEGRAPH_CONFIG in this process (CliRunner): restore it after each test."""
    monkeypatch.setenv(ENV_VAR, "")


def _env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != ENV_VAR}
    return {**env, "PYTHONPATH": str(ROOT), "NO_COLOR": "1", "COLUMNS": "200",
            "PHASEGRAPH_CHECKPOINTER": f"sqlite:{tmp_path / 'state.db'}"}  # fmt: skip


def _cli(
    tmp_path: Path, *args: str, stdin: str | None = "", unset: tuple[str, ...] = ()
) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in _env(tmp_path).items() if k not in unset}
    return subprocess.run(
        [PHASEGRAPH, *args], cwd=tmp_path, env=env, input=stdin, capture_output=True, text=True,
        timeout=TIMEOUT,
    )  # fmt: skip


def _lines(stdout: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stdout.splitlines() if line.strip()]


def _branches(repo: Path) -> set[str]:
    listed = subprocess.run(["git", "-C", str(repo), "branch", "--format=%(refname:short)"],
                            capture_output=True, text=True, check=True).stdout  # fmt: skip
    return set(listed.split())


def _git_project(
    tmp_path: Path, turns: list[dict[str, Any]], follow_ups: list[Any] | None = None, **more: Any
) -> tuple[Path, Path]:
    """A project naming the git server (its branch creation waits for approval); (project file, repo)."""
    repo = tmp_path / "repo"
    if not repo.exists():
        git_repository(repo)
    script = write_script(tmp_path, turns, follow_ups=follow_ups or [])
    data = {"model": f"scripted:{script}", "workspace": ".", "mcp_servers": {"git": git_server(repo)},
            "tools": {"git.git_create_branch": {"confirm": True}}, **more}  # fmt: skip
    return write_project(tmp_path, data), repo


def _branch_turns(repo: Path, name: str = "feature") -> list[dict[str, Any]]:
    create = ("git.git_create_branch", {"repo_path": str(repo), "branch_name": name})
    return [turn("", create), turn("Done.")]


# --- config check ----------------------------------------------------------------------------------


def test_config_check_passes_a_valid_project_with_a_summary(tmp_path: Path):
    path, _ = _git_project(
        tmp_path, [turn("Hi.")],
        python_tools={"mine": USER_TOOLS + "TOOLS", "count": USER_TOOLS + "word_count"},
        protocols={"triggered_phase": {"tools": ["git.*", "shout"], "max_phase_cycles_per_turn": 2}},
        models={"planner.reviewer": "scripted:demo"},
    )  # fmt: skip
    result = runner.invoke(app, ["config", "check", str(path)])
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith(f"ok: {path}: ")
    for part in ("2 model(s)", "1 MCP server(s)", "3 Python tool(s) from 2 source(s)", "1 tool policy(ies)"):
        assert part in result.stdout


BROKEN = {
    "toml syntax": (
        'model = "x"\n[tools\nconfirm = true\n',
        ["phasegraph.toml: not valid TOML: Expected ']' at the end of a table declaration (at line 2"],
    ),
    "unknown key": ('model = "scripted:demo"\nmodle = "x"\n', ["phasegraph.toml:2: modle: unknown key"]),
    "wrong type": (
        'model = "scripted:demo"\n\nconnect_timeout_seconds = "soon"\n',
        ["phasegraph.toml:3: connect_timeout_seconds: Input should be a valid number"],
    ),
    "wrong policy type": (
        '[tools.shout]\nconfirm = "maybe"\n',
        ["phasegraph.toml:1: tools.shout: names no tool", "phasegraph.toml:2: tools.shout.confirm:"],
    ),
    "unknown protocol setting": (
        "[protocols.triggered_phase]\nmax_phase_cycles_per_turn = 2\nmax_cycles = 3\n",
        ["phasegraph.toml:3: protocols.triggered_phase.max_cycles: triggered_phase has no such setting"],
    ),
    "wrong protocol setting type": (
        '[protocols.unified]\nmax_tool_args_chars = "3000"\n',
        ["phasegraph.toml:2: protocols.unified.max_tool_args_chars: Input should be a valid integer"],
    ),
    "bad python import path": (
        '[python_tools]\nmine = "tests.user_tools:TOOLS"\ngone = "tests.no_such_module:tools"\n'
        'odd = "tests.user_tools:NOT_A_TOOL"\n',
        ["phasegraph.toml:3: python_tools.gone: python tool source 'gone': cannot import 'tests.no_such_",
         "phasegraph.toml:4: python_tools.odd: python tool source 'odd'"],
    ),
    "misspelt policy keys": (
        '[python_tools]\nmine = "tests.user_tools:TOOLS"\n\n[tools.shot]\nconfirm = true\n'
        '[tools."git.git_commit"]\nconfirm = true\n[tools.shout]\nconfirm = true\n[tools.read_file]\n'
        'timeout_seconds = 2\n[tools."python.shout"]\nconfirm = true\n',
        ["phasegraph.toml:4: tools.shot: names no tool, MCP server or Python source of this project",
         "phasegraph.toml:6: tools.git.git_commit: names no tool, MCP server or Python source"],
    ),
    "bad mcp server": (
        '[mcp_servers.git]\ntransport = "stdio"\ncommand = "git"\n\n[mcp_servers.odd]\ncommand = "x"\n',
        ["phasegraph.toml:5: mcp_servers.odd.transport: 'transport' must be 'stdio', 'streamable_http'"],
    ),
}  # fmt: skip


@pytest.mark.parametrize("case", list(BROKEN))
def test_config_check_names_each_problems_key_and_line_and_exits_two(tmp_path: Path, case: str):
    text, expected = BROKEN[case]
    path = tmp_path / "phasegraph.toml"
    path.write_text(text, encoding="utf-8")
    result = runner.invoke(app, ["config", "check", str(path)])
    assert result.exit_code == 2, result.output
    for part in expected:
        assert part in result.stdout, result.stdout
    assert len(result.stdout.splitlines()) == len(expected)  # one line per problem, nothing else
    assert "ok:" not in result.stdout


def test_config_check_lists_every_problem_of_a_file(tmp_path: Path):
    path = tmp_path / "phasegraph.toml"
    path.write_text(
        'modle = "x"\ncall_timeout_seconds = -1\n[tools."git.*"]\nconfirm = 3\n', encoding="utf-8"
    )
    result = runner.invoke(app, ["config", "check", str(path)])
    assert result.exit_code == 2
    lines = result.stdout.splitlines()
    assert [line.split(": ")[0:2] for line in lines] == [
        ["phasegraph.toml:1", "modle"], ["phasegraph.toml:2", "call_timeout_seconds"],
        ["phasegraph.toml:4", "tools.git.*.confirm"],
    ]  # fmt: skip


#: Seven mistakes of five kinds (the file's shape, MCP entries, a protocol setting, an import, a rule naming
#: no server), each listed in one pass at its own key's line: a misspelt key in an MCP table too, and the
#: second bad table.
SEVEN_MISTAKES = """\
modle = "scripted:demo"
call_timeout_seconds = "soon"

[mcp_servers.one]
transport = "stdio"
command = "python"
agrs = ["-m", "server"]

[mcp_servers.two]
transport = "pigeon"

[protocols.unified]
max_tool_call = 3

[python_tools]
gone = "tests.no_such_module:tools"

[tools."git.git_log"]
confirm = true
"""


def test_config_check_lists_every_problem_in_one_pass_each_at_its_line(tmp_path: Path):
    path = tmp_path / "phasegraph.toml"
    path.write_text(SEVEN_MISTAKES, encoding="utf-8")
    result = runner.invoke(app, ["config", "check", str(path)])
    assert result.exit_code == 2, result.output
    assert [line.split(": ")[:2] for line in result.stdout.splitlines()] == [
        ["phasegraph.toml:1", "modle"], ["phasegraph.toml:2", "call_timeout_seconds"],
        ["phasegraph.toml:7", "mcp_servers.one.agrs"], ["phasegraph.toml:10", "mcp_servers.two.transport"],
        ["phasegraph.toml:13", "protocols.unified.max_tool_call"],
        ["phasegraph.toml:16", "python_tools.gone"], ["phasegraph.toml:18", "tools.git.git_log"],
    ]  # fmt: skip
    assert "unknown key 'agrs' (a stdio entry takes args, command, cwd, env, transport)" in result.stdout
    assert "7 problem(s)" in result.stderr
    # every interface refuses the file with the same list
    ran = runner.invoke(app, ["run", "unified", "Hi", "--config", str(path)])
    assert (
        ran.exit_code == 2 and "has 7 problem(s)" in ran.stderr and "mcp_servers.two.transport" in ran.stderr
    )


def _demo_project(tmp_path: Path, rule: str = "demo.calculat", **more: Any) -> Path:
    """A project of the demo server whose rule names ``rule`` (``calculat``: a tool the server lacks)."""
    script = write_script(tmp_path, [turn("Hi.")])
    return write_project(tmp_path, {
        "model": f"scripted:{script}", "workspace": ".", "mcp_servers": {"demo": demo_server(), **more},
        "tools": {rule: {"confirm": True}, "demo.*": {"timeout_seconds": 5}},
    })  # fmt: skip


def test_config_check_connect_catches_a_misspelt_server_tool_rule(tmp_path: Path):
    path = _demo_project(tmp_path, broken={"transport": "stdio", "command": "no-such-command-here"})
    plain = runner.invoke(app, ["config", "check", str(path)])
    assert plain.exit_code == 0 and plain.stdout.startswith("ok: "), plain.output  # nothing started
    connected = runner.invoke(app, ["config", "check", "--connect", str(path)])
    assert connected.exit_code == 2, connected.output
    assert connected.stdout.splitlines() == [
        "phasegraph.toml:11: mcp_servers.broken: the MCP server 'broken' did not start: command not found: "
        "no-such-command-here",
        "phasegraph.toml:17: tools.demo.calculat: the MCP server 'demo' has no tool 'calculat' (its tools: "
        "always_fails, calculate, list_files, read_file, slow_echo)",
    ]
    good = runner.invoke(
        app, ["config", "check", "--connect", str(_demo_project(tmp_path, "demo.calculate"))]
    )
    assert good.exit_code == 0 and "1 MCP server(s) (5 tool(s))" in good.stdout, good.output


@pytest.mark.parametrize("thread", [[], ["--thread", "t-1"]], ids=["plain", "thread"])
def test_a_run_stopped_by_a_misspelt_server_tool_rule_exits_two_naming_its_line(
    tmp_path: Path, thread: list[str]
):
    """The rule is found when the run starts the server: the run is refused as a malformed file is."""
    path = _demo_project(tmp_path)
    done = _cli(tmp_path, "run", "triggered_phase", "Hi", "--json", "--config", str(path), *thread)
    assert done.returncode == 2, done.stdout + done.stderr
    error = _lines(done.stdout)[-1]
    assert error["type"] == "error" and error["kind"] == "configuration"
    assert error["message"].startswith(
        "phasegraph.toml:13: tools.demo.calculat: the MCP server 'demo' has no"
    )


#: Python tool modules that try to end the process as they are imported, and what config check says of each.
ENDING = {
    "sys.exit(0)": ("import sys\nsys.exit(0)\n", "SystemExit(0)"),
    "SystemExit(3)": ("raise SystemExit(3)\n", "SystemExit(3)"),  # the approval code, once
    "KeyboardInterrupt": ("raise KeyboardInterrupt\n", "KeyboardInterrupt"),  # was exit 130
}


@pytest.mark.parametrize("case", list(ENDING))
def test_a_tool_module_ending_the_process_at_import_is_a_problem_and_exit_two(tmp_path: Path, case: str):
    code, what = ENDING[case]
    module = f"ends_at_import_{list(ENDING).index(case)}"  # one per case: sys.modules remembers a name
    (tmp_path / f"{module}.py").write_text(code, encoding="utf-8")
    path = write_project(tmp_path, {"python_tools": {"mine": f"{module}:tools"}})
    result = runner.invoke(app, ["config", "check", str(path)])
    assert result.exit_code == 2, result.output
    why = f"cannot import {module!r} (its code raises {what} as it is imported)"
    assert result.stdout == f"phasegraph.toml:1: python_tools.mine: python tool source 'mine': {why}\n"


@pytest.mark.parametrize(
    "args",
    [["config", "check", "phasegraph.toml"], ["run", "triggered_phase", "Hi", "--config", "phasegraph.toml"],
     ["serve", "--port", "0", "--config", "phasegraph.toml"]],
    ids=["config check", "run", "serve"],
)  # fmt: skip
def test_a_tool_module_that_hangs_at_import_is_a_problem_after_its_timeout(tmp_path: Path, args: list[str]):
    """A fresh process: the command must end (exit 2) while the import goes on on its daemon thread."""
    (tmp_path / "hangs_at_import.py").write_text("import time\ntime.sleep(600)\n", encoding="utf-8")
    data = {"import_timeout_seconds": 0.5, "python_tools": {"mine": "hangs_at_import:tools"}}
    write_project(tmp_path, data)
    done = _cli(tmp_path, *args)
    assert done.returncode == 2, done.stdout + done.stderr
    problem = "python tool source 'mine': importing 'hangs_at_import' did not end within 0.5 s"
    assert f"phasegraph.toml:2: python_tools.mine: {problem}" in done.stdout + done.stderr


def test_a_scripted_model_naming_a_device_is_a_problem_of_check_and_run(tmp_path: Path):
    """``scripted:/dev/zero`` grew until killed; /dev/null is the same kind of file, with an end."""
    path = write_project(tmp_path, {"model": "scripted:/dev/null"})
    checked = runner.invoke(app, ["config", "check", str(path)])
    assert checked.exit_code == 2, checked.output
    assert checked.stdout == (
        "phasegraph.toml:1: model: cannot read script null: a device, not a regular file\n"
    )
    ran = runner.invoke(app, ["run", "triggered_phase", "Hi", "--config", str(path)])
    assert ran.exit_code == 2 and "phasegraph.toml:1: model: cannot read script null" in ran.stderr


def test_config_check_without_a_file_in_force_exits_two(tmp_path: Path):
    result = runner.invoke(app, ["config", "check", str(tmp_path / "missing.toml")])
    assert result.exit_code == 2 and "cannot be read" in result.stdout


def test_a_run_with_a_malformed_project_is_refused_before_it_runs(tmp_path: Path):
    path = tmp_path / "phasegraph.toml"
    path.write_text('modle = "x"\n[protocols.triggered_phase]\nmax_cycles = 3\n', encoding="utf-8")
    result = runner.invoke(app, ["run", "triggered_phase", "Hi", "--config", str(path), "--json"])
    assert result.exit_code == 2
    refusal = _lines(result.stdout)
    assert (
        len(refusal) == 1
        and refusal[0]["type"] == "error"
        and "phasegraph.toml:1: modle" in refusal[0]["message"]
    )
    assert "phasegraph.toml:1: modle: unknown key" in result.stderr
    # a file that parses but sets what the protocol does not have is refused too, every problem named
    path.write_text("[protocols.triggered_phase]\nmax_cycles = 3\nbudget = 1\n", encoding="utf-8")
    result = runner.invoke(app, ["run", "triggered_phase", "Hi", "--config", str(path)])
    assert result.exit_code == 2
    assert "phasegraph.toml:2: protocols.triggered_phase.max_cycles" in result.stderr
    assert "phasegraph.toml:3: protocols.triggered_phase.budget" in result.stderr
    assert "final answer" not in result.stdout


# --- tools -----------------------------------------------------------------------------------------


def test_tools_lists_builtin_mcp_and_python_tools_with_their_sources(tmp_path: Path):
    path, _ = _git_project(
        tmp_path, [turn("Hi.")],
        python_tools={"mine": "tests.user_tools:TOOLS", "count": "tests.user_tools:word_count"},
        protocols={"unified": {"tools": ["git.git_log", "word_count"]}},
    )  # fmt: skip
    done = _cli(tmp_path, "tools", "--json", "--config", str(path))
    assert done.returncode == 0, done.stderr
    listing = json.loads(done.stdout)
    assert set(listing) == {"triggered_phase", "unified", "goal_pursuit", "agent_network", "xml_contract",
                            "planner"}  # fmt: skip
    tools = {t["name"]: t for t in listing["triggered_phase"]["tools"]}
    assert tools["list_files"]["source"] == "builtin"
    assert tools["word_count"]["source"] == "python:count" and "text" in tools["word_count"]["parameters"]
    assert tools["shout"]["source"] == tools["archive_everything"]["source"] == "python:mine"
    assert tools["git.git_log"]["source"] == "mcp:git"
    assert "repo_path" in tools["git.git_log"]["parameters"] and tools["git.git_log"]["description"]
    assert tools["git.git_create_branch"]["policy"] == {"confirm": True}
    assert tools["git.git_log"]["policy"] == {}
    assert {"git.git_status", "git.git_diff", "git.git_commit"} <= set(tools)
    # the protocol's tools patterns choose what it sees
    assert {t["name"] for t in listing["unified"]["tools"]} == {"git.git_log", "word_count"}
    assert listing["triggered_phase"]["unavailable"] == {}
    assert "note" in listing["xml_contract"]


def test_tools_lists_without_making_a_model_so_no_provider_key_is_needed(tmp_path: Path):
    """openai: models cannot be made without OPENAI_API_KEY, and listing tools made every protocol's."""
    models = {"planner.reviewer": "openai:o4-mini", "goal_pursuit.action_decision": "openai:gpt-4.1"}
    path = write_project(tmp_path, {"model": "openai:gpt-4.1-mini", "models": models,
                                    "python_tools": {"count": USER_TOOLS + "word_count"}})  # fmt: skip
    listed = _cli(tmp_path, "tools", "--json", "--config", str(path), unset=("OPENAI_API_KEY",))
    assert listed.returncode == 0, listed.stderr
    listing = json.loads(listed.stdout)
    for protocol in ("triggered_phase", "unified", "goal_pursuit", "planner"):
        assert "word_count" in {t["name"] for t in listing[protocol]["tools"]}
    ran = _cli(tmp_path, "run", "unified", "Hi", "--config", str(path), unset=("OPENAI_API_KEY",))
    assert (
        ran.returncode == 2 and "needs OPENAI_API_KEY" in ran.stderr
    )  # a run makes its model before it starts


def test_tools_names_a_server_that_did_not_start_and_still_exits_zero(tmp_path: Path):
    path, _ = _git_project(tmp_path, [turn("Hi.")])
    text = path.read_text(encoding="utf-8")
    broken = '\n[mcp_servers.broken]\ntransport = "stdio"\ncommand = "no-such-command-here"\nargs = []\n'
    path.write_text(text + broken, encoding="utf-8")
    done = _cli(tmp_path, "tools", "--protocol", "triggered_phase", "--config", str(path))
    assert done.returncode == 0, done.stderr
    assert "triggered_phase" in done.stdout and "git.git_log [mcp:git]" in done.stdout
    assert "MCP server 'broken' did not start:" in done.stdout
    as_json = json.loads(_cli(tmp_path, "tools", "--protocol", "triggered_phase", "--json", "--config",
                              str(path)).stdout)  # fmt: skip
    assert list(as_json) == ["triggered_phase"] and set(as_json["triggered_phase"]["unavailable"]) == {
        "broken"
    }


# --- runs with the project's tools -------------------------------------------------------------------


@pytest.mark.parametrize("protocol", ["triggered_phase", "unified"])
def test_run_calls_the_git_servers_tool_for_real(tmp_path: Path, protocol: str):
    repo = git_repository(tmp_path / "repo")
    log = ("git.git_log", {"repo_path": str(repo)})
    path, _ = _git_project(tmp_path, [turn("", log), turn("Two commits.")])
    # named with --config, or found as ./phasegraph.toml in the folder the command runs in
    named = ["--config", str(path)] if protocol == "triggered_phase" else []
    done = _cli(tmp_path, "run", protocol, "What happened?", "--json", "--show-tool-outputs", *named)
    assert done.returncode == 0, done.stdout + done.stderr
    events = _lines(done.stdout)
    results = [e for e in events if e["type"] == "tool_result"]
    assert [(r["name"], r["status"]) for r in results] == [("git.git_log", "ok")]
    assert "second commit" in results[0]["output"] and "first commit" in results[0]["output"]
    assert events[-1]["type"] == "final" and events[-1]["answer"] == "Two commits."
    assert "No --model given" not in done.stderr  # the project's model ran


def test_a_python_tool_past_its_timeout_does_not_keep_the_command_running(tmp_path: Path):
    """The call fails at its timeout and the command ends with the run (the tool's thread is left behind);
    it waited for the call before, the whole hour here, which ``_cli``'s timeout turns into a failure."""
    script = write_script(tmp_path, [turn("", ("nap", {"seconds": 3600})), turn("Gave up on it.")])
    tools = {"python_tools": {"nap": USER_TOOLS + "nap"}, "tools": {"nap": {"timeout_seconds": 1}}}
    project = write_project(tmp_path, {"model": f"scripted:{script}", **tools})
    done = _cli(tmp_path, "run", "unified", "Nap.", "--json", "--config", str(project))
    assert done.returncode == 0, done.stdout + done.stderr
    events = _lines(done.stdout)
    assert [(e["name"], e["error"]) for e in events if e["type"] == "tool_result"] == [
        ("nap", "nap gave no answer within 1 s")
    ]
    assert events[-1]["type"] == "final" and events[-1]["answer"] == "Gave up on it."


# --- approvals -----------------------------------------------------------------------------------


def _on_a_terminal(tmp_path: Path, args: list[str], answers: str) -> subprocess.CompletedProcess[str]:
    """Run the command with a pseudo-terminal as its standard input, answers typed in advance."""
    controller, terminal = pty.openpty()
    try:
        os.write(controller, answers.encode())
        done = subprocess.run([PHASEGRAPH, *args], cwd=tmp_path, env=_env(tmp_path), stdin=terminal,
                              capture_output=True, text=True, timeout=TIMEOUT)  # fmt: skip
    finally:
        os.close(terminal)
        os.close(controller)
    return done


@pytest.mark.parametrize(
    ("answers", "branches", "seen"),
    [
        ("a\n", {"feature"}, "✔ approved git.git_create_branch"),
        ('edit\n{"repo_path": "REPO", "branch_name": "edited"}\n', {"edited"}, "with edited arguments"),
        ("r\nnot on a Friday\n", set(), "✗ rejected git.git_create_branch: not on a Friday"),
    ],
    ids=["approve", "edit", "reject"],
)
def test_run_asks_on_the_terminal_before_the_call(
    tmp_path: Path, answers: str, branches: set[str], seen: str
):
    repo = git_repository(tmp_path / "repo")
    path, _ = _git_project(tmp_path, _branch_turns(repo))
    before = _branches(repo)
    done = _on_a_terminal(tmp_path, ["run", "triggered_phase", "Make a branch", "--config", str(path)],
                          answers.replace("REPO", str(repo)))  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert "? git.git_create_branch waits for your approval" in done.stdout
    assert '"branch_name": "feature"' in done.stdout  # the call it asks about, arguments shown
    assert seen in done.stdout
    assert _branches(repo) - before == branches
    assert "final answer" in done.stdout


def test_a_rejected_call_made_again_is_asked_again_and_the_retry_ends_within_the_default_budget(
    tmp_path: Path,
):
    """The issue's report: a rejected call made again was refused as 'already executed', and the rejection
    used one of the 3 cycles."""
    repo = git_repository(tmp_path / "repo")
    create = ("git.git_create_branch", {"repo_path": str(repo), "branch_name": "feature"})
    status, log = ("git.git_status", {"repo_path": str(repo)}), ("git.git_log", {"repo_path": str(repo)})
    turns = [turn("", create), turn("", create), turn("", status), turn("", log), turn("Branch made.")]
    path, _ = _git_project(tmp_path, turns)
    done = _on_a_terminal(tmp_path, ["run", "triggered_phase", "Make a branch", "--config", str(path)],
                          "r\nname it properly\na\n")  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.count("? git.git_create_branch waits for your approval") == 2
    assert "✗ rejected git.git_create_branch: name it properly" in done.stdout
    assert "✔ approved git.git_create_branch" in done.stdout and "already executed" not in done.stdout
    assert "feature" in _branches(repo)
    assert "Branch made." in done.stdout and "final answer" in done.stdout


def test_a_bad_edit_is_asked_again_and_the_second_answer_runs(tmp_path: Path):
    repo = git_repository(tmp_path / "repo")
    path, _ = _git_project(tmp_path, _branch_turns(repo))
    answers = 'e\n[1]\n{"branch_name": 5}\na\n'  # not an object; then wrong for the schema; then approve
    done = _on_a_terminal(
        tmp_path, ["run", "triggered_phase", "Make a branch", "--config", str(path)], answers
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "the arguments are one JSON object" in done.stdout
    assert (
        "your last answer was not taken: the edited arguments do not fit git.git_create_branch" in done.stdout
    )
    assert "feature" in _branches(repo)


def test_approve_all_approves_without_asking(tmp_path: Path):
    repo = git_repository(tmp_path / "repo")
    path, _ = _git_project(tmp_path, _branch_turns(repo))
    done = _cli(tmp_path, "run", "triggered_phase", "Make a branch", "--approve-all", "--config", str(path))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "waits for your approval" not in done.stdout and "✔ approved git.git_create_branch" in done.stdout
    assert "feature" in _branches(repo)


@pytest.mark.parametrize("protocol", ["triggered_phase", "unified"])
def test_json_exits_three_with_the_interrupt_and_a_later_resume_finishes(tmp_path: Path, protocol: str):
    repo = git_repository(tmp_path / "repo")
    path, _ = _git_project(tmp_path, _branch_turns(repo))
    config = ["--config", str(path), "--json"]
    asked = _cli(tmp_path, "run", protocol, "Make a branch", "--thread", "t-1", *config)
    assert asked.returncode == 3, asked.stdout + asked.stderr
    lines = _lines(asked.stdout)
    waiting = lines[-1]
    assert waiting["type"] == "interrupt" and waiting["threadId"] == "t-1" and waiting["protocol"] == protocol
    assert waiting["value"]["type"] == "approval"
    assert waiting["value"]["call"]["name"] == "git.git_create_branch"
    assert waiting["value"]["call"]["args"] == {"repo_path": str(repo), "branch_name": "feature"}
    assert [e["type"] for e in lines[-3:-1]] == ["approval_requested", "paused"]
    assert "feature" not in _branches(repo)  # nothing ran before its approval
    # a resume that is no answer is asked again: still waiting, still exit 3
    again = _cli(tmp_path, "run", protocol, "--thread", "t-1", "--resume", '{"decision": "maybe"}', *config)
    assert again.returncode == 3, again.stdout + again.stderr
    assert "'decision' must be approve, edit or reject" in _lines(again.stdout)[-1]["value"]["problem"]
    resumed = _cli(tmp_path, "run", protocol, "--thread", "t-1", "--resume", "approve", *config)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    events = _lines(resumed.stdout)
    assert [(e["name"], e["status"]) for e in events if e["type"] == "tool_result"] == [
        ("git.git_create_branch", "ok")
    ]
    assert events[-1]["type"] == "final" and "feature" in _branches(repo)
    # nothing waits now: a resume is refused
    late = _cli(tmp_path, "run", protocol, "--thread", "t-1", "--resume", "approve", *config)
    assert late.returncode == 2 and "waits for no approval" in late.stderr


def test_a_plain_run_without_a_terminal_exits_three_and_keeps_nothing(tmp_path: Path):
    repo = git_repository(tmp_path / "repo")
    path, _ = _git_project(tmp_path, _branch_turns(repo))
    done = _cli(tmp_path, "run", "triggered_phase", "Make a branch", "--config", str(path))
    assert done.returncode == 3, done.stdout + done.stderr
    waiting = json.loads(done.stdout.splitlines()[-1])
    assert waiting["type"] == "interrupt" and waiting["threadId"] is None
    assert "run it with --thread ID" in done.stderr and "feature" not in _branches(repo)


def test_resume_needs_a_thread(tmp_path: Path):
    result = runner.invoke(app, ["run", "triggered_phase", "--resume", "approve"])
    assert result.exit_code == 2 and "--thread" in result.stderr


def test_chat_asks_on_its_input_lines(tmp_path: Path):
    repo = git_repository(tmp_path / "repo")
    path, _ = _git_project(tmp_path, _branch_turns(repo, "one"), follow_ups=[_branch_turns(repo, "two")])
    lines = "Make branch one\nr\nnot that one\nMake branch two\na\n/exit\n"
    done = _cli(tmp_path, "chat", "triggered_phase", "--config", str(path), stdin=lines)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.count("waits for your approval") == 2
    assert "✗ rejected git.git_create_branch: not that one" in done.stdout
    assert _branches(repo) >= {"two"} and "one" not in _branches(repo)


def test_chat_input_ending_before_the_answer_leaves_the_call_waiting_for_a_resume(tmp_path: Path):
    repo = git_repository(tmp_path / "repo")
    path, _ = _git_project(tmp_path, _branch_turns(repo))
    config = ["--thread", "c-1", "--config", str(path)]
    done = _cli(tmp_path, "chat", "triggered_phase", *config, stdin="Make a branch\n")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "the thread waits for your approval of git.git_create_branch" in done.stdout
    assert "feature" not in _branches(repo)
    rejected = _cli(tmp_path, "run", "triggered_phase", *config, "--json",
                    "--resume", '{"decision": "reject", "reason": "not today"}')  # fmt: skip
    assert rejected.returncode == 0, rejected.stdout + rejected.stderr
    events = _lines(rejected.stdout)
    answered = [e for e in events if e["type"] == "approval_answered"]
    assert [(a["decision"], a["reason"]) for a in answered] == [("reject", "not today")]
    assert events[-1]["type"] == "final" and "feature" not in _branches(repo)


def test_serve_refuses_a_malformed_project_before_it_starts(tmp_path: Path):
    path = tmp_path / "phasegraph.toml"
    path.write_text('[tools.shout]\nconfirm = "maybe"\ntimeout_seconds = 0\n', encoding="utf-8")
    result = runner.invoke(app, ["serve", "--config", str(path), "--port", "1"])
    assert result.exit_code == 2
    assert "phasegraph.toml:2: tools.shout.confirm" in result.stderr
    assert "phasegraph.toml:3: tools.shout.timeout_seconds" in result.stderr


@pytest.mark.parametrize("workers", [1, 2])
@pytest.mark.parametrize("model", ["nosuch:model", "scripted:bad.json"])
def test_serve_refuses_a_model_it_cannot_make_with_exit_two_however_many_workers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, workers: int, model: str
):
    """One worker was refused inside uvicorn's lifespan, and exited 3 (the approval code), not 2."""
    monkeypatch.setenv("PHASEGRAPH_CHECKPOINTER", f"sqlite:{tmp_path / 'state.db'}")  # workers share it
    (tmp_path / "bad.json").write_text('{"turns": 5}', encoding="utf-8")
    path = write_project(tmp_path, {"model": model})
    result = runner.invoke(app, ["serve", "--config", str(path), "--port", "0", "--workers", str(workers)])
    assert result.exit_code == 2, result.output
    why = "model spec 'nosuch:model' does not work" if "nosuch" in model else "bad.json is not a valid script"
    assert why in result.stderr


def test_a_run_on_a_thread_asks_on_the_terminal_and_each_answer_resumes_the_thread(tmp_path: Path):
    repo = git_repository(tmp_path / "repo")
    path, _ = _git_project(tmp_path, _branch_turns(repo))
    answers = f'e\n{{"repo_path": "{repo}", "branch_name": "from-thread"}}\n'
    args = ["run", "unified", "Make a branch", "--thread", "t-2", "--config", str(path)]
    done = _on_a_terminal(tmp_path, args, answers)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "… the call waits for approval" in done.stdout and "? git.git_create_branch waits" in done.stdout
    assert "with edited arguments" in done.stdout and "final answer" in done.stdout
    assert "from-thread" in _branches(repo) and "feature" not in _branches(repo)


def test_a_python_tool_module_beside_the_project_file_imports_without_pythonpath(tmp_path: Path):
    folder = tmp_path / "project"
    folder.mkdir()
    (folder / "mytools_beside.py").write_text(
        'def greet(name: str) -> str:\n    """Greet someone."""\n    return f"hello {name}"\n',
        encoding="utf-8",
    )
    greet = {"name": "greet", "args": {"name": "ada"}}
    script = write_script(folder, [{"content": "", "tool_calls": [greet]}, {"content": "Greeted."}])
    write_project(tmp_path, {"model": f"scripted:{script}", "python_tools": {"mine": "mytools_beside:greet"}})
    (tmp_path / "phasegraph.toml").rename(folder / "phasegraph.toml")
    env = {**_env(tmp_path), "PYTHONPATH": ""}  # the project's folder is found through the file, not the path
    for args in (
        ["config", "check"],
        ["run", "triggered_phase", "greet ada", "--json", "--show-tool-outputs"],
    ):
        done = subprocess.run(
            [PHASEGRAPH, *args, "--config", str(folder / "phasegraph.toml")] if args[0] == "run"
            else [PHASEGRAPH, *args, str(folder / "phasegraph.toml")],
            cwd=tmp_path, env=env, capture_output=True, text=True, timeout=TIMEOUT,
        )  # fmt: skip
        assert done.returncode == 0, done.stdout + done.stderr
    results = [e for e in _lines(done.stdout) if e["type"] == "tool_result"]
    assert [(r["name"], r["status"], r["output"]) for r in results] == [("greet", "ok", "hello ada")]
