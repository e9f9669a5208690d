"""Many clients starting one ``requestId`` at once: one run starts, every other start is a 409, not a 500."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from functools import partial
from typing import Any

import httpx
import pytest

from tests.server.conftest import Server, allowing_scripts, needs_postgres, scripts, unique

#: Starts sent at once with the same requestId.
CONCURRENT = 12

Answer = tuple[int, str, bytes]  # status, content type, body (empty for a started stream)


def _all_at_once(actions: list[Callable[[], Any]]) -> list[Any]:
    """Run each action on a thread of its own, all released at the same moment; their results."""
    answers: list[Any] = []
    lock = threading.Lock()
    go = threading.Barrier(len(actions))

    def run(action: Callable[[], Any]) -> None:
        go.wait(30)  # a hang guard only: every thread is released at the same moment
        answer = action()
        with lock:
            answers.append(answer)

    threads = [threading.Thread(target=run, args=(action,)) for action in actions]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(90)
    assert len(answers) == len(actions)
    return answers


def _start_all_at_once(started: list[Server], project: str, request_id: str, model: str) -> list[Answer]:
    """POST the same start ``CONCURRENT`` times (spread over the replicas), released together."""
    body = {
        "message": "Summarise docs/roadmap.md",
        "requestId": request_id,
        "projectId": project,
        "model": model,
    }

    def start(server: Server) -> Answer:
        with (
            httpx.Client(base_url=server.url, timeout=60) as client,
            client.stream("POST", "/api/chat/messages", json=body) as response,
        ):
            # A started run streams until it ends; its status line is all this test needs.
            content = b"" if response.status_code == 200 else response.read()
            return response.status_code, response.headers.get("content-type", ""), content

    return _all_at_once([partial(start, started[i % len(started)]) for i in range(CONCURRENT)])


def _assert_one_start_and_documented_conflicts(
    server: Server, answers: list[Answer], request_id: str
) -> None:
    statuses = sorted(status for status, _, _ in answers)
    assert statuses == [200] + [409] * (CONCURRENT - 1), answers
    documented = httpx.get(f"{server.url}/openapi.json").json()["paths"]["/api/chat/messages"]["post"]
    schema = documented["responses"]["409"]["content"]["application/json"]["schema"]
    assert schema == {"$ref": "#/components/schemas/ErrorBody"}
    for status, content_type, content in answers:
        if status == 409:
            assert content_type.startswith("application/json")
            error = httpx.Response(409, content=content).json()
            assert set(error) == {"error", "message"}
            assert error["error"] == "conflict" and f"'{request_id}' already exists" in error["message"], (
                error
            )


def test_concurrent_starts_of_one_request_id_start_one_run_on_sqlite(shared_servers, tmp_path_factory):
    server, slow = shared_servers(**allowing_scripts(tmp_path_factory)), scripts(tmp_path_factory)["slow"]
    request_id = unique("req-race")
    answers = _start_all_at_once([server], "default", request_id, slow)
    _assert_one_start_and_documented_conflicts(server, answers, request_id)


@needs_postgres
@pytest.mark.parametrize("replicas", [1, 2])
def test_concurrent_starts_of_one_request_id_start_one_run_on_postgres(
    servers, shared_servers, tmp_path_factory, replicas: int
):
    env = allowing_scripts(
        tmp_path_factory, PHASEGRAPH_CHECKPOINTER=os.environ["PHASEGRAPH_TEST_POSTGRES_URL"]
    )
    # the session's server on Postgres, and a replica of its own for each other one
    started = [shared_servers(**env), *(servers(**env) for _ in range(replicas - 1))]
    # Every Postgres test shares the database: a project of its own keeps this test's ids apart.
    answers = _start_all_at_once(started, unique("race"), "req-race", scripts(tmp_path_factory)["slow"])
    _assert_one_start_and_documented_conflicts(started[0], answers, "req-race")


def _create_all_at_once(server: Server, body: dict[str, str]) -> list[httpx.Response]:
    """POST /threads ``CONCURRENT`` times with one body, released together."""
    return _all_at_once([partial(httpx.post, f"{server.url}/threads", json=body, timeout=60)] * CONCURRENT)


def test_concurrent_creates_of_one_thread_id_make_one_thread(shared_servers):
    server = shared_servers()
    raised = _create_all_at_once(server, {"thread_id": unique("t-race"), "if_exists": "raise"})
    assert sorted(a.status_code for a in raised) == [200] + [409] * (CONCURRENT - 1), [a.text for a in raised]
    assert all(a.json()["error"] == "conflict" for a in raised if a.status_code == 409)
    # With do_nothing every one of them gets the one thread that exists.
    kept = _create_all_at_once(server, {"thread_id": unique("t-race-2"), "if_exists": "do_nothing"})
    assert [a.status_code for a in kept] == [200] * CONCURRENT, [a.text for a in kept]
    assert len({a.json()["created_at"] for a in kept}) == 1
