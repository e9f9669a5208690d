"""LangSmith tracing of phasegraph runs (issue 27, item 4): LangChain's own tracer, read back at the API.

Each test runs the installed ``phasegraph run`` command in a subprocess (the ``langsmith`` client reads
and caches its settings per process) with ``LANGSMITH_TRACING=true`` and ``LANGSMITH_ENDPOINT`` pointing at
a fake LangSmith API on loopback (``tests.langsmith_receiver``), then checks the runs the client sent:
one trace per phasegraph run, its root named after the protocol, a chain run per graph node, ``llm`` runs
for the model's calls and ``tool`` runs for the tool calls, all in the configured project, sent with the
configured API key and no other secret. The fake's ``/info`` picks the ingestion path the client takes:
zstd-compressed multipart (what LangSmith offers today) or the JSON batches older servers take.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from phasegraph.graphs.registry import get_protocol
from phasegraph.nodes.planner.plan_execution import build_plan_executor
from tests.conftest import PROVIDER_KEY
from tests.langsmith_receiver import LangSmithReceiver, langsmith_receiver

PHASEGRAPH = str(Path(sys.executable).parent / "phasegraph")
#: One command starts Python and imports LangChain; a loaded machine makes that slow.
TIMEOUT = 120
API_KEY = "lsv2_pt_dummy-langsmith-key-0123456789"
PROJECT = "phasegraph-tracing-test"
#: Secrets the command is configured with and that must not reach LangSmith.
SECRETS = {
    "OPENAI_API_KEY": PROVIDER_KEY,
    "ANTHROPIC_API_KEY": "sk-ant-test-SECRET-9876543210fedcba",
    "PHASEGRAPH_API_TOKENS": "bearer-test-SECRET-5555aaaa:*",
}

Run = dict[str, Any]


def _traced_cli(
    tmp_path: Path,
    receiver: LangSmithReceiver,
    *args: str,
    secrets: dict[str, str] = SECRETS,
    model: str = "scripted:demo",
) -> subprocess.CompletedProcess[str]:
    """``phasegraph run ARGS --json --model MODEL`` traced to ``receiver``; OpenTelemetry off."""
    inherited = {k: v for k, v in os.environ.items() if not k.startswith(("LANGSMITH_", "LANGCHAIN_"))}
    env = {
        **inherited,
        **secrets,
        "LANGSMITH_TRACING": "true",
        "LANGSMITH_ENDPOINT": receiver.url,
        "LANGSMITH_API_KEY": API_KEY,
        "LANGSMITH_PROJECT": PROJECT,
        "PHASEGRAPH_OTEL_EXPORTER": "none",
    }
    return subprocess.run(
        [PHASEGRAPH, "run", *args, "--json", "--model", model],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=TIMEOUT,
    )  # fmt: skip


def _events(ran: subprocess.CompletedProcess[str]) -> list[dict[str, Any]]:
    assert ran.returncode == 0, ran.stdout[-2000:] + ran.stderr[-2000:]
    return [json.loads(line) for line in ran.stdout.splitlines()]


def _trace(runs: dict[str, Run], protocol: str) -> Run:
    """The root of the one trace ``runs`` make, checked whole: every run ended, in the project."""
    roots = [run for run in runs.values() if "parent_run_id" not in run]
    assert [(r["name"], r["run_type"]) for r in roots] == [(protocol, "chain")]
    root = roots[0]
    for run in runs.values():
        assert run["trace_id"] == root["id"] and run["session_name"] == PROJECT, run["name"]
        assert "end_time" in run and "start_time" in run, f"{run['name']} never ended"
        assert run.get("parent_run_id", root["id"]) in runs, f"{run['name']}'s parent was not sent"
    return root


def _children(runs: dict[str, Run], parent: Run, run_type: str | None = None) -> list[Run]:
    """``parent``'s direct children, in the order they started."""
    found = [r for r in runs.values() if r.get("parent_run_id") == parent["id"]]
    return sorted((r for r in found if run_type in (None, r["run_type"])), key=lambda r: r["dotted_order"])


def _node_of(runs: dict[str, Run], run: Run, root: Run) -> Run:
    """The graph node (a child of ``root``) ``run`` was made in, however deep."""
    while run["parent_run_id"] != root["id"]:
        run = runs[run["parent_run_id"]]
    return run


def _in_order(runs: dict[str, Run], run_type: str) -> list[Run]:
    return sorted((r for r in runs.values() if r["run_type"] == run_type), key=lambda r: r["dotted_order"])


def _no_secret_sent(receiver: LangSmithReceiver, secrets: dict[str, str]) -> None:
    sent = receiver.payload_bytes()
    for name, value in {"LANGSMITH_API_KEY": API_KEY, **secrets}.items():
        assert value.encode() not in sent, f"{name}'s value was sent to LangSmith"


def test_a_triggered_phase_run_reaches_langsmith_as_its_nodes_model_calls_and_tool_calls(
    tmp_path: Path, workspace: Path
):
    with langsmith_receiver("zstd") as receiver:
        ran = _traced_cli(tmp_path, receiver, "triggered_phase", "Summarise the roadmap",
                          "--workspace", str(workspace), "--show-tool-outputs")  # fmt: skip
    events = _events(ran)
    assert receiver.unexpected == []
    # the client compresses once its background thread has read /info; what it queued before that goes
    # out as plain multipart, so a fast run sends both
    assert {(r.method, r.path) for r in receiver.requests} == {("POST", "/runs/multipart")}
    assert {r.headers.get("content-encoding") for r in receiver.requests} <= {"zstd", None}
    assert {r.headers.get("x-api-key") for r in receiver.requests} == {API_KEY}
    runs = receiver.snapshot()
    root = _trace(runs, "triggered_phase")
    assert root["inputs"]["messages"][0]["content"] == "Summarise the roadmap"

    nodes = _children(runs, root)
    names = [node["name"] for node in nodes]
    assert {node["run_type"] for node in nodes} == {"chain"}
    assert set(names) <= set(get_protocol("triggered_phase").node_names())
    assert names[0] == "start_turn" and names[-1] == "complete_turn" and "refuse_duplicate" in names
    calls = [e for e in events if e["type"] == "tool_call"]
    assert names.count("tool_phase") == len(calls) == 2

    # one model call per action phase, made by the scripted model inside that phase
    llms = _in_order(runs, "llm")
    phases = [runs[llm["parent_run_id"]]["name"] for llm in llms]
    assert phases == ["action_phase"] * names.count("action_phase")
    assert {llm["extra"]["invocation_params"]["_type"] for llm in llms} == {"phasegraph-scripted"}
    answer = llms[-1]["outputs"]["generations"][0][0]
    assert answer["text"] == events[-1]["answer"] and events[-1]["type"] == "final"
    assert answer["message"]["kwargs"]["usage_metadata"]["output_tokens"] > 0

    # one tool run per call the tool phases ran, with the call's arguments and the tool's output
    tools = _in_order(runs, "tool")
    assert [(t["name"], t["inputs"]) for t in tools] == [(c["name"], c["args"]) for c in calls]
    assert {runs[t["parent_run_id"]]["name"] for t in tools} == {"tool_phase"}
    assert "Milestone 2" in tools[1]["outputs"]["output"]
    _no_secret_sent(receiver, SECRETS)


def test_a_planner_run_shows_its_plan_executor_subgraph_under_the_node_that_runs_it(tmp_path: Path):
    with langsmith_receiver("batch") as receiver:
        ran = _traced_cli(tmp_path, receiver, "planner", "Which templates are there?")
    events = _events(ran)
    assert receiver.unexpected == []
    assert {(r.method, r.path) for r in receiver.requests} == {("POST", "/runs/batch")}
    assert {r.headers.get("x-api-key") for r in receiver.requests} == {API_KEY}
    runs = receiver.snapshot()
    root = _trace(runs, "planner")

    nodes = _children(runs, root)
    names = [node["name"] for node in nodes]
    assert set(names) <= set(get_protocol("planner").node_names())
    assert names[0] == "start_turn" and names[-1] == "finish_turn"
    # the planner's calls, and the plan drafter's (its structured-output chain nests it deeper)
    callers = [_node_of(runs, llm, root)["name"] for llm in _in_order(runs, "llm")]
    assert sorted(callers) == sorted(["draft_plan", *["call_planner"] * names.count("call_planner")])
    run_tools = [node for node in nodes if node["name"] == "run_tools"]
    assert [t["name"] for node in run_tools for t in _children(runs, node, "tool")] == ["list_templates"]
    [execute] = [node for node in nodes if node["name"] == "execute_plan"]
    [executor] = _children(runs, execute)
    assert executor["name"] == "plan_executor"

    # the subgraph's own nodes, each step's tool run inside its step
    steps = [e for e in events if e["type"] == "step_start"]
    inner = _children(runs, executor)
    assert set(n["name"] for n in inner) <= set(build_plan_executor().nodes) - {"__start__"}
    assert [n["name"] for n in inner] == ["start_plan", *["run_step"] * len(steps), "finish_plan"]
    step_tools = [_children(runs, n, "tool") for n in inner if n["name"] == "run_step"]
    assert [[t["name"] for t in tools] for tools in step_tools] == [[s["tool"]] for s in steps]
    assert [s["tool"] for s in steps] == ["list_templates", "create_project", "publish_context_document"]
    _no_secret_sent(receiver, SECRETS)


def test_a_secret_a_tool_reads_is_masked_before_it_reaches_langsmith(tmp_path: Path, workspace: Path):
    roadmap = workspace / "docs" / "roadmap.md"
    roadmap.write_text(roadmap.read_text() + f"\nThe deploy key is {PROVIDER_KEY}.\n", encoding="utf-8")
    with langsmith_receiver("zstd") as receiver:
        ran = _traced_cli(tmp_path, receiver, "triggered_phase", "Summarise the roadmap",
                          "--workspace", str(workspace), "--show-tool-outputs")  # fmt: skip
    events = _events(ran)
    assert PROVIDER_KEY not in ran.stdout and any("[REDACTED]" in json.dumps(e) for e in events)
    assert [t["name"] for t in _in_order(receiver.snapshot(), "tool")] == ["list_files", "read_file"]
    _no_secret_sent(receiver, SECRETS)


def test_a_secret_in_a_failed_tool_call_is_masked_in_the_error_langsmith_gets(
    tmp_path: Path, workspace: Path
):
    script = tmp_path / "script.json"
    path = f"docs/{PROVIDER_KEY}.md"  # no such file: the tool's error names it
    script.write_text(json.dumps({"turns": [
        {"content": "", "tool_calls": [{"name": "read_file", "args": {"path": path}}]},
        {"content": "No such file.", "tool_calls": []},
    ]}), encoding="utf-8")  # fmt: skip
    with langsmith_receiver("batch") as receiver:
        ran = _traced_cli(tmp_path, receiver, "triggered_phase", "Read it", "--workspace", str(workspace),
                          model=f"scripted:{script}")  # fmt: skip
    _events(ran)
    [tool] = _in_order(receiver.snapshot(), "tool")
    assert "is not a file" in str(tool.get("error")) and "[REDACTED]" in str(tool.get("error"))
    _no_secret_sent(receiver, SECRETS)
