"""The project file, ``phasegraph.toml``: what a valid one sets on a run; every malformed one refused early.

Each refusal is a ``ConfigurationError`` raised before any run starts, naming the key and its line.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from phasegraph.graphs.registry import get_protocol
from phasegraph.graphs.run import run
from phasegraph.nodes import project_lines
from phasegraph.nodes.errors import ConfigurationError
from phasegraph.nodes.project import load_project, project_problems
from phasegraph.nodes.trace import MemoryTraceStore
from phasegraph.nodes.triggered_phase.context import TriggeredPhaseContext
from phasegraph.nodes.unified.context import UnifiedContext
from phasegraph.server.cli.project_file import check_project
from phasegraph.tools.config_files import MAX_CONFIG_BYTES
from tests.tool_projects import demo_server, write_project, write_script


def _script(folder: Path, answer: str = "Done.") -> str:
    return f"scripted:{write_script(folder, [{'content': answer}], name=f'{answer[:4]}.json')}"


def _written(folder: Path, text: str) -> Path:
    path = folder / "phasegraph.toml"
    path.write_text(text.lstrip("\n"), encoding="utf-8")
    return path


def _refusal(path: Path) -> str:
    """The message a malformed file is refused with (and ``project_problems`` lists it first)."""
    with pytest.raises(ConfigurationError) as caught:
        load_project(path)
    assert project_problems(path)[0] in str(caught.value)
    return str(caught.value)


def test_a_valid_file_sets_model_workspace_and_protocol_settings(tmp_path: Path):
    model = _script(tmp_path)
    (tmp_path / "ws").mkdir()
    path = write_project(
        tmp_path,
        {
            "model": model,
            "workspace": "ws",
            "protocols": {"triggered_phase": {"max_phase_cycles_per_turn": 5, "show_tool_outputs": True}},
        },
    )
    context = TriggeredPhaseContext(project_file=str(path))
    assert (context.model, context.workspace) == (model, str(tmp_path / "ws"))
    assert (context.max_phase_cycles_per_turn, context.show_tool_outputs) == (5, True)
    # another protocol takes the model and workspace, not triggered_phase's settings
    other = UnifiedContext(project_file=str(path))
    assert (other.model, other.workspace, other.show_tool_outputs) == (model, str(tmp_path / "ws"), False)


def test_a_value_the_caller_passes_wins_over_the_file(tmp_path: Path, workspace: Path):
    (tmp_path / "ws").mkdir()
    path = write_project(
        tmp_path,
        {
            "model": _script(tmp_path),
            "workspace": "ws",
            "protocols": {"triggered_phase": {"max_phase_cycles_per_turn": 5}},
        },
    )
    mine = _script(tmp_path, "Mine.")
    context = TriggeredPhaseContext(
        project_file=str(path), model=mine, workspace=str(workspace), max_phase_cycles_per_turn=2
    )
    assert (context.model, context.workspace, context.max_phase_cycles_per_turn) == (mine, str(workspace), 2)


async def test_the_files_model_answers_the_run(tmp_path: Path, workspace: Path):
    path = write_project(tmp_path, {"model": _script(tmp_path, "From the project file.")})
    result = await run(
        "triggered_phase",
        "Hello",
        project_file=str(path),
        workspace=str(workspace),
        traces=MemoryTraceStore(),
    )
    assert result.final is not None and result.final.answer == "From the project file."


def test_models_per_protocol_and_role_and_the_callers_model_wins(tmp_path: Path):
    default, planner, reviewer, mine = (
        _script(tmp_path, n) for n in ("Default", "Planner", "Reviewer", "Mine")
    )
    path = write_project(
        tmp_path, {"model": default, "models": {"planner": planner, "planner.reviewer": reviewer}}
    )
    plans = get_protocol("planner").make_context(project_file=str(path))
    assert (plans.model, plans.model_for("reviewer"), plans.model_for("other")) == (
        planner,
        reviewer,
        planner,
    )
    chosen = get_protocol("planner").make_context(project_file=str(path), model=mine)
    assert (chosen.model, chosen.model_for("reviewer")) == (mine, mine)
    other = get_protocol("unified").make_context(project_file=str(path))
    assert (other.model, other.model_for("reviewer")) == (default, default)


def test_a_relative_workspace_starts_at_the_files_folder_not_the_working_folder(tmp_path: Path):
    project = tmp_path / "deep" / "project"
    (project / "files").mkdir(parents=True)
    path = write_project(project, {"model": _script(tmp_path), "workspace": "files"})
    assert Path.cwd() != project
    assert TriggeredPhaseContext(project_file=str(path)).workspace == str(project / "files")


def test_malformed_toml_is_refused_with_its_line(tmp_path: Path):
    path = _written(tmp_path, '\nmodel = "scripted:demo"\n\n[tools."git.*"]\nconfirm true\n')
    message = _refusal(path)
    assert "not valid TOML" in message and "line 4" in message


def test_an_unknown_top_level_key_is_refused_naming_it_and_its_line(tmp_path: Path):
    path = _written(tmp_path, 'model = "scripted:demo"\n\nmodle = "openai:gpt-4o"\n')
    assert _refusal(path).startswith("phasegraph.toml:3: modle: unknown key")


def test_an_unknown_key_in_a_policy_is_refused_naming_it_and_its_line(tmp_path: Path):
    text = """
model = "scripted:demo"

[tools."git.*"]
confirm = true
timeout_secs = 3
"""
    assert _refusal(_written(tmp_path, text)).startswith(
        "phasegraph.toml:5: tools.git.*.timeout_secs: unknown key"
    )


@pytest.mark.parametrize(
    ("setting", "key"),
    [
        ('max_calls_per_turn = "3"', "max_calls_per_turn"),
        ('confirm = "yes"', "confirm"),
        ("confirm = 1", "confirm"),
        ('timeout_seconds = "2"', "timeout_seconds"),
        ('normalizers = { path = "slash" }', "normalizers.path"),
    ],
)
def test_a_policy_value_of_the_wrong_type_is_refused(tmp_path: Path, setting: str, key: str):
    path = _written(tmp_path, f'model = "scripted:demo"\n\n[tools.word_count]\n{setting}\n')
    assert _refusal(path).startswith(f"phasegraph.toml:4: tools.word_count.{key}: ")


def test_a_top_level_value_of_the_wrong_type_is_refused(tmp_path: Path):
    path = _written(tmp_path, 'model = "scripted:demo"\nconnect_timeout_seconds = "5"\n')
    assert _refusal(path).startswith("phasegraph.toml:2: connect_timeout_seconds: ")


def test_an_unknown_protocol_is_refused_naming_it_and_its_line(tmp_path: Path):
    text = """
model = "scripted:demo"

[protocols.triggered_phase]
max_phase_cycles_per_turn = 2

[protocols.triggred_phase]
max_phase_cycles_per_turn = 2
"""
    message = _refusal(_written(tmp_path, text))
    assert message.startswith(
        "phasegraph.toml:6: protocols.triggred_phase: unknown protocol 'triggred_phase'"
    )


def test_a_model_for_an_unknown_protocol_is_refused_with_its_line(tmp_path: Path):
    text = '\nmodel = "scripted:demo"\n\n[models]\nplanner = "x"\n"planer.reviewer" = "scripted:demo"\n'
    assert _refusal(_written(tmp_path, text)).startswith("phasegraph.toml:5: models.planer.reviewer: ")


async def test_an_unknown_protocol_setting_is_refused_before_the_run(tmp_path: Path, workspace: Path):
    text = f"""
model = "{_script(tmp_path)}"

[protocols.unified]
max_tool_calls = 4
max_phase_cycles_per_turn = 2
"""
    path = _written(tmp_path, text)
    with pytest.raises(ConfigurationError) as caught:
        await run("unified", "Hello", project_file=str(path), workspace=str(workspace))
    message = str(caught.value)
    assert message.startswith(
        "phasegraph.toml:5: protocols.unified.max_phase_cycles_per_turn: unified has no"
    )
    assert "max_tool_calls" in message  # what it does have


@pytest.mark.parametrize(
    ("setting", "key"),
    [
        ('max_phase_cycles_per_turn = "5"', "max_phase_cycles_per_turn"),
        ('show_tool_outputs = "yes"', "show_tool_outputs"),
    ],
)
def test_a_protocol_setting_of_the_wrong_type_is_refused_with_its_line(
    tmp_path: Path, setting: str, key: str
):
    path = _written(tmp_path, f'model = "{_script(tmp_path)}"\n\n[protocols.triggered_phase]\n{setting}\n')
    with pytest.raises(ConfigurationError) as caught:
        TriggeredPhaseContext(project_file=str(path))
    assert str(caught.value).startswith(f"phasegraph.toml:4: protocols.triggered_phase.{key}: ")


def test_a_server_only_field_is_refused(tmp_path: Path):
    path = _written(
        tmp_path, f'model = "{_script(tmp_path)}"\n[protocols.triggered_phase]\nrequest_id = "x"\n'
    )
    with pytest.raises(
        ConfigurationError, match=r"phasegraph.toml:3: protocols.triggered_phase.request_id: set by"
    ):
        TriggeredPhaseContext(project_file=str(path))


@pytest.mark.parametrize(
    ("setting", "why"),
    [
        ('args = "-m server"', "'args' must be a list of strings"),
        ('cwdd = "."', "unknown key 'cwdd' (a stdio entry takes args, command, cwd, env, transport)"),
        ('transport = "pipe"', "'transport' must be 'stdio', 'streamable_http' or 'sse', found 'pipe'"),
    ],
)
def test_a_bad_mcp_server_entry_is_refused_at_its_keys_line(tmp_path: Path, setting: str, why: str):
    entry = "\n".join(f"{k} = {v}" for k, v in [("command", '"python"'), *[setting.split(" = ")]])
    if "transport" not in setting:
        entry = f'transport = "stdio"\n{entry}'
    good = '[mcp_servers.good]\ntransport = "stdio"\ncommand = "python"'
    text = f'model = "scripted:demo"\n\n{good}\n\n[mcp_servers.bad]\n{entry}\n'
    key = setting.split(" = ")[0]
    line = text.splitlines().index(setting) + 1  # the key's own line, not the table's (7)
    assert _refusal(_written(tmp_path, text)) == f"phasegraph.toml:{line}: mcp_servers.bad.{key}: {why}"


def test_every_problem_of_every_mcp_server_entry_is_listed_at_its_line(tmp_path: Path):
    """The first bad table's first problem was the only one named, at the table's header."""
    text = """
[mcp_servers.one]
transport = "stdio"
comand = "python"
agrs = ["-m", "server"]

[mcp_servers.two]
transport = "streamable_http"
url = "ftp://example.test"
timeout = 0

[mcp_servers.three]
transport = "pigeon"
"""
    assert project_problems(_written(tmp_path, text)) == [
        "phasegraph.toml:1: mcp_servers.one.command: 'command' must be a non-empty string",
        "phasegraph.toml:3: mcp_servers.one.comand: unknown key 'comand' (a stdio entry takes args, command, "
        "cwd, env, transport)",
        "phasegraph.toml:4: mcp_servers.one.agrs: unknown key 'agrs' (a stdio entry takes args, command, "
        "cwd, env, transport)",
        "phasegraph.toml:8: mcp_servers.two.url: 'url' must be an http:// or https:// address, found "
        "'ftp://example.test'",
        "phasegraph.toml:9: mcp_servers.two.timeout: 'timeout' must be a positive number of seconds, found 0",
        "phasegraph.toml:12: mcp_servers.three.transport: 'transport' must be 'stdio', 'streamable_http' or "
        "'sse', found 'pigeon'",
    ]


def test_a_file_with_problems_of_every_kind_lists_them_all(tmp_path: Path):
    """Wrong types, a bad MCP entry and a protocol setting: one pass, where the first kind stopped it."""
    text = """
model = 3
modle = "scripted:demo"

[mcp_servers.one]
transport = "pigeon"

[protocols.unified]
max_tool_call = 3

[tools."git.*"]
confirm = "yes"
"""
    problems = check_project(_written(tmp_path, text)).problems
    assert [problem.split(": ")[:2] for problem in problems] == [
        ["phasegraph.toml:1", "model"],
        ["phasegraph.toml:2", "modle"],
        ["phasegraph.toml:5", "mcp_servers.one.transport"],
        ["phasegraph.toml:8", "protocols.unified.max_tool_call"],
        ["phasegraph.toml:11", "tools.git.*.confirm"],
    ]  # fmt: skip


async def test_mcp_servers_may_name_a_json_file_beside_the_project(tmp_path: Path, workspace: Path):
    (tmp_path / "conf").mkdir()
    (tmp_path / "conf" / "servers.json").write_text(json.dumps({"demo": demo_server()}), encoding="utf-8")
    path = write_project(tmp_path, {"model": _script(tmp_path), "mcp_servers": "conf/servers.json"})
    context = TriggeredPhaseContext(project_file=str(path), workspace=str(workspace))
    try:
        registry = await context.open_tools()
        assert {"demo.list_files", "demo.calculate", "list_files"} <= set(registry.names())
        assert context.unavailable_tools() == {}
    finally:
        await context.close_tools()


def test_a_missing_servers_file_is_refused(tmp_path: Path):
    path = write_project(tmp_path, {"model": _script(tmp_path), "mcp_servers": "nowhere.json"})
    with pytest.raises(ConfigurationError, match=r"nowhere\.json: cannot be read"):
        TriggeredPhaseContext(project_file=str(path))


def test_a_named_file_that_does_not_exist_is_refused(tmp_path: Path):
    with pytest.raises(ConfigurationError, match="does not exist"):
        TriggeredPhaseContext(project_file=str(tmp_path / "missing.toml"))


#: Project files nested past ``MAX_NESTING``: by arrays (tomllib recurses, 3,000 levels break it), by inline
#: tables within Python's reach, by one header of 3,000 keys (no recursion at all).
DEEP = {
    "arrays": ("model = " + "[" * 3000 + "]" * 3000 + "\n", "phasegraph.toml: nested deeper than 32 levels"),
    "inline tables": (
        "[protocols.agent_network]\nsystem_params = " + "{a = " * 40 + "1" + "}" * 40 + "\n",
        "phasegraph.toml:2: protocols.agent_network.system_params: nested deeper than 32 levels",
    ),
    "one header": (
        "[" + ".".join(["a"] * 3000) + "]\nx = 1\n",
        "phasegraph.toml: a.a.a: nested deeper than 32 levels",
    ),
}


@pytest.mark.parametrize("case", list(DEEP))
def test_a_file_nested_deeper_than_the_limit_is_one_problem_not_a_recursion_error(tmp_path: Path, case: str):
    text, expected = DEEP[case]
    path = _written(tmp_path, text)
    assert project_problems(path) == [expected]
    assert _refusal(path) == expected


def _fifo(folder: Path) -> Path:
    os.mkfifo(folder / "servers.json")
    return folder / "servers.json"


def _sparse(folder: Path) -> Path:
    with (folder / "servers.json").open("wb") as file:
        file.truncate(MAX_CONFIG_BYTES + 1)  # no disk used: a hole
    return folder / "servers.json"


@pytest.mark.timeout(60)  # without the check, opening the pipe waits for a writer forever
@pytest.mark.parametrize(
    ("named", "why"),
    [
        (lambda folder: Path("/dev/null"), "a device, not a regular file"),  # as /dev/zero, with an end
        (_fifo, "a pipe, not a regular file"),
        (lambda folder: folder, "a folder, not a regular file"),
        (_sparse, "larger than 8 MiB"),
    ],
    ids=["device", "pipe", "folder", "too large"],
)
def test_a_named_file_that_is_no_regular_file_or_too_large_is_a_problem(tmp_path: Path, named: Any, why: str):
    servers = named(tmp_path)
    path = write_project(tmp_path, {"mcp_servers": str(servers)})
    problem = f"{servers.name}: cannot be read ({why})"
    assert project_problems(path) == [f"phasegraph.toml:1: mcp_servers: {problem}"]
    assert project_problems(servers) == [problem]  # named as the project file itself


@pytest.mark.parametrize(
    ("table", "last"),
    [("", "phasegraph.toml:4000: key_3999: unknown key"),
     ("[protocols.unified]\n", "phasegraph.toml:4001: protocols.unified.key_3999: unified has no such")],
    ids=["file's keys", "protocol settings"],
)  # fmt: skip
def test_thousands_of_unknown_keys_read_the_files_lines_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, table: str, last: str
) -> None:
    """Each problem's line is looked up, not found by reading the file again (4,000 keys took 24 s)."""
    looked_at = Counting(project_lines._HEADER)
    monkeypatch.setattr(project_lines, "_HEADER", looked_at)
    path = _written(tmp_path, table + "".join(f"key_{n} = {n}\n" for n in range(4000)))
    problems = check_project(path).problems  # the file's own problems, else its protocol settings'
    assert len(problems) == 4000 and problems[-1].startswith(last)
    assert looked_at.calls == len(path.read_text(encoding="utf-8").splitlines())  # each line once


class Counting:
    """A compiled pattern whose ``match`` calls are counted."""

    def __init__(self, pattern: re.Pattern[str]) -> None:
        self.pattern, self.calls = pattern, 0

    def match(self, text: str) -> re.Match[str] | None:
        self.calls += 1
        return self.pattern.match(text)


def test_a_changed_file_is_read_again(tmp_path: Path):
    first, second = _script(tmp_path, "One."), _script(tmp_path, "Two.")
    path = write_project(tmp_path, {"model": first})
    assert TriggeredPhaseContext(project_file=str(path)).model == first
    write_project(tmp_path, {"model": second})
    os.utime(path, ns=(path.stat().st_atime_ns, path.stat().st_mtime_ns + 5_000_000_000))
    assert TriggeredPhaseContext(project_file=str(path)).model == second


def test_a_file_rewritten_within_one_clock_tick_is_read_again(tmp_path: Path):
    first, second = _script(tmp_path, "One."), _script(tmp_path, "Second.")
    path = write_project(tmp_path, {"model": first})
    stamp = path.stat().st_mtime_ns
    assert TriggeredPhaseContext(project_file=str(path)).model == first
    write_project(tmp_path, {"model": second, "call_timeout_seconds": 10})
    os.utime(path, ns=(stamp, stamp))  # the same time stamp: a coarse clock, or an edit in the same tick
    assert TriggeredPhaseContext(project_file=str(path)).model == second


#: Run in a fresh process started in a folder: which file each way of naming one picks.
_WHICH = """
import os, sys
from phasegraph.nodes.triggered_phase.context import TriggeredPhaseContext
print(TriggeredPhaseContext().model)
os.environ["PHASEGRAPH_CONFIG"] = sys.argv[1]
print(TriggeredPhaseContext().model)
print(TriggeredPhaseContext(project_file=sys.argv[2]).model)
os.environ["PHASEGRAPH_CONFIG"] = "sub/phasegraph.toml"
print(TriggeredPhaseContext().model)
"""


def test_project_file_beats_phasegraph_config_beats_the_working_folders_file(tmp_path: Path):
    started = tmp_path / "started"
    (started / "sub").mkdir(parents=True)
    here = write_project(started, {"model": _script(tmp_path, "Here.")})
    env = write_project(tmp_path, {"model": _script(tmp_path, "Env.")}, name="env.toml")
    given = write_project(tmp_path, {"model": _script(tmp_path, "Given.")}, name="given.toml")
    sub = write_project(started / "sub", {"model": _script(tmp_path, "Sub.")})
    environ = {k: v for k, v in os.environ.items() if k != "PHASEGRAPH_CONFIG"}
    done = subprocess.run(
        [sys.executable, "-c", _WHICH, str(env), str(given)],
        cwd=started, env=environ, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    models = done.stdout.split()
    expected = [load_project(p) for p in (here, env, given, sub)]
    assert models == [p.file.model for p in expected if p is not None]
    assert len(set(models)) == 4
