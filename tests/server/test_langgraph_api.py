"""phasegraph's side of the LangGraph Server API: what the reference cannot check for us.

Refusals name the field; projects stay apart; a run started here is an ordinary request (trace,
pause, web page); ``enqueue`` waits its turn; a client that leaves can cancel its run; and the
planner's approval ``interrupt()`` is answered with ``Command(resume=...)``.
(tests/studio/test_server_api.py runs the shared behaviour against both servers.)
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from langgraph_sdk import get_sync_client
from langgraph_sdk.client import SyncLangGraphClient
from langgraph_sdk.errors import NotFoundError, PermissionDeniedError

from phasegraph.nodes.emit import EVENT_KEY
from phasegraph.nodes.events import Event, parse_event
from phasegraph.tools.planning import PlanningStore
from tests.helpers import turn, write_script
from tests.server.conftest import Server, demo_server, slow_script
from tests.server.js import node
from tests.server.test_planner import _planning

ASK = {"messages": [{"role": "user", "content": "Summarise the roadmap in the docs folder."}]}
TOKENS = "token-a:alpha;token-b:beta"


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    folder = tmp_path_factory.mktemp("lgapi-scripts")
    (folder / "archive").mkdir()
    archive = write_script(
        folder / "archive",
        turn("", ("archive_project", {})),  # it waits for an approval
        turn("Orbit is archived."),
    )
    (folder / "long").mkdir()
    long = write_script(folder / "long", turn(" ".join(["word"] * 400)), chunk_delay_ms=50)  # about 20 s
    (folder / "quick").mkdir()
    quick = write_script(folder / "quick", turn("Quick answer."))
    return {"slow": slow_script(folder, 60), "archive": archive, "long": long, "quick": quick}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, models: dict[str, str]) -> Iterator[Server]:
    allowed = ",".join(models.values())
    with demo_server(
        tmp_path_factory, "lgapi", PHASEGRAPH_ALLOWED_MODELS=allowed, PHASEGRAPH_API_TOKENS=TOKENS
    ) as s:
        yield s


def _client(server: Server, token: str = "token-a", project: str | None = None) -> SyncLangGraphClient:
    headers = {"Authorization": f"Bearer {token}"}
    if project:
        headers["X-Phasegraph-Project"] = project
    return get_sync_client(url=server.url, headers=headers, timeout=60)


@pytest.fixture
def client(server: Server) -> Iterator[SyncLangGraphClient]:
    sdk = _client(server)
    yield sdk
    sdk.http.client.close()


def _events(parts: list[Any]) -> list[Event]:
    return [parse_event(p.data[EVENT_KEY]) for p in parts if p.event == "custom" and EVENT_KEY in p.data]


def _raw(server: Server, method: str, path: str, **kwargs: Any) -> httpx.Response:
    headers = {"Authorization": "Bearer token-a", **kwargs.pop("headers", {})}
    return httpx.request(method, f"{server.url}{path}", headers=headers, timeout=30, **kwargs)


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"webhook": "http://127.0.0.1:9/hook"}, "webhook"),
        ({"after_seconds": 5}, "after_seconds"),
        ({"stream_mode": "tasks"}, "stream_mode"),
        ({"stream_mode": ["values", "debug"]}, "stream_mode"),
        ({"multitask_strategy": "cancel"}, "multitask_strategy"),
        ({"command": {"goto": "tool_phase"}}, "goto"),
        ({"interrupt_before": ["tool_phase"] * 101}, "interrupt_before"),  # as many as the native routes take
        ({"interrupt_after": ["x" * 201]}, "interrupt_after"),
    ],
)
def test_an_unsupported_field_is_refused_naming_it(server: Server, body: dict[str, Any], field: str):
    thread = _raw(server, "POST", "/threads", json={}).json()["thread_id"]
    answer = _raw(server, "POST", f"/threads/{thread}/runs/stream",
                  json={"assistant_id": "triggered_phase", "input": ASK, **body})  # fmt: skip
    assert answer.status_code == 422, answer.text
    assert any(field in [str(part) for part in error["loc"]] for error in answer.json()["detail"])
    assert _raw(server, "GET", f"/threads/{thread}/runs").json() == []  # nothing was started


@pytest.mark.parametrize(
    ("body", "says"),
    [
        ({"interrupt_before": ["no_such_node"]}, "'no_such_node' is not a node of 'triggered_phase'"),
        ({"input": {"messages": [], "secret": 1}}, "input.secret is not an input"),
        ({"command": {"resume": "x"}}, "the thread has no checkpoint to go on from"),  # the command wins
        ({"context": {"workspace": "/etc"}}, "settings.workspace cannot be set"),
        ({"context": {"model": {"spec": "x"}}}, "context.model: a model spec"),
        ({"config": {"configurable": {"show_tool_outputs": "yes"}}}, "context.show_tool_outputs"),
        ({"assistant_id": "nope"}, "assistant 'nope' not found"),
    ],
)
def test_a_run_that_cannot_be_started_says_why_and_starts_nothing(
    server: Server, body: dict[str, Any], says: str
):
    thread = _raw(server, "POST", "/threads", json={}).json()["thread_id"]
    answer = _raw(server, "POST", f"/threads/{thread}/runs/wait",
                  json={"assistant_id": "triggered_phase", "input": ASK, **body})  # fmt: skip
    assert answer.status_code in (400, 404, 409, 422), answer.text
    assert says in answer.json()["message"]
    assert _raw(server, "GET", f"/threads/{thread}/runs").json() == []


def test_cancel_refuses_an_unknown_action_naming_the_field(server: Server, client: SyncLangGraphClient):
    thread_id = client.threads.create()["thread_id"]
    run_id = client.runs.create(thread_id, "triggered_phase", input=ASK)["run_id"]
    answer = _raw(server, "POST", f"/threads/{thread_id}/runs/{run_id}/cancel", params={"action": "undo"})
    assert answer.status_code == 422 and answer.json()["detail"][0]["loc"] == ["query", "action"]
    client.runs.join(thread_id, run_id)
    assert client.runs.get(thread_id, run_id)["status"] == "success"  # the refused cancel did nothing


def _long_run(client: SyncLangGraphClient, thread_id: str, models: dict[str, str]) -> str:
    """Start a run that streams for about 20 s; its id once its model is streaming."""
    long = {"messages": [{"role": "user", "content": "A long one."}]}
    run_id = client.runs.create(thread_id, "triggered_phase", input=long, context={"model": models["long"]})[
        "run_id"
    ]
    for part in client.runs.join_stream(thread_id, run_id, stream_mode="messages-tuple"):
        if part.event == "messages" and part.data[0].get("content"):
            return run_id
    raise AssertionError("the long run ended before its model streamed")


def _checkpoints_of(client: SyncLangGraphClient, thread_id: str, run_id: str) -> int:
    history = client.threads.get_history(thread_id, limit=1000)
    return sum(s["metadata"].get("run_id") == run_id for s in history)


def _humans(client: SyncLangGraphClient, thread_id: str) -> list[str]:
    messages = client.threads.get_state(thread_id)["values"]["messages"]
    return [m["content"] for m in messages if m["type"] == "human"]


def test_multitask_interrupt_cancels_the_running_run_and_goes_on_from_it(
    client: SyncLangGraphClient, models: dict[str, str]
):
    thread_id = client.threads.create()["thread_id"]
    first = _long_run(client, thread_id, models)
    second = client.runs.wait(thread_id, "triggered_phase", input=ASK, context={"model": models["quick"]},
                              multitask_strategy="interrupt")  # fmt: skip
    assert second["answer"] == "Quick answer."
    assert [(r["run_id"] == first, r["status"]) for r in client.runs.list(thread_id)] == [
        (False, "success"), (True, "interrupted"),
    ]  # fmt: skip
    assert _checkpoints_of(client, thread_id, first) > 0  # interrupted, not removed
    assert _humans(client, thread_id) == ["A long one.", ASK["messages"][0]["content"]]


def test_multitask_rollback_removes_the_running_run_and_its_checkpoints(
    client: SyncLangGraphClient, models: dict[str, str]
):
    thread_id = client.threads.create()["thread_id"]
    client.runs.wait(thread_id, "triggered_phase", input=ASK, context={"model": models["quick"]})
    kept = client.threads.get_history(thread_id, limit=1000)
    first = _long_run(client, thread_id, models)
    assert _checkpoints_of(client, thread_id, first) > 0
    second = client.runs.wait(thread_id, "triggered_phase", input=ASK, context={"model": models["quick"]},
                              multitask_strategy="rollback")  # fmt: skip
    assert second["answer"] == "Quick answer."
    assert [r["status"] for r in client.runs.list(thread_id)] == ["success", "success"]
    with pytest.raises(NotFoundError):
        client.runs.get(thread_id, first)
    history = client.threads.get_history(thread_id, limit=1000)
    assert _checkpoints_of(client, thread_id, first) == 0
    assert [s["checkpoint_id"] for s in history[-len(kept) :]] == [s["checkpoint_id"] for s in kept]
    assert _humans(client, thread_id) == [ASK["messages"][0]["content"]] * 2


def test_cancel_with_rollback_leaves_the_thread_as_before_the_run(
    client: SyncLangGraphClient, models: dict[str, str]
):
    thread_id = client.threads.create()["thread_id"]
    run_id = _long_run(client, thread_id, models)
    client.runs.cancel(thread_id, run_id, action="rollback")
    assert client.runs.list(thread_id) == []
    assert client.threads.get_history(thread_id) == []
    assert client.threads.get(thread_id)["status"] == "idle"
    client.runs.wait(thread_id, "triggered_phase", input=ASK, context={"model": models["quick"]})
    assert client.threads.get(thread_id)["status"] == "idle"  # the thread goes on as if it had not run


def test_threads_and_runs_stay_in_their_project(server: Server):
    alpha, beta = _client(server), _client(server, "token-b")
    thread_id = alpha.threads.create(metadata={"owner": "alpha"})["thread_id"]
    alpha.runs.wait(thread_id, "triggered_phase", input=ASK)
    with pytest.raises(NotFoundError):
        beta.threads.get(thread_id)
    with pytest.raises(httpx.HTTPStatusError, match="404"):  # wait raises httpx's own error
        beta.runs.wait(thread_id, "triggered_phase", input=ASK)
    assert beta.threads.search(metadata={"owner": "alpha"}) == []
    with pytest.raises(PermissionDeniedError):  # a project the token does not cover
        _client(server, "token-b", project="alpha").threads.get(thread_id)
    assert _raw(server, "GET", "/threads/x", headers={"Authorization": ""}).status_code == 401


def test_a_run_is_an_ordinary_request_with_a_trace(server: Server, client: SyncLangGraphClient):
    thread_id = client.threads.create()["thread_id"]
    parts = list(client.runs.stream(thread_id, "triggered_phase", input=ASK, stream_mode="custom"))
    run_id = parts[0].data["run_id"]
    record = _raw(server, "GET", f"/api/requests/{run_id}", params={"projectId": "alpha"}).json()
    assert (record["protocol"], record["threadId"], record["status"]) == (
        "triggered_phase",
        thread_id,
        "completed",
    )
    trace = _raw(server, "GET", f"/api/requests/{run_id}/trace", params={"projectId": "alpha"}).json()
    assert trace  # the run's trace is kept like any request's
    assert record["lastSeq"] == max(e.seq for e in _events(parts))  # every event was streamed here too


def test_a_run_paused_by_phasegraph_is_interrupted_there_and_goes_on_with_a_new_run(
    server: Server, client: SyncLangGraphClient, models: dict[str, str]
):
    thread_id = client.threads.create()["thread_id"]
    run = client.runs.create(thread_id, "triggered_phase", input=ASK, context={"model": models["slow"]})
    deadline = time.monotonic() + 30
    while (
        _raw(
            server, "POST", f"/api/requests/{run['run_id']}/pause", params={"projectId": "alpha"}
        ).status_code
        != 202
    ):
        assert time.monotonic() < deadline
        time.sleep(0.05)
    while client.runs.get(thread_id, run["run_id"])["status"] == "running":
        assert time.monotonic() < deadline
        time.sleep(0.05)
    assert client.threads.get(thread_id)["status"] == "interrupted"
    assert client.threads.get_state(thread_id)["next"]
    rest = list(client.runs.stream(thread_id, "triggered_phase", input=None, stream_mode="custom",
                                   context={"model": models["slow"]}))  # fmt: skip
    assert [e.type for e in _events(rest)].count("final") == 1
    assert client.threads.get(thread_id)["status"] == "idle"


def test_enqueue_waits_for_the_running_run_then_runs(client: SyncLangGraphClient, models: dict[str, str]):
    thread_id = client.threads.create()["thread_id"]
    first = client.runs.create(thread_id, "triggered_phase", input=ASK, context={"model": models["slow"]})
    second = client.runs.wait(thread_id, "triggered_phase", input=ASK, multitask_strategy="enqueue")
    assert client.runs.get(thread_id, first["run_id"])["status"] == "success"
    assert second["answer"]
    runs = client.runs.list(thread_id)
    assert [r["status"] for r in runs] == ["success", "success"]
    humans = [m for m in client.threads.get_state(thread_id)["values"]["messages"] if m["type"] == "human"]
    assert len(humans) == 2


def test_a_client_that_leaves_can_cancel_its_run(
    server: Server, client: SyncLangGraphClient, models: dict[str, str]
):
    thread_id = client.threads.create()["thread_id"]
    stream = client.runs.stream(thread_id, "triggered_phase", input=ASK, stream_mode="custom",
                                context={"model": models["slow"]}, on_disconnect="cancel")  # fmt: skip
    seen = []
    for part in stream:
        seen.append(part)
        if len(_events(seen)) == 3:
            break
    stream.close()
    run_id = seen[0].data["run_id"]
    deadline = time.monotonic() + 30
    while client.runs.get(thread_id, run_id)["status"] == "running":
        assert time.monotonic() < deadline, "the run went on"
        time.sleep(0.05)
    assert client.runs.get(thread_id, run_id)["status"] == "interrupted"
    record = _raw(server, "GET", f"/api/requests/{run_id}", params={"projectId": "alpha"}).json()
    assert record["status"] == "cancelled"


def test_a_missing_thread_is_404_unless_the_run_may_create_it(client: SyncLangGraphClient):
    with pytest.raises(httpx.HTTPStatusError, match="404"):
        client.runs.wait("no-such-thread", "triggered_phase", input=ASK)
    made = client.runs.wait("made-by-its-run", "triggered_phase", input=ASK, if_not_exists="create")
    assert made["answer"] and client.threads.get("made-by-its-run")["status"] == "idle"


def _archive_asked(
    server: Server, client: SyncLangGraphClient, models: dict[str, str], name: str
) -> tuple[str, dict[str, Any], dict[str, Any]]:
    """Project ``name`` in alpha and a new thread asking the planner to archive it: thread, context, input."""

    async def create(store: PlanningStore) -> None:
        await store.domain.create_project("alpha", name, "event-plan")

    _planning(server, create)
    context = {"model": models["archive"], "context_type": "project", "entity_id": name.lower()}
    ask = {"messages": [{"role": "user", "content": f"Archive {name}"}]}
    return client.threads.create()["thread_id"], context, ask


def test_the_planners_approval_is_an_interrupt_answered_with_a_command(
    server: Server, client: SyncLangGraphClient, models: dict[str, str]
):
    thread_id, context, ask = _archive_asked(server, client, models, "Orbit")
    asking = list(client.runs.stream(thread_id, "planner", input=ask,
                                     context=context, stream_mode=["updates", "custom"]))  # fmt: skip
    interrupts = [
        p.data["__interrupt__"] for p in asking if p.event == "updates" and "__interrupt__" in p.data
    ]
    value = interrupts[-1][0]["value"]
    assert value["type"] == "approval" and value["call"]["name"] == "archive_project"
    thread = client.threads.get(thread_id)
    assert thread["status"] == "interrupted" and thread["interrupts"]
    words = list(client.runs.stream(thread_id, "planner", command={"resume": "yes, archive it"},
                                    context=context, stream_mode="custom"))  # fmt: skip
    assert not [e for e in _events(words) if e.type == "tool_result"]  # words are no approval: asked again
    [pending] = client.threads.get(thread_id)["interrupts"].values()
    assert "yes, archive it" in pending[0]["value"]["problem"]
    done = list(client.runs.stream(thread_id, "planner", command={"resume": "approve"}, context=context,
                                   stream_mode="custom"))  # fmt: skip
    results = [e for e in _events(done) if e.type == "tool_result"]
    assert [(e.name, e.status) for e in results] == [("archive_project", "ok")]
    assert client.threads.get(thread_id)["status"] == "idle"


def test_the_js_sdk_double_texts_with_interrupt_and_rollback(server: Server, models: dict[str, str]):
    result = node(
        "multitask.mjs", server.url, models["long"], models["quick"], env={"PHASEGRAPH_TOKEN": "token-a"}
    )
    steps = json.loads(result.stdout.strip().splitlines()[-1])["steps"]
    assert all(step["ok"] for step in steps.values()), steps
    interrupted, rolled_back = steps["interrupt"]["value"], steps["rollback"]["value"]
    assert interrupted["answer"] == rolled_back["answer"] == "Quick answer."
    assert interrupted["runs"] == [
        {"first": False, "status": "success"},
        {"first": True, "status": "interrupted"},
    ]
    assert interrupted["humans"] == ["A long one.", "Second."] and interrupted["first_checkpoints"] > 0
    assert rolled_back["runs"] == [{"first": False, "status": "success"}]
    assert rolled_back["humans"] == ["Second."] and rolled_back["first_checkpoints"] == 0
    assert steps["cancel_rollback"]["value"] == {"runs": 0, "history": 0, "status": "idle"}


def test_an_approval_reaches_a_values_only_stream_and_a_command_beside_input_answers_it(
    server: Server, client: SyncLangGraphClient, models: dict[str, str]
):
    thread_id, context, ask = _archive_asked(server, client, models, "Apollo")
    # useStream's modes as docs/clients.md sets them: no ``updates``, so the interrupt comes in ``values``
    asking = list(client.runs.stream(thread_id, "planner", input=ask, context=context,
                                     stream_mode=["values", "messages-tuple", "custom"]))  # fmt: skip
    last = [p.data for p in asking if p.event == "values"][-1]
    [question] = last["__interrupt__"]
    assert question["value"]["call"]["name"] == "archive_project" and last["messages"]
    # thread.interrupts: keyed by the id of the task that asks, as the reference keys them
    state = client.threads.get_state(thread_id)
    thread = client.threads.get(thread_id)
    assert thread["interrupts"] == {t["id"]: t["interrupts"] for t in state["tasks"] if t["interrupts"]}
    assert thread["interrupts"] and next(iter(thread["interrupts"].values()))[0]["id"] == question["id"]
    # CopilotKit's LangGraph adapter sends its state (client tools included) beside the command: ignored
    copilotkit = {**ask, "tools": [{"name": "frontend_only"}], "copilotkit": {"actions": [{"name": "x"}]}}
    done = list(client.runs.stream(thread_id, "planner", input=copilotkit, command={"resume": "approve"},
                                   context=context, stream_mode=["values", "custom"]))  # fmt: skip
    results = [e for e in _events(done) if e.type == "tool_result"]
    assert [(e.name, e.status) for e in results] == [("archive_project", "ok")]
    assert not [p for p in done if p.event == "values" and "__interrupt__" in p.data]
    humans = [m for m in client.threads.get_state(thread_id)["values"]["messages"] if m["type"] == "human"]
    assert len(humans) == 1  # the input beside the command added nothing
