"""One running request per thread, decided by the database, whichever route or worker writes first.

Starting a turn, resuming a request and answering an approval each looked whether the thread was idle and
then wrote, so two sent at the same moment both passed the look: an approval answered twice ran its tool
twice, and two turns on one thread ran side by side (one of them ending on a branch the thread no longer
shows). The store's unique index over running requests lets exactly one of them in; the other is refused
with 409 (or, with the LangGraph API's ``enqueue``, waits and then finds its question already answered).

Each case sends its two requests together (a barrier releases both threads at once) and repeats over
fresh threads: before the index, the approval was run twice in about half the rounds and both turns were
accepted in every round. The approval's tool appends a line to a file, so a second run shows.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from phasegraph.nodes.models import DEMO_WORKSPACE
from tests.server.conftest import Server, slow_script, stream, unique
from tests.tool_projects import write_project, write_script

ROOT = Path(__file__).resolve().parents[2]
PROTOCOL = "unified"
#: Rounds per case: an approval race was lost in about half the rounds before the fix.
ROUNDS = 6


class Setup:
    """The module's server: its model calls ``append_line`` (confirm = true) on ``ledger``; ``slow`` may be
    picked per request (two tools, then an answer, paced)."""

    def __init__(self, folder: Path) -> None:
        self.ledger = folder / "ledger.txt"
        self.ledger.touch()
        script = write_script(
            folder,
            [
                {
                    "content": "Recording.",
                    "tool_calls": [{"name": "append_line", "args": {"path": str(self.ledger)}}],
                },
                {"content": "Done."},
            ],
        )
        project = write_project(
            folder,
            {
                "python_tools": {"append_line": "tests.user_tools:append_line"},
                "tools": {"append_line": {"confirm": True}},
            },
        )
        self.slow = slow_script(folder, delay_ms=60)
        record = {
            "content": "Recording.",
            "tool_calls": [{"name": "append_line", "args": {"path": str(self.ledger)}}],
        }
        # paced: the run the first answer starts asks its second question only once its chunks (words,
        # argument pieces) streamed, so the second answer, sent with it, reads the first question however
        # loaded the machine is (unpaced, a loaded machine let it arrive after the second question was
        # asked, and it answered that one)
        twice = write_script(
            folder, [record, record, {"content": "Done."}], name="twice.json", chunk_delay_ms=40
        )
        self.twice = f"scripted:{twice}"
        env = {
            "PHASEGRAPH_CHECKPOINTER": f"sqlite:{folder / 'state.db'}",
            "PHASEGRAPH_WORKSPACE": str(DEMO_WORKSPACE),
            "PHASEGRAPH_MODEL": f"scripted:{script}",
            "PHASEGRAPH_ALLOWED_MODELS": f"{self.slow},{self.twice}",
            "PHASEGRAPH_CONFIG": str(project),
            "PYTHONPATH": str(ROOT),  # the server imports tests.user_tools
        }
        self.server = Server(env=env, log=folder / "server.log", cwd=ROOT)

    def lines(self) -> int:
        return len(self.ledger.read_text(encoding="utf-8").splitlines())


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Setup]:
    made = Setup(tmp_path_factory.mktemp("one-run-per-thread"))
    made.server.start()
    try:
        yield made
    finally:
        made.server.stop()


def at_once(*calls: Callable[[], int]) -> list[int]:
    """Run ``calls`` on threads of their own, released together; their status codes, sorted."""
    barrier = threading.Barrier(len(calls))

    def go(call: Callable[[], int]) -> int:
        barrier.wait()
        return call()

    with ThreadPoolExecutor(len(calls)) as pool:
        return sorted(future.result() for future in [pool.submit(go, call) for call in calls])


def _streamed(server: Server, path: str, body: dict) -> int:
    """POST to an SSE route, read it to its end; the status code."""
    with (
        httpx.Client(base_url=server.url, timeout=60) as client,
        client.stream("POST", path, json=body) as answer,
    ):
        answer.read()
        return answer.status_code


def _posted(server: Server, path: str, body: dict) -> int:
    with httpx.Client(base_url=server.url, timeout=60) as client:
        return client.post(path, json=body).status_code


def asked(setup: Setup, **more: str) -> tuple[str, str]:
    """A new thread whose first turn waits for the approval of ``append_line``: (thread id, request id)."""
    thread_id, request_id = unique("t"), unique("r")
    with httpx.Client(base_url=setup.server.url) as client:
        body = {"message": "Record it.", "threadId": thread_id, "requestId": request_id, **more}
        events = stream(client, "POST", f"/api/runs/{PROTOCOL}/stream", json=body)
    assert [e.type for e in events][-2:] == ["approval_requested", "paused"], events[-3:]
    return thread_id, request_id


def native_answer(setup: Setup, request_id: str) -> Callable[[], int]:
    return lambda: _streamed(setup.server, f"/api/requests/{request_id}/resume", {"answer": "approve"})


def api_answer(setup: Setup, thread_id: str, **more: object) -> Callable[[], int]:
    body = {"assistant_id": PROTOCOL, "command": {"resume": "approve"}, **more}
    return lambda: _posted(setup.server, f"/threads/{thread_id}/runs/wait", body)


ANSWERS = {
    "api+api": lambda setup, thread, request: (api_answer(setup, thread), api_answer(setup, thread)),
    "native+api": lambda setup, thread, request: (native_answer(setup, request), api_answer(setup, thread)),
    "native+native": lambda setup, thread, request: (
        native_answer(setup, request),
        native_answer(setup, request),
    ),
}


@pytest.mark.parametrize("answers", list(ANSWERS))
def test_an_approval_answered_twice_at_once_runs_its_call_once(setup: Setup, answers: str):
    for round_ in range(ROUNDS):
        thread_id, request_id = asked(setup)
        before = setup.lines()
        statuses = at_once(*ANSWERS[answers](setup, thread_id, request_id))
        ran = setup.lines() - before
        assert (ran, statuses) == (1, [200, 409]), (
            f"round {round_}: the call ran {ran} times; answers {statuses}"
        )


def test_an_answer_sent_twice_does_not_answer_the_question_asked_after_it(setup: Setup):
    """The run the first answer started asks again (a second call); the second answer, queued behind it, was
    sent for the first question and is refused instead of approving the new one."""
    for round_ in range(ROUNDS):
        thread_id, _ = asked(setup, model=setup.twice)
        before = setup.lines()
        answer = api_answer(setup, thread_id, context={"model": setup.twice}, multitask_strategy="enqueue")
        statuses = at_once(answer, answer)
        ran = setup.lines() - before
        assert (ran, statuses) == (1, [200, 409]), (
            f"round {round_}: the call ran {ran} times; answers {statuses}"
        )
        with httpx.Client(base_url=setup.server.url) as client:
            state = client.get(f"/threads/{thread_id}/state").json()
        assert [i["value"]["call"]["name"] for i in state["interrupts"]] == [
            "append_line"
        ]  # the second question


def native_turn(setup: Setup, thread_id: str) -> Callable[[], int]:
    body = {"message": "Summarise the roadmap", "threadId": thread_id, "model": setup.slow}
    return lambda: _streamed(setup.server, f"/api/runs/{PROTOCOL}/stream", body)


def api_turn(setup: Setup, thread_id: str, strategy: str) -> Callable[[], int]:
    body = {
        "assistant_id": PROTOCOL,
        "input": {"messages": [{"type": "human", "content": f"Summarise the roadmap ({strategy})"}]},
        "context": {"model": setup.slow},
        "multitask_strategy": strategy,
    }
    return lambda: _posted(setup.server, f"/threads/{thread_id}/runs/wait", body)


def _new_thread(setup: Setup) -> str:
    with httpx.Client(base_url=setup.server.url) as client:
        return client.post("/threads", json={}).json()["thread_id"]


@pytest.mark.parametrize("route", ["native", "api"])
def test_two_turns_sent_at_once_on_one_thread_are_one_run_and_one_refusal(setup: Setup, route: str):
    for round_ in range(3):
        if route == "native":
            thread_id = unique("t")
            statuses = at_once(native_turn(setup, thread_id), native_turn(setup, thread_id))
        else:
            thread_id = _new_thread(setup)
            statuses = at_once(api_turn(setup, thread_id, "reject"), api_turn(setup, thread_id, "reject"))
        assert statuses == [200, 409], f"round {round_}: {statuses}"


def test_two_enqueued_turns_sent_at_once_both_run_one_after_the_other(setup: Setup):
    for round_ in range(3):
        thread_id = _new_thread(setup)
        statuses = at_once(api_turn(setup, thread_id, "enqueue"), api_turn(setup, thread_id, "enqueue"))
        assert statuses == [200, 200], f"round {round_}: {statuses}"
        with httpx.Client(base_url=setup.server.url) as client:
            messages = client.get(f"/threads/{thread_id}/state").json()["values"]["messages"]
        humans = [m for m in messages if m["type"] == "human"]
        assert len(humans) == 2, f"round {round_}: the thread shows {len(humans)} of the two turns"


def _send(setup: Setup, route: str, thread_id: str, message: str) -> httpx.Response:
    """A new turn with ``message`` on the thread, natively or through the LangGraph API."""
    with httpx.Client(base_url=setup.server.url, timeout=60) as client:
        if route == "native":
            return client.post(
                f"/api/runs/{PROTOCOL}/stream", json={"message": message, "threadId": thread_id}
            )
        body = {"assistant_id": PROTOCOL, "input": {"messages": [{"type": "human", "content": message}]}}
        return client.post(f"/threads/{thread_id}/runs/wait", json=body)


@pytest.mark.parametrize("message", ["Approve", "What would it record?"])
@pytest.mark.parametrize("route", ["native", "api"])
def test_a_new_message_on_a_thread_waiting_for_an_approval_is_refused_never_read_as_the_answer(
    setup: Setup, route: str, message: str
):
    thread_id, request_id = asked(setup)
    before = setup.lines()
    refused = _send(setup, route, thread_id, message)
    assert refused.status_code == 409, refused.text
    assert "waits for an approval of its call 'append_line'" in refused.text
    with httpx.Client(base_url=setup.server.url, timeout=60) as client:
        state = client.get(f"/threads/{thread_id}/state").json()
        assert [i["value"]["call"]["name"] for i in state["interrupts"]] == ["append_line"]  # still asked
        assert [m["content"] for m in state["values"]["messages"] if m["type"] == "human"] == ["Record it."]
        assert setup.lines() == before  # nothing ran
        answered = stream(client, "POST", f"/api/requests/{request_id}/resume", json={"answer": "approve"})
    assert answered[-1].type == "final" and setup.lines() == before + 1


def test_an_answer_a_checkpoint_cannot_hold_is_refused_and_the_request_still_waits(setup: Setup):
    _, request_id = asked(setup)
    with httpx.Client(base_url=setup.server.url, timeout=60) as client:
        wide = {"answer": {"decision": "edit", "args": {"path": 2**70}}}
        refused = client.post(f"/api/requests/{request_id}/resume", json=wide)
        assert refused.status_code == 422 and "answer.args.path" in refused.text, refused.text
        assert client.get(f"/api/requests/{request_id}").json()["status"] == "paused"
        answered = stream(client, "POST", f"/api/requests/{request_id}/resume", json={"answer": "approve"})
    assert answered[-1].type == "final"


@pytest.mark.parametrize("route", ["api", "native"])
def test_a_paused_request_whose_thread_went_on_in_a_later_request_is_superseded(setup: Setup, route: str):
    """The LangGraph API answered the approval a native request waits on (a new run); or a new native turn
    went on from a request paused mid-run. The earlier request stops offering a resume that can only fail."""
    if route == "api":
        thread_id, request_id = asked(setup)
        assert api_answer(setup, thread_id)() == 200
    else:
        thread_id, request_id = unique("t"), unique("r")
        with httpx.Client(base_url=setup.server.url, timeout=60) as client:
            body = {
                "message": "Summarise",
                "threadId": thread_id,
                "requestId": request_id,
                "model": setup.slow,
            }
            first = stream(client, "POST", f"/api/runs/{PROTOCOL}/stream", json=body, on_event=_pause(client))
            assert first[-1].type == "paused"
        assert native_turn(setup, thread_id)() == 200
    with httpx.Client(base_url=setup.server.url, timeout=60) as client:
        assert client.get(f"/api/requests/{request_id}").json()["status"] == "superseded"
        refused = client.post(
            f"/api/requests/{request_id}/resume", json={"answer": "approve"} if route == "api" else {}
        )
        assert refused.status_code == 409 and "was superseded" in refused.text, refused.text
        runs = client.get(f"/threads/{thread_id}/runs").json()
        assert {run["run_id"]: run["status"] for run in runs}[request_id] == "interrupted"


def _pause(client: httpx.Client) -> Callable[[object], None]:
    def on_event(event: object) -> None:
        if getattr(event, "type", None) == "tool_call":
            client.post(f"/api/requests/{event.request_id}/pause")  # type: ignore[attr-defined]

    return on_event
