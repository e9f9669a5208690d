"""``phasegraph serve`` with a project file: its MCP and Python tools on every route, approval on each.

One real server starts in a folder holding a ``phasegraph.toml`` (no PHASEGRAPH_MODEL, no
PHASEGRAPH_WORKSPACE): the project's model is the scripted one calling ``git.git_log`` of the
reference ``mcp-server-git`` on a repository the test made. ``git.git_create_branch`` and the
Python tool ``touch_file`` wait for approval; their effects (a branch, a file) are read from
outside the server, so "it never ran" is checked where it would show.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from langgraph_sdk import get_sync_client
from langgraph_sdk.client import SyncLangGraphClient

from phasegraph.nodes.emit import EVENT_KEY
from phasegraph.nodes.events import Event, parse_event
from tests.server.conftest import PHASEGRAPH, Server, stream
from tests.tool_projects import git_repository, git_server, write_project, write_script

ROOT = Path(__file__).parents[2]
PROTOCOLS = ["triggered_phase", "unified"]
#: Settings of the environment the tests run in that would decide instead of the project file.
OPERATOR_VARIABLES = (
    "PHASEGRAPH_MODEL",
    "PHASEGRAPH_WORKSPACE",
    "PHASEGRAPH_CONFIG",
    "PHASEGRAPH_ALLOWED_MODELS",
)


@dataclass
class Project:
    """The project folder, its repository, its server and the scripts a request may choose."""

    folder: Path
    repo: Path
    server: Server
    models: dict[str, str]

    @property
    def touched(self) -> Path:
        return self.folder / "touched.txt"


def _call(name: str, args: dict[str, Any], content: str = "") -> dict[str, Any]:
    return {"content": content, "tool_calls": [{"name": name, "args": args}]}


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Project]:
    folder = tmp_path_factory.mktemp("user-tools-server")
    repo = git_repository(folder / "repo")
    log = write_script(folder, [_call("git.git_log", {"repo_path": str(repo)}, "Looking."),
                                {"content": "The history has two commits."}], "log.json")  # fmt: skip
    create = _call("git.git_create_branch", {"repo_path": str(repo), "branch_name": "feature-x"})
    branch = write_script(folder, [create, {"content": "Done."}], "branch.json")
    touch = write_script(folder, [_call("touch_file", {"path": str(folder / "touched.txt")}),
                                  {"content": "Done."}], "touch.json")  # fmt: skip
    write_project(folder, {
        "model": f"scripted:{log}",
        "mcp_servers": {"git": git_server(repo)},
        "python_tools": {"mine": "tests.user_tools:touch_file"},
        "tools": {"git.git_create_branch": {"confirm": True}, "touch_file": {"confirm": True}},
    })  # fmt: skip
    models = {"log": f"scripted:{log}", "branch": f"scripted:{branch}", "touch": f"scripted:{touch}"}
    env = {
        "PHASEGRAPH_CHECKPOINTER": f"sqlite:{folder / 'state.db'}",
        "PHASEGRAPH_ALLOWED_MODELS": f"{models['branch']},{models['touch']}",
        "PYTHONPATH": str(ROOT),  # the project's Python tools are the tests' module
    }
    with pytest.MonkeyPatch.context() as patch:
        for name in OPERATOR_VARIABLES:
            patch.delenv(name, raising=False)
        server = Server(env=env, log=folder / "server.log", cwd=folder).start()
    try:
        yield Project(folder, repo, server, models)
    finally:
        server.stop()


@pytest.fixture(autouse=True)
def fresh(project: Project) -> None:
    """Each test starts with no branch but the first and no touched file."""
    for name in _branches(project.repo) - {"master", "main"}:
        subprocess.run(
            ["git", "-C", str(project.repo), "branch", "-D", name], check=True, capture_output=True
        )
    project.touched.unlink(missing_ok=True)


def _branches(repo: Path) -> set[str]:
    found = subprocess.run(["git", "-C", str(repo), "branch", "--format=%(refname:short)"],
                           check=True, capture_output=True, text=True)  # fmt: skip
    return set(found.stdout.split())


def _run(project: Project, protocol: str, message: str, **body: Any) -> list[Event]:
    with httpx.Client(base_url=project.server.url) as client:
        return stream(client, "POST", f"/api/runs/{protocol}/stream", json={"message": message, **body})


def _resume(project: Project, request_id: str, body: dict[str, Any] | None) -> list[Event]:
    with httpx.Client(base_url=project.server.url) as client:
        return stream(client, "POST", f"/api/requests/{request_id}/resume", json=body)


def _of(events: list[Event], kind: str) -> list[Any]:
    return [e for e in events if e.type == kind]


def _asked(events: list[Event]) -> Any:
    """The approval the run stopped at (it ended paused at an interrupt, nothing run)."""
    assert events[-1].type == "paused" and events[-1].reason == "interrupt", events[-1]
    assert not _of(events, "tool_result")
    return _of(events, "approval_requested")[-1]


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_native_route_runs_the_projects_git_tool_on_the_projects_model(project: Project, protocol: str):
    events = _run(project, protocol, "Show the history.", showToolOutputs=True)
    results = _of(events, "tool_result")
    assert [(e.name, e.status) for e in results] == [("git.git_log", "ok")]
    assert "second commit" in results[0].output and "first commit" in results[0].output
    assert events[-1].type == "final"
    status = httpx.get(f"{project.server.url}/api/requests/{events[0].request_id}", timeout=30).json()
    assert status["model"] == "scripted:log.json"  # the project's model, not the bundled demo


def test_a_requests_model_must_be_one_the_server_allows(project: Project):
    refused = httpx.post(f"{project.server.url}/api/runs/unified/stream", timeout=30,
                         json={"message": "hi", "model": "scripted:demo"})  # fmt: skip
    assert refused.status_code == 400
    assert "not allowed" in refused.json()["message"] and "scripted:log.json" in refused.json()["message"]


ANSWERS = {
    "approve": ("approve", {"feature-x"}),
    "edit": ({"decision": "edit", "args": {"branch_name": "edited", "repo_path": "{repo}"}}, {"edited"}),
    "reject": ({"decision": "reject", "reason": "not on a Friday"}, set()),
}


#: Agent Chat UI's answers: LangChain's human-in-the-loop decisions (what it sends back to an interrupt).
HITL_ANSWERS = {
    "hitl-edit": (
        {"decisions": [{"type": "edit", "edited_action": {"name": "git.git_create_branch",
                        "args": {"repo_path": "{repo}", "branch_name": "from-chat-ui"}}}]},
        {"from-chat-ui"},
    ),
    "hitl-reject": ({"decisions": [{"type": "reject", "message": "not on a Friday"}]}, set()),
}  # fmt: skip


def _filled(answer: Any, project: Project) -> Any:
    """The answer with ``{repo}`` standing for the project's repository."""
    if isinstance(answer, dict):
        return {key: _filled(value, project) for key, value in answer.items()}
    if isinstance(answer, list):
        return [_filled(value, project) for value in answer]
    return answer.replace("{repo}", str(project.repo)) if isinstance(answer, str) else answer


@pytest.mark.parametrize("protocol", PROTOCOLS)
@pytest.mark.parametrize("kind", list(ANSWERS))
def test_native_resume_answers_the_approval(project: Project, protocol: str, kind: str):
    before = _branches(project.repo)
    events = _run(project, protocol, "Make a branch.", model=project.models["branch"], showToolOutputs=True)
    asked = _asked(events)
    assert (asked.name, asked.args["branch_name"]) == ("git.git_create_branch", "feature-x")
    assert _branches(project.repo) == before  # nothing ran before the answer
    request_id = events[0].request_id
    for body in (None, {}):  # no answer: refused, saying one is needed
        refused = httpx.post(f"{project.server.url}/api/requests/{request_id}/resume", json=body, timeout=30)
        assert refused.status_code == 409
        assert "approval" in refused.json()["message"] and "answer" in refused.json()["message"]
    answer, made = ANSWERS[kind]
    done = _resume(project, request_id, {"answer": _filled(answer, project)})
    assert done[0].type == "resumed" and done[0].replaces_from_seq is None
    assert [e.decision for e in _of(done, "approval_answered")] == [kind]
    assert _branches(project.repo) - before == made
    result = _of(done, "tool_result")[0]
    if kind == "reject":
        assert result.status == "error" and "not on a Friday" in result.error
    else:
        assert result.status == "ok"
    assert done[-1].type == "final"


def test_a_wrong_edit_asks_again_and_runs_nothing(project: Project):
    events = _run(project, "triggered_phase", "Make a branch.", model=project.models["branch"])
    request_id = events[0].request_id
    wrong = {"decision": "edit", "args": {"repo_path": str(project.repo)}}  # no branch_name
    again = _resume(project, request_id, {"answer": wrong})
    asked = _asked(again)
    assert asked.problem and "branch_name" in asked.problem
    assert _branches(project.repo) == {"master"} or _branches(project.repo) == {"main"}
    earlier = {"answer": "approve", "resumeFromPhaseIndex": 1}  # an answer goes to the question asked now
    refused = httpx.post(f"{project.server.url}/api/requests/{request_id}/resume", json=earlier, timeout=30)
    assert refused.status_code == 409 and "resumeFromPhaseIndex" in refused.json()["message"]
    done = _resume(project, request_id, {"answer": "approve"})
    assert "feature-x" in _branches(project.repo) and done[-1].type == "final"
    late = httpx.post(f"{project.server.url}/api/requests/{request_id}/resume", json={"answer": "approve"},
                      timeout=30)  # fmt: skip
    assert late.status_code == 409  # a finished run waits for no answer


def test_a_rejected_python_tool_never_runs_in_the_server(project: Project):
    events = _run(project, "triggered_phase", "Touch it.", model=project.models["touch"])
    assert _asked(events).name == "touch_file"
    done = _resume(project, events[0].request_id, {"answer": "reject"})
    assert _of(done, "tool_result")[0].status == "error" and done[-1].type == "final"
    assert not project.touched.exists()
    events = _run(project, "triggered_phase", "Touch it.", model=project.models["touch"])
    done = _resume(project, events[0].request_id, {"answer": {"decision": "approve"}})
    assert _of(done, "tool_result")[0].status == "ok" and project.touched.read_text() == "touched\n"


@pytest.fixture
def client(project: Project) -> Iterator[SyncLangGraphClient]:
    sdk = get_sync_client(url=project.server.url, timeout=60)
    yield sdk
    sdk.http.client.close()


def _events(parts: list[Any]) -> list[Event]:
    return [parse_event(p.data[EVENT_KEY]) for p in parts if p.event == "custom" and EVENT_KEY in p.data]


def _ask(text: str) -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": text}]}


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_langgraph_api_runs_the_projects_git_tool(client: SyncLangGraphClient, protocol: str):
    thread_id = client.threads.create()["thread_id"]
    parts = list(client.runs.stream(thread_id, protocol, input=_ask("Show the history."),
                                    context={"show_tool_outputs": True}, stream_mode="custom"))  # fmt: skip
    results = [e for e in _events(parts) if e.type == "tool_result"]
    assert [(e.name, e.status) for e in results] == [("git.git_log", "ok")]
    assert "second commit" in (results[0].output or "")
    assert client.threads.get(thread_id)["status"] == "idle"


@pytest.mark.parametrize(("protocol", "kind"), [("triggered_phase", "edit"), ("unified", "reject"),
                                                 ("unified", "approve"), ("triggered_phase", "hitl-edit"),
                                                 ("unified", "hitl-reject")])  # fmt: skip
def test_langgraph_api_answers_the_approval_with_a_command(
    project: Project, client: SyncLangGraphClient, protocol: str, kind: str
):
    before = _branches(project.repo)
    thread_id = client.threads.create()["thread_id"]
    context = {"model": project.models["branch"], "show_tool_outputs": True}
    asking = list(client.runs.stream(thread_id, protocol, input=_ask("Make a branch."), context=context,
                                     stream_mode=["updates", "custom"]))  # fmt: skip
    interrupts = [
        p.data["__interrupt__"] for p in asking if p.event == "updates" and "__interrupt__" in p.data
    ]
    value = interrupts[-1][0]["value"]
    assert value["type"] == "approval" and value["call"]["name"] == "git.git_create_branch"
    assert value["call"]["args"]["branch_name"] == "feature-x" and "approves" in value["reason"]
    thread = client.threads.get(thread_id)  # what Agent Chat UI reads
    assert thread["status"] == "interrupted"
    assert [i["value"] for i in next(iter(thread["interrupts"].values()))] == [value]
    state = client.threads.get_state(thread_id)
    assert [i["value"] for i in state["interrupts"]] == [value]
    assert _branches(project.repo) == before
    answer, made = {**ANSWERS, **HITL_ANSWERS}[kind]
    done = list(client.runs.stream(thread_id, protocol, command={"resume": _filled(answer, project)},
                                   context=context, stream_mode="custom"))  # fmt: skip
    results = [e for e in _events(done) if e.type == "tool_result"]
    assert [e.status for e in results] == ["ok" if made else "error"]  # a rejection: an error result
    assert _branches(project.repo) - before == made
    assert client.threads.get(thread_id)["status"] == "idle"


def test_a_malformed_project_file_stops_serve_at_start(tmp_path: Path):
    (tmp_path / "phasegraph.toml").write_text('model = "scripted:demo"\ncolour = "blue"\n', encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k not in OPERATOR_VARIABLES}
    env["PHASEGRAPH_CHECKPOINTER"] = "memory"
    uvicorn = [sys.executable, "-m", "uvicorn", "phasegraph.server.app:app", "--port", "0"]
    for command in ([PHASEGRAPH, "serve", "--port", "0"], uvicorn):
        done = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
        assert done.returncode != 0, done.stdout + done.stderr
        assert "phasegraph.toml:2: colour: unknown key" in done.stdout + done.stderr
