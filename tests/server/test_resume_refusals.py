"""Going on from where a thread has nothing to go on with is refused at once, and the thread stays usable.

A resume (LangGraph API ``command.resume`` or no input, the native resume route, AG-UI's ``resume``
of a paused run) of a thread whose run finished, or that waits for the answer to its question, would
run nothing: the driver went on with nothing again and again, the thread stayed busy for good and
every later run waited or was refused. Each route now answers 409 naming why, and the next run on
the thread completes. One server: the demo for the LangGraph API, a paced planner script that
lists projects and then archives one (the call waits for an approval) for the other two.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from ag_ui.core import BaseEvent, Event, RunFinishedEvent, ToolCallResultEvent
from pydantic import TypeAdapter

from phasegraph.tools.planning import PlanningStore
from tests.helpers import turn, write_script
from tests.server.conftest import Server, demo_server, stream
from tests.server.test_planner import _planning, _projects

#: Hang guard only: before the fix these calls never answered.
TIMEOUT = 30
ASK = {"messages": [{"role": "user", "content": "Summarise the roadmap in the docs folder."}]}
PROJECT_SETTINGS = {"context_type": "project", "entity_id": "orbit"}
AG_UI_EVENTS: TypeAdapter[BaseEvent] = TypeAdapter(Event)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    folder = tmp_path_factory.mktemp("resume-refusals-script")
    script = write_script(
        folder,
        turn("", ("list_projects", {})),
        turn("", ("archive_project", {})),  # it waits for an approval
        turn("Orbit is archived."),
        # a later message asks to archive it: the call waits for an approval again
        follow_ups=[[turn("", ("archive_project", {})), turn("Orbit is archived.")]],
        chunk_delay_ms=20,  # paced, so a pause asked at the start lands at the first pause point
    )
    with demo_server(
        tmp_path_factory,
        "resume-refusals",
        PHASEGRAPH_MODEL=script,
        PHASEGRAPH_ALLOWED_MODELS="scripted:demo",
    ) as started:
        yield started


@pytest.fixture
def client(server: Server) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server.url, timeout=TIMEOUT) as http:
        yield http


def _orbit(server: Server, scope: str) -> None:
    async def create(store: PlanningStore) -> None:
        await store.domain.create_project(scope, "Orbit", "event-plan")

    _planning(server, create)


@pytest.mark.parametrize(
    "going_on",
    [{"command": {"resume": "go on"}}, {"input": None}, {}],
    ids=["command-resume", "null-input", "no-input"],
)
def test_the_langgraph_api_refuses_to_resume_a_finished_thread_and_keeps_it_usable(
    client: httpx.Client, going_on: dict[str, Any]
):
    thread = client.post("/threads", json={}).json()["thread_id"]
    run = {"assistant_id": "triggered_phase", "context": {"model": "scripted:demo"}}
    assert "answer" in client.post(f"/threads/{thread}/runs/wait", json={**run, "input": ASK}).json()

    refused = client.post(f"/threads/{thread}/runs/wait", json={**run, **going_on})

    assert refused.status_code == 409, refused.text
    assert "nothing is left to run" in refused.json()["message"]
    assert client.get(f"/threads/{thread}").json()["status"] == "idle"
    assert len(client.get(f"/threads/{thread}/runs").json()) == 1  # nothing was started
    strict = {**run, "input": ASK, "multitask_strategy": "reject"}  # a busy thread would refuse it
    again = client.post(f"/threads/{thread}/runs/wait", json=strict)
    assert again.status_code == 200 and again.json()["answer"], again.text


def test_the_native_resume_of_a_thread_waiting_for_an_approval_is_refused_and_the_answer_runs(
    server: Server, client: httpx.Client
):
    scope, thread = "native-scope", "native-asking"
    _orbit(server, scope)
    body = {"projectId": scope, "threadId": thread, "settings": PROJECT_SETTINGS}
    asked = stream(client, "POST", "/api/runs/planner/stream",
                   json={**body, "message": "Archive Orbit", "requestId": "native-ask"})  # fmt: skip
    assert asked[-1].type == "paused" and asked[-1].reason == "interrupt"
    assert [e.name for e in asked if e.type == "approval_requested"] == ["archive_project"]
    before = client.get("/api/requests/native-ask", params={"projectId": scope}).json()["status"]

    refused = _refusal(client, "/api/requests/native-ask/resume", params={"projectId": scope})

    assert "waits for an approval of its call 'archive_project'" in refused
    record = client.get("/api/requests/native-ask", params={"projectId": scope}).json()
    assert record["status"] == before and _projects(server, scope) == [("orbit", "active")]
    answered = stream(client, "POST", "/api/requests/native-ask/resume", params={"projectId": scope},
                      json={"answer": "approve"})  # fmt: skip
    assert [(e.name, e.status) for e in answered if e.type == "tool_result"] == [("archive_project", "ok")]
    assert answered[-1].type == "final" and answered[-1].answer == "Orbit is archived."
    assert _projects(server, scope) == [("orbit", "archived")]


def _refusal(client: httpx.Client, url: str, **kwargs: Any) -> str:
    """The message of a 409 to a POST on a streaming route, checked before any body is read.

    Before the fix the route answered 200 and streamed a run that never ended (heartbeats included,
    so no read timeout would have stopped the test).
    """
    with client.stream("POST", url, **kwargs) as response:
        assert response.status_code == 409, response.status_code
        message: str = json.loads(response.read())["message"]
    return message


def _ag_ui(
    client: httpx.Client, query: str, body: dict[str, Any], pause: str | None = None
) -> list[BaseEvent]:
    """An AG-UI run's events; ``pause``: ask that request to pause as soon as its run started."""
    with client.stream("POST", f"/ag-ui/planner{query}", json=body) as response:
        assert response.status_code == 200, response.read()
        if pause is not None:
            assert client.post(f"/api/requests/{pause}/pause{query}").status_code == 202
        return [
            AG_UI_EVENTS.validate_json(line.removeprefix("data: ")) for line in response.iter_lines() if line
        ]


def test_ag_ui_resume_of_a_paused_run_whose_thread_asked_since_is_refused_and_the_answer_runs(
    server: Server, client: httpx.Client
):
    scope, thread, query = "agui-scope", "agui-asking", "?projectId=agui-scope"
    _orbit(server, scope)

    def body(run_id: str, message: str, **extra: Any) -> dict[str, Any]:
        messages = [{"id": f"{run_id}-user", "role": "user", "content": message}]
        return {"threadId": thread, "runId": run_id, "messages": messages, "forwardedProps": PROJECT_SETTINGS,
                **extra}  # fmt: skip

    _ag_ui(client, query, body("agui-look", "List the projects"), pause="agui-look")
    assert client.get(f"/api/requests/agui-look{query}").json()["status"] == "paused"
    asked = _ag_ui(client, query, body("agui-ask", "Archive Orbit"))  # a later turn's call waits for approval
    finished = asked[-1]
    assert isinstance(finished, RunFinishedEvent) and finished.outcome is not None
    [question] = finished.outcome.interrupts or []

    resume = [{"interruptId": "pause:agui-look", "status": "resolved"}]
    refused = _refusal(client, f"/ag-ui/planner{query}", json=body("agui-again", "go on", resume=resume))

    assert "was superseded" in refused and "waits for an approval of its call 'archive_project'" in refused
    assert question.id in refused  # the interrupt to answer instead
    assert client.get(f"/api/requests/agui-look{query}").json()["status"] == "superseded"
    answer = [{"interruptId": question.id, "status": "resolved", "payload": "approve"}]
    done = _ag_ui(client, query, body("agui-yes", "Archive Orbit", resume=answer))
    results = [json.loads(e.content)["status"] for e in done if isinstance(e, ToolCallResultEvent)]
    assert results == ["ok"]
    assert isinstance(done[-1], RunFinishedEvent) and done[-1].outcome is not None
    assert done[-1].outcome.type == "success"
    assert _projects(server, scope) == [("orbit", "archived")]
