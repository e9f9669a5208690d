"""The agent-network API on a real server: publish and list networks, POST /run, settings, spans over OTLP.

Most tests run on the session's servers (``shared_servers``): they publish into projects and name
requests of their own (``unique``), and read listings for those projects only.
"""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
import yaml

from phasegraph.tools.networks import EXAMPLE_NETWORK, EXAMPLES
from tests.graphs.test_agent_network import answer, tool
from tests.otlp_receiver import OtlpReceiver, otlp_receiver
from tests.server.conftest import GUARDED, stream, unique
from tests.tool_projects import git_repository, git_server, write_project, write_script

QUESTION = "Who works on the streaming server, and which roadmap milestone covers streaming?"
RESEARCH = yaml.safe_load(EXAMPLE_NETWORK.read_text(encoding="utf-8"))
BROKEN = yaml.safe_load((EXAMPLES / "broken.yaml").read_text(encoding="utf-8"))


@pytest.fixture
def collector() -> Iterator[OtlpReceiver]:
    with otlp_receiver() as receiver:
        yield receiver


def test_publish_list_and_run_a_network_by_name(shared_servers):
    server, p1, run_1 = shared_servers(), unique("p1"), unique("run-1")
    with httpx.Client(base_url=server.url, timeout=60) as client:
        published = client.post("/api/networks", json={"projectId": p1, "definition": RESEARCH})
        assert published.status_code == 201, published.text
        assert published.json()["version"] == 1 and published.json()["agents"] == [
            "triage",
            "researcher",
            "writer",
        ]
        again = client.post("/api/networks", json={"projectId": p1, "definition": RESEARCH})
        assert again.json()["version"] == 1
        changed = client.post(
            "/api/networks", json={"projectId": p1, "definition": {**RESEARCH, "description": "v2"}}
        )
        assert changed.json()["version"] == 2
        listed = [n for n in client.get("/api/networks").json() if n["projectId"] == p1]  # others' too
        assert [(n["projectId"], n["name"], n["version"]) for n in listed] == [(p1, "research", 2)]
        assert (
            client.get("/api/networks/research", params={"projectId": p1, "version": 1}).json()["version"]
            == 1
        )

        answer = client.post("/run", json={"network": "research", "version": 1, "project_id": p1,
                                           "user_message": QUESTION, "request_id": run_1})  # fmt: skip
        assert answer.status_code == 200, answer.text
        body = answer.json()
        assert body["status"] == "completed" and body["responder"] == "writer" and "Linus" in body["result"]
        assert (body["network"], body["version"]) == ("research", 1)
        assert [i["action"] for i in body["instructions"]] == [
            "ROUTE_TO_AGENT", "USE_TOOL", "USE_TOOL", "ROUTE_TO_AGENT", "RESPOND",
        ]  # fmt: skip
        tools = [e for e in body["execution_log"] if e["type"] == "tool"]
        assert [e["execution_id"] for e in tools] == body["tool_refs"] and len(body["tool_refs"]) == 2
        assert body["steps"] is None and body["tool_execution_log"] is None
        # an ordinary request: its status, events and trace are there
        assert client.get(f"/api/requests/{run_1}", params={"projectId": p1}).json()["status"] == "completed"
        replay = stream(client, "GET", f"/api/requests/{run_1}/stream", params={"projectId": p1})
        assert replay[-1].type == "final" and replay[-1].agent == "writer"


def test_run_with_debug_shows_prompts_and_raw_json(shared_servers):
    server = shared_servers()
    with httpx.Client(base_url=server.url, timeout=60) as client:
        body = client.post("/run", json={"user_message": QUESTION, "debug": True,
                                         "system_params": {"path": "docs"}}).json()  # fmt: skip
        assert body["network"] == "research" and body["version"] is None  # the bundled example
        steps = body["steps"]
        assert [s["agent"] for s in steps] == ["triage", "researcher", "researcher", "researcher", "writer"]
        assert steps[0]["prompt"].startswith("You are triage") and "## Constraints" in steps[0]["prompt"]
        assert '"action": "ROUTE_TO_AGENT"' in steps[0]["raw"]
        payloads = body["tool_execution_log"]
        assert set(payloads) == set(body["tool_refs"])
        assert any("Linus" in p["result"] for p in payloads.values())


def test_bad_input_gets_clear_errors(shared_servers):
    server = shared_servers()
    with httpx.Client(base_url=server.url, timeout=60) as client:
        refused = client.post("/api/networks", json={"definition": BROKEN})
        assert refused.status_code == 422
        assert refused.json()["error"] == "invalid_network" and len(refused.json()["problems"]) == 5
        shapeless = client.post("/api/networks", json={"definition": {"name": "x"}})
        assert shapeless.status_code == 422  # the schema says what a definition holds
        assert ["body", "definition", "agents"] in [d["loc"] for d in shapeless.json()["detail"]]
        versionless = client.post("/run", json={"user_message": "hi", "version": 2})
        assert versionless.status_code == 422  # the schema says it: a version is a network's
        assert "version needs a network" in versionless.text
        missing = client.post("/run", json={"network": "nope", "user_message": "hi"})
        assert missing.status_code == 404 and "publish it first" in missing.json()["message"]
        assert client.post("/run", json={"user_message": "hi", "max_steps": "3"}).status_code == 422
        assert client.post("/run", json={"user_message": " "}).status_code == 422
        # the generic stream takes the protocol's client settings, and only those
        bad = {"message": "hi", "settings": {"network_file": "/etc/passwd"}}
        answer = client.post("/api/runs/agent_network/stream", json=bad)
        assert answer.status_code == 400 and "settings.network_file cannot be set" in answer.json()["message"]
        typed = client.post(
            "/api/runs/agent_network/stream", json={"message": "hi", "settings": {"max_steps": "3"}}
        )
        assert typed.status_code == 400 and "settings.max_steps" in typed.json()["message"]
        zero = client.post(
            "/api/runs/agent_network/stream", json={"message": "hi", "settings": {"max_steps": 0}}
        )
        assert zero.status_code == 400 and "settings.max_steps" in zero.json()["message"]
        assert "greater than or equal to 1" in zero.json()["message"]
        other = client.post("/api/runs/unified/stream", json={"message": "hi", "settings": {"max_steps": 3}})
        assert other.status_code == 400 and "settable: none" in other.json()["message"]


def test_the_generic_stream_runs_a_named_network_with_its_budget(shared_servers):
    server, project = shared_servers(), unique("budget")
    with httpx.Client(base_url=server.url, timeout=60) as client:
        client.post("/api/networks", json={"projectId": project, "definition": RESEARCH}).raise_for_status()
        settings = {"network": "research", "max_steps": 2}
        body = {"message": QUESTION, "projectId": project, "settings": settings}
        events = stream(client, "POST", "/api/runs/agent_network/stream", json=body)
        assert [e.type for e in events][-2:] == ["budget_exhausted", "error"]
        error = events[-1]
        assert error.type == "error" and error.transcript is not None and len(error.transcript) == 3


def test_tokens_and_projects_hold_for_networks_and_runs(shared_servers):
    # alpha-secret reaches projA only, root-secret every project
    server = shared_servers(**GUARDED)
    alpha, root = {"Authorization": "Bearer alpha-secret"}, {"Authorization": "Bearer root-secret"}
    theirs = unique("projB")  # a project alpha may not use
    with httpx.Client(base_url=server.url, timeout=60) as client:
        assert client.post("/run", json={"user_message": "hi"}).status_code == 401
        assert client.get("/api/networks").status_code == 401
        assert (
            client.post("/run", json={"user_message": "hi", "project_id": theirs}, headers=alpha).status_code
            == 403
        )
        forbidden = client.post(
            "/api/networks", json={"projectId": theirs, "definition": RESEARCH}, headers=alpha
        )
        assert forbidden.status_code == 403
        client.post("/api/networks", json={"projectId": theirs, "definition": RESEARCH}, headers=root)
        # the other project's network is not alpha's
        assert client.get("/api/networks", headers=alpha).json() == []
        seen = client.get("/api/networks", headers=root).json()
        assert len([n for n in seen if n["projectId"] == theirs]) == 1  # root's reaches every project
        blind = client.post("/run", json={"user_message": "hi", "network": "research", "project_id": "projA"},
                            headers=alpha)  # fmt: skip
        assert blind.status_code == 404  # networks belong to their project


def test_spans_reach_an_otlp_collector_before_run_answers(servers, collector):
    server = servers(PHASEGRAPH_OTEL_EXPORTER="otlp", OTEL_EXPORTER_OTLP_ENDPOINT=collector.endpoint)
    with httpx.Client(base_url=server.url, timeout=60) as client:
        body = client.post("/run", json={"user_message": QUESTION, "thread_id": "conv-1"}).json()
        assert body["status"] == "completed"
        spans = collector.spans()  # no waiting: /run flushed before it answered
    names = [s.name for s in spans]
    assert names.count("invoke_workflow research") == 1
    assert [n for n in names if n.startswith("invoke_agent")] == [
        "invoke_agent triage", "invoke_agent researcher", "invoke_agent researcher",
        "invoke_agent researcher", "invoke_agent writer",
    ]  # fmt: skip
    assert sorted(n for n in names if n.startswith("execute_tool")) == [
        "execute_tool read_file",
        "execute_tool search_files",
    ]
    root = next(s for s in spans if s.name == "invoke_workflow research")
    assert root.attributes["gen_ai.conversation.id"].endswith("conv-1")
    assert all(s.trace_id == root.trace_id for s in spans)
    assert not any("gen_ai.prompt" in s.attributes for s in spans)


def test_publishing_checks_the_projects_tools_and_a_published_network_runs_them(servers, tmp_path):
    repo = git_repository(tmp_path / "repo")
    script = write_script(tmp_path, [tool("git.git_log", max_count=3), answer("Two commits.")])
    config = write_project(
        tmp_path, {"model": f"scripted:{script}", "mcp_servers": {"git": git_server(repo)}}
    )  # only the project file names the model and the server
    server = servers(PHASEGRAPH_CONFIG=str(config))
    historian = {"key": "historian", "is_default": True, "allow_respond": True,
                 "prompt_template": "You are {agent_key}. Tools:\n{tools}"}  # fmt: skip
    unknown = {"name": "history", "agents": [{**historian, "tools": [{"tool": "git.git_nope"}]}]}
    equipped = {
        "tool": "git.git_log",
        "agent_params": ["max_count"],
        "system_params": {"repo_path": str(repo)},
    }
    known = {"name": "history", "agents": [{**historian, "tools": [equipped]}]}
    with httpx.Client(base_url=server.url, timeout=60) as client:
        refused = client.post("/api/networks", json={"definition": unknown})
        assert refused.status_code == 422 and refused.json()["error"] == "invalid_network"
        (problem,) = refused.json()["problems"]
        assert problem.startswith(
            "Agent 'historian' is equipped with the tool 'git.git_nope', which does not"
        )
        assert "'git.git_log'" in problem
        assert client.get("/api/networks").json() == []
        published = client.post("/api/networks", json={"definition": known})
        assert published.status_code == 201, published.text
        answer_ = client.post(
            "/run", json={"network": "history", "user_message": "What happened?", "debug": True}
        )
        assert answer_.status_code == 200, answer_.text
        body = answer_.json()
        assert body["status"] == "completed" and body["result"] == "Two commits."
        (payload,) = body["tool_execution_log"].values()
        assert payload["tool_key"] == "git.git_log" and payload["status"] == "ok"
        assert "second commit" in payload["result"] and "first commit" in payload["result"]
