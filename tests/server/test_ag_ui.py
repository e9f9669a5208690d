"""AG-UI over real HTTP: ``POST /ag-ui/{protocol}`` streams events read back with ag-ui-protocol's models.

Every stream is parsed with a ``TypeAdapter`` over ``ag_ui.core.Event`` and checked for AG-UI's order
(RUN_STARTED and the STATE_SNAPSHOT first, MESSAGES_SNAPSHOT and RUN_FINISHED or RUN_ERROR last, every
message, tool call and step closed). The runs are ordinary requests: the same ids in ``GET
/api/requests``, the same events in their replay. A pause (the pause route) and the planner's approval
before a destructive call end a run with the interrupt outcome, and a later run's ``resume`` continues
it; a client that leaves pauses its run. Two servers, started together: the bundled demos, and a paced
script that archives a project (that one has tokens). Later turns as clients send them:
``test_ag_ui_turns.py``.
"""

import json
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from itertools import islice
from typing import Any

import httpx
import pytest
from ag_ui.core import (
    BaseEvent,
    CustomEvent,
    Event,
    MessagesSnapshotEvent,
    RunErrorEvent,
    RunFinishedEvent,
    RunStartedEvent,
    StateSnapshotEvent,
    StepFinishedEvent,
    StepStartedEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
    ToolCallArgsEvent,
    ToolCallEndEvent,
    ToolCallResultEvent,
    ToolCallStartEvent,
)
from pydantic import TypeAdapter

from phasegraph.nodes.models import DEMO_WORKSPACE
from phasegraph.tools.planning import PlanningStore
from tests.helpers import turn, write_script
from tests.server.conftest import Server, stream
from tests.server.test_planner import _planning, _projects

EVENTS: TypeAdapter[BaseEvent] = TypeAdapter(Event)
ROADMAP = "Summarise docs/roadmap.md"
#: The asking server has tokens: this one covers its test projects.
TOKEN = {"Authorization": "Bearer agui-token"}


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Server, Server]]:
    """The demo server and the archiving planner's, started side by side (each start costs seconds)."""
    folder = tmp_path_factory.mktemp("ag-ui")
    (folder / "archive").mkdir()
    archive = write_script(
        folder / "archive",
        turn("", ("archive_project", {})),
        turn("", ("archive_project", {})),
        turn("Orbit is archived."),
        follow_ups=[[turn("", ("archive_project", {})), turn("Orbit is archived.")]],
        chunk_delay_ms=20,  # paced, so a client can leave mid-run
    )

    def server(name: str, **env: str) -> Server:
        (folder / name).mkdir(exist_ok=True)
        base = {"PHASEGRAPH_CHECKPOINTER": f"sqlite:{folder / name / 'state.db'}"}
        return Server(
            env={**base, "PHASEGRAPH_WORKSPACE": str(DEMO_WORKSPACE), **env}, log=folder / f"{name}.log"
        )

    tokens = "agui-token:agui-archive,default;other-token:elsewhere"
    pair = [server("demo"), server("asking", PHASEGRAPH_MODEL=archive, PHASEGRAPH_API_TOKENS=tokens)]
    try:  # a server that did not come up is stopped too (it may come up later, with nobody to stop it)
        with ThreadPoolExecutor(2) as pool:
            started = list(pool.map(Server.start, pair))
        yield started[0], started[1]
    finally:
        for each in pair:
            each.stop()


@pytest.fixture(scope="module")
def demo(servers: tuple[Server, Server]) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=servers[0].url, timeout=60) as client:
        yield client


def _input(run_id: str, thread_id: str, message: str = ROADMAP, **extra: Any) -> dict[str, Any]:
    messages = [{"id": f"{run_id}-user", "role": "user", "content": message}]
    return {"threadId": thread_id, "runId": run_id, "messages": messages, **extra}


def _frames(response: httpx.Response) -> Iterator[BaseEvent]:
    """The events of an AG-UI stream (``data: <event JSON>`` and a blank line each), as they come."""
    assert response.status_code == 200, response.read()
    assert response.headers["content-type"].startswith("text/event-stream")
    assert response.headers["x-accel-buffering"] == "no"
    for line in response.iter_lines():
        if line:
            yield EVENTS.validate_json(line.removeprefix("data: "))


def _read(response: httpx.Response) -> list[BaseEvent]:
    return list(_frames(response))


def _run(client: httpx.Client, protocol: str, body: dict[str, Any], query: str = "") -> list[BaseEvent]:
    with client.stream("POST", f"/ag-ui/{protocol}{query}", json=body) as response:
        events = _read(response)
    _check_order(events)
    return events


def _check_order(events: list[BaseEvent]) -> None:
    """AG-UI's rules: one run, opened first and closed last; messages, calls and steps each balanced."""
    assert isinstance(events[0], RunStartedEvent) and events[0].protocol_version == "1.0"
    assert isinstance(events[-1], RunFinishedEvent | RunErrorEvent)
    assert isinstance(events[1], StateSnapshotEvent)  # the thread's state as the run starts
    assert isinstance(events[-2], MessagesSnapshotEvent)  # the thread's messages, just before the end
    messages: set[str] = set()
    calls: set[str] = set()
    steps: list[str] = []
    for event in events[1:-1]:
        assert not isinstance(event, RunStartedEvent | RunFinishedEvent | RunErrorEvent)
        match event:
            case TextMessageStartEvent():
                assert not messages and not calls  # one at a time: a message ends before anything else
                messages.add(event.message_id)
            case TextMessageContentEvent():
                assert event.message_id in messages
            case TextMessageEndEvent():
                messages.remove(event.message_id)
            case ToolCallStartEvent():
                assert not messages and not calls
                calls.add(event.tool_call_id)
            case ToolCallArgsEvent():
                assert event.tool_call_id in calls
            case ToolCallEndEvent():
                calls.remove(event.tool_call_id)
            case StepStartedEvent():
                assert event.step_name not in steps
                steps.append(event.step_name)
            case StepFinishedEvent():
                steps.remove(event.step_name)
            case _:
                assert not messages, f"{event.type} inside a text message"
    assert not messages and not calls and not steps


def _of(events: list[BaseEvent], kind: type[Any]) -> list[Any]:
    return [e for e in events if isinstance(e, kind)]


def _texts(events: list[BaseEvent]) -> list[str]:
    """The streamed assistant messages, each as one string."""
    texts: dict[str, str] = {}
    for event in events:
        if isinstance(event, TextMessageStartEvent):
            assert event.role == "assistant"
            texts[event.message_id] = ""
        elif isinstance(event, TextMessageContentEvent):
            texts[event.message_id] += event.delta
    return list(texts.values())


def _seqs(events: list[BaseEvent]) -> list[int]:
    """The seqs of the request's events these AG-UI events were made from (each once, in order)."""
    seqs = []
    for event in events:
        if isinstance(event, RunFinishedEvent) and event.result:
            made_from = event.result  # the final event
        elif isinstance(event, CustomEvent):
            made_from = event.value
        else:
            made_from = event.raw_event
        if isinstance(made_from, dict):
            seqs.append(made_from["seq"])
    return seqs


def _finished(events: list[BaseEvent]) -> RunFinishedEvent:
    last = events[-1]
    assert isinstance(last, RunFinishedEvent), last
    return last


def test_a_triggered_phase_run_streams_as_ag_ui_and_is_an_ordinary_request(demo: httpx.Client):
    events = _run(demo, "triggered_phase", _input("agui-phases", "agui-phases-thread"))

    started, finished = events[0], _finished(events)
    assert (started.thread_id, started.run_id) == ("agui-phases-thread", "agui-phases")
    assert (finished.thread_id, finished.run_id) == ("agui-phases-thread", "agui-phases")
    assert finished.outcome is not None and finished.outcome.type == "success"
    answer = finished.result["answer"]
    assert finished.result["type"] == "final" and "two milestones" in answer
    # one step per phase, in order; each text message is the phase's model text
    assert [e.step_name for e in _of(events, StepStartedEvent)] == [
        "action_phase 1", "tool_phase 2", "action_phase 3", "tool_phase 4", "action_phase 5",
    ]  # fmt: skip
    texts = _texts(events)
    assert texts == ["Let me see what is in the docs folder.", "There is a roadmap. I will read it.", answer]
    # the two calls the demo ran, their arguments as JSON, and a result for each; the refused repeat is CUSTOM
    starts = _of(events, ToolCallStartEvent)
    assert [(e.tool_call_name, e.tool_call_id) for e in starts] == [
        ("list_files", "call_1_1"),
        ("read_file", "call_2_1"),
    ]
    assert [json.loads(e.delta) for e in _of(events, ToolCallArgsEvent)] == [
        {"path": "docs"},
        {"path": "docs/roadmap.md"},
    ]
    results = _of(events, ToolCallResultEvent)
    assert [(e.tool_call_id, json.loads(e.content)) for e in results] == [
        ("call_1_1", {"status": "ok"}), ("call_2_1", {"status": "ok"}),
    ]  # fmt: skip
    assert [e.name for e in _of(events, CustomEvent)] == ["duplicate_tool_call"]
    asked = events[-2].messages[0]
    assert (asked.role, asked.content) == ("user", ROADMAP)
    # an ordinary request: its status, its trace, and every one of its events in the AG-UI stream
    status = demo.get("/api/requests/agui-phases").json()
    assert (status["status"], status["protocol"], status["threadId"]) == (
        "completed", "triggered_phase", "agui-phases-thread",
    )  # fmt: skip
    traced = [
        t["details"]["name"]
        for t in demo.get("/api/requests/agui-phases/trace").json()
        if t["type"] == "tool_call"
    ]
    assert traced == ["list_files", "read_file"]
    replayed = stream(demo, "GET", "/api/requests/agui-phases/stream")
    assert _seqs(events) == [e.seq for e in replayed]


def test_a_planner_run_takes_its_settings_from_forwarded_props(demo: httpx.Client):
    settings = {"context_type": "project_create", "user_id": "ag-ui-user"}
    body = _input(
        "agui-plan", "agui-plan-thread", "Set up a project for our spring launch", forwardedProps=settings
    )
    events = _run(demo, "planner", body, query="?projectId=agui-scope")

    [session] = [e.value for e in _of(events, CustomEvent) if e.name == "session"]
    assert (session["contextType"], session["userId"], session["projectId"]) == (
        "project_create", "ag-ui-user", "agui-scope",
    )  # fmt: skip
    # the plan's steps are AG-UI steps around their tool calls
    plan_id = next(e.value["planId"] for e in _of(events, CustomEvent) if e.name == "plan_created")
    steps = [e.step_name for e in _of(events, StepStartedEvent)]
    assert steps == [f"{plan_id} s1", f"{plan_id} s2", f"{plan_id} s3"]
    assert [e.step_name for e in _of(events, StepFinishedEvent)] == steps
    calls = [e.tool_call_name for e in _of(events, ToolCallStartEvent)]
    assert calls == ["list_templates", "list_templates", "create_project", "publish_context_document"]
    assert [json.loads(e.content)["status"] for e in _of(events, ToolCallResultEvent)] == ["ok"] * 4
    finished = _finished(events)
    assert finished.outcome is not None and finished.outcome.type == "success"
    assert _texts(events)[-1] == finished.result["answer"]  # streamed once, not repeated
    assert demo.get("/api/requests/agui-plan?projectId=agui-scope").json()["status"] == "completed"
    assert demo.get("/api/requests/agui-plan?projectId=default").status_code == 404


def test_a_failed_run_ends_with_run_error(demo: httpx.Client):
    body = _input(
        "agui-budget", "agui-budget-thread", "Who works on streaming?", forwardedProps={"max_steps": 1}
    )
    events = _run(demo, "agent_network", body)

    failed = events[-1]
    assert isinstance(failed, RunErrorEvent) and failed.code == "budget_exhausted"
    assert failed.raw_event["type"] == "error" and failed.message == failed.raw_event["message"]
    assert [e.name for e in _of(events, CustomEvent)] == ["agent_step", "route", "budget_exhausted"]
    assert demo.get("/api/requests/agui-budget").json()["status"] == "failed"


def test_a_run_failing_mid_phase_finishes_the_step_before_run_error(servers: tuple[Server, Server]):
    # The archiving script answers goal_pursuit's first structured call with the wrong tool: the
    # context discovery phase fails without a phase_end, and its step is finished for it.
    with httpx.Client(base_url=servers[1].url, headers=TOKEN, timeout=60) as client:
        events = _run(client, "goal_pursuit", _input("agui-mid-phase", "agui-mid-phase-thread"))
        stored = stream(client, "GET", "/api/requests/agui-mid-phase/stream")

    assert [e.type for e in stored] == ["phase_start", "error"]
    [started], [finished] = _of(events, StepStartedEvent), _of(events, StepFinishedEvent)
    assert started.step_name == finished.step_name == "context_discovery 1"
    assert started.raw_event["type"] == "phase_start" and finished.raw_event is None
    failed = events[-1]
    assert isinstance(failed, RunErrorEvent) and failed.code == "invalid_model_output"
    assert "DiscoveryPlan" in failed.message


def _paused(client: httpx.Client, run_id: str) -> list[BaseEvent]:
    """Start the demo and pause it at once with the pause route: it stops at its first pause point."""
    with client.stream("POST", "/ag-ui/triggered_phase", json=_input(run_id, f"{run_id}-thread")) as response:
        assert client.post(f"/api/requests/{run_id}/pause").status_code == 202
        events = _read(response)
    _check_order(events)
    return events


def _resume(run_id: str, interrupt: str, status: str, **entry: Any) -> dict[str, Any]:
    resume = [{"interruptId": interrupt, "status": status, **entry}]
    return _input(run_id, f"{interrupt.removeprefix('pause:')}-thread", resume=resume)


def test_a_paused_run_ends_with_an_interrupt_that_a_resume_continues(demo: httpx.Client):
    paused = _paused(demo, "agui-pause")

    [interrupt] = _finished(paused).outcome.interrupts
    assert (interrupt.id, interrupt.reason) == ("pause:agui-pause", "paused")
    assert interrupt.metadata == {"requestId": "agui-pause", "pauseReason": "requested"}
    assert [e.step_name for e in _of(paused, StepFinishedEvent)][-1] == "tool_phase 2"
    assert demo.get("/api/requests/agui-pause").json()["status"] == "paused"
    # the resume continues the same request from where it stopped: no tool runs twice
    resumed = _run(demo, "triggered_phase", _resume("agui-pause-2", "pause:agui-pause", "resolved"))
    assert resumed[0].run_id == "agui-pause"
    assert _of(resumed, CustomEvent)[0].name == "resumed"
    assert _finished(resumed).outcome.type == "success"
    calls = [e.tool_call_name for e in _of(paused + resumed, ToolCallStartEvent)]
    assert calls == ["list_files", "read_file"]
    assert demo.get("/api/requests/agui-pause").json()["status"] == "completed"
    replayed = stream(demo, "GET", "/api/requests/agui-pause/stream")
    assert _seqs(paused) + _seqs(resumed) == [e.seq for e in replayed]
    # the interrupt is closed now
    again = demo.post("/ag-ui/triggered_phase", json=_resume("agui-pause-3", "pause:agui-pause", "resolved"))
    assert again.status_code == 409 and "completed, not paused" in again.json()["message"]


def test_a_cancelled_resume_cancels_the_paused_run(demo: httpx.Client):
    _paused(demo, "agui-drop")

    cancelled = _run(demo, "triggered_phase", _resume("agui-drop-2", "pause:agui-drop", "cancelled"))
    assert _finished(cancelled).outcome.type == "cancelled"
    assert not _of(cancelled, ToolCallStartEvent)
    assert demo.get("/api/requests/agui-drop").json()["status"] == "cancelled"


def test_a_dropped_connection_pauses_the_run_like_every_stream(servers: tuple[Server, Server]):
    with httpx.Client(base_url=servers[1].url, headers=TOKEN, timeout=60) as client:
        body = _input("agui-left", "agui-left-thread")
        with client.stream("POST", "/ag-ui/triggered_phase", json=body) as response:
            first = list(islice(_frames(response), 3))  # then the client leaves
        replayed = stream(client, "GET", "/api/requests/agui-left/stream")
        resumed = _run(client, "triggered_phase", _resume("agui-left-2", "pause:agui-left", "resolved"))

    assert [e.type for e in first] == ["RUN_STARTED", "STATE_SNAPSHOT", "STEP_STARTED"]
    assert replayed[-1].type == "paused" and replayed[-1].reason == "disconnected"
    assert _finished(resumed).outcome.type == "success"
    assert _texts(resumed)[-1] == "Orbit is archived."


def test_the_planners_destructive_call_is_an_approval_interrupt_its_answer_resumes(
    servers: tuple[Server, Server],
):
    asking, scope, thread = servers[1], "agui-archive", "agui-archive-thread"

    async def create(store: PlanningStore) -> None:
        await store.domain.create_project(scope, "Orbit", "event-plan")

    _planning(asking, create)
    settings = {"context_type": "project", "entity_id": "orbit"}
    query = f"?projectId={scope}"
    body = _input("agui-ask", thread, "Archive Orbit", forwardedProps=settings)
    anonymous = httpx.post(f"{asking.url}/ag-ui/planner{query}", json=body)
    stranger = httpx.post(
        f"{asking.url}/ag-ui/planner{query}", json=body, headers={"Authorization": "Bearer other-token"}
    )
    with httpx.Client(base_url=asking.url, headers=TOKEN, timeout=60) as client:
        asked = _run(client, "planner", body, query)
        [question] = _finished(asked).outcome.interrupts
        url = f"/ag-ui/planner{query}"

        def answer(run_id: str, interrupt: str, **entry: Any) -> dict[str, Any]:
            resume = [{"interruptId": interrupt, "status": "resolved", **entry}]
            return _input(run_id, thread, "Archive Orbit", forwardedProps=settings, resume=resume)

        wordless = client.post(url, json=answer("agui-no", question.id, payload={"yes": True}))
        unknown = client.post(url, json=answer("agui-no", "no-such-interrupt", payload="approve"))
        still_active = _projects(asking, scope)
        approved = _run(client, "planner", answer("agui-yes", question.id, payload="approve"), query)
        [again] = _finished(approved).outcome.interrupts  # the script makes the call a second time
        no = {"decision": "reject", "reason": "it is archived already"}
        done = _run(client, "planner", answer("agui-no-more", again.id, payload=no), query)

    # the caller's token must cover the project
    assert anonymous.status_code == 401 and stranger.status_code == 403
    assert "agui-archive" in stranger.json()["message"]
    # the call waits for an approval: the run ends with its interrupt, nothing ran
    assert question.reason == "tool_approval" and question.metadata["call"]["name"] == "archive_project"
    assert not _of(asked, ToolCallStartEvent) and still_active == [("orbit", "active")]
    assert wordless.status_code == 422
    assert unknown.status_code == 404 and "no-such-interrupt" in unknown.json()["message"]
    # approved, it runs once; made again, it waits again; rejected, it never runs and the model reads why
    assert [json.loads(e.content)["status"] for e in _of(approved, ToolCallResultEvent)] == ["ok"]
    assert _projects(asking, scope) == [("orbit", "archived")]
    assert again.reason == "tool_approval" and again.id != question.id
    [rejected] = [json.loads(e.content) for e in _of(done, ToolCallResultEvent)]
    assert rejected["status"] == "error" and "it is archived already" in json.dumps(rejected)
    assert _finished(done).outcome.type == "success"
    assert _texts(done)[-1] == "Orbit is archived."


TP = "/ag-ui/triggered_phase"
IMAGE = {"type": "image", "source": {"type": "url", "value": "https://example.com/a.png"}}
PAUSED_NOBODY = [{"interruptId": "pause:nobody", "status": "resolved"}]


def _said(role: str, content: Any) -> dict[str, Any]:
    return {"messages": [{"id": "m", "role": role, "content": content}]}


@pytest.mark.parametrize(
    ("path", "change", "status", "says"),
    [
        ("/ag-ui/no_such_protocol", {}, 404, "unknown protocol"),
        (TP, _said("assistant", "Hi"), 422, "no user message"),
        (TP, _said("user", [IMAGE]), 422, "'text'"),
        (TP, {"tools": [{"name": "lookup", "description": "d"}]}, 422, "tools are not supported (lookup)"),
        (TP, {"context": [{"description": "d", "value": "v"}]}, 422, "client context is not supported"),
        (TP, {"state": {"count": 1}}, 409, "/count (the thread has none)"),
        (TP, {"threadId": "a/b"}, 422, "pattern"),
        (TP, {"runId": ".."}, 422, "cannot be addressed"),
        (TP, {"surprise": True}, 422, "Extra inputs"),
        (f"{TP}?projectId=a/b", {}, 422, "pattern"),
        (TP, {"forwardedProps": {"max_steps": 3}}, 400, "settings.max_steps"),
        (TP, _said("user", "  "), 422, "pattern"),
        (TP, _said("user", [{"type": "text", "text": " "}, {"type": "text", "text": "\t"}]), 422, "blank"),
        (TP, {"resume": PAUSED_NOBODY}, 404, "no open interrupt"),
    ],
)
def test_bad_input_is_refused_before_streaming(demo: httpx.Client, path, change, status, says):
    refused = demo.post(path, json={**_input("agui-refused", "agui-refused-thread"), **change})
    assert refused.status_code == status, refused.text
    assert refused.headers["content-type"] == "application/json" and says in refused.text
    assert demo.get("/api/requests/agui-refused").status_code == 404  # nothing was started


def test_the_last_user_message_is_answered_and_a_run_id_names_one_run(demo: httpx.Client):
    # The client sends the whole conversation; the earlier messages are its copy of the thread's.
    history = [
        {"id": "1", "role": "user", "content": "What is in docs?"},
        {"id": "2", "role": "assistant", "content": "", "toolCalls": [
            {"id": "c1", "type": "function", "function": {"name": "list_files", "arguments": "{}"}}]},
        {"id": "3", "role": "tool", "toolCallId": "c1", "content": [{"text": "roadmap.md"}]},
        {"id": "4", "role": "user", "content": [{"type": "text", "text": "Summarise"}, {"text": "it"}]},
    ]  # fmt: skip
    body = {**_input("agui-once", "agui-once-thread"), "messages": history}
    first = _run(demo, "triggered_phase", body)
    again = demo.post("/ag-ui/triggered_phase", json=body)

    humans = [m.content for m in first[-2].messages if m.role == "user"]
    assert humans == ["Summarise\nit"]
    assert _finished(first).outcome.type == "success"
    assert again.status_code == 409 and "already exists" in again.json()["message"]
