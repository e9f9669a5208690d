"""What one request may cost is bounded: the messages it carries, and the checkpoints a history page loads."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from phasegraph.nodes.models import DEMO_WORKSPACE
from phasegraph.nodes.settings import ServerSettings
from phasegraph.server.app import create_app
from phasegraph.server.storage.checkpoints import thread_config
from phasegraph.server.storage.history import walk

#: The message count this module's server accepts (PHASEGRAPH_MAX_INPUT_MESSAGES).
LIMIT = 3
RUNS = 4  # runs on the long thread: each saves about fifteen checkpoints


def _user(count: int) -> list[dict[str, str]]:
    return [{"role": "user", "content": f"Summarise the roadmap ({i})"} for i in range(count)]


def _ag_ui(count: int, run_id: str) -> dict[str, Any]:
    messages = [{"id": f"m{i}", "role": "user", "content": "Summarise the roadmap"} for i in range(count)]
    return {"threadId": f"t-{run_id}", "runId": run_id, "messages": messages}


class Loads:
    """Counts the checkpoints the server's saver hands out (every history read goes through ``alist``)."""

    def __init__(self, saver: Any) -> None:
        self.count, listed = 0, saver.alist

        async def counted(*args: Any, **kwargs: Any) -> AsyncIterator[Any]:
            async for item in listed(*args, **kwargs):
                self.count += 1
                yield item

        saver.alist = counted


@pytest.fixture(scope="module")
def client() -> Iterator[TestClient]:
    settings = ServerSettings(checkpointer="memory", workspace=str(DEMO_WORKSPACE), max_input_messages=LIMIT)
    with TestClient(create_app(settings)) as test_client:
        yield test_client


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/threads/bounded/runs", lambda n: {"assistant_id": "unified", "input": {"messages": _user(n)}}),
        (
            "/threads/bounded/runs/wait",
            lambda n: {"assistant_id": "unified", "input": {"messages": _user(n)}},
        ),
        (
            "/threads/bounded/runs/stream",
            lambda n: {"assistant_id": "unified", "input": {"messages": _user(n)}},
        ),
        ("/runs/wait", lambda n: {"assistant_id": "unified", "input": {"messages": _user(n)}}),
        ("/runs/stream", lambda n: {"assistant_id": "unified", "input": {"messages": _user(n)}}),
        ("/ag-ui/unified", lambda n: _ag_ui(n, f"run-{n}")),
    ],
)
def test_a_request_over_the_message_limit_is_refused_naming_it(client: TestClient, path: str, body: Any):
    if path.startswith("/threads/"):
        client.post("/threads", json={"thread_id": "bounded", "if_exists": "do_nothing"})
    refused = client.post(path, json=body(LIMIT + 1))
    assert refused.status_code == 413, refused.text
    error = refused.json()
    assert error["error"] == "too_large"
    assert f"carries {LIMIT + 1} messages" in error["message"] and f"at most {LIMIT}" in error["message"]
    assert "PHASEGRAPH_MAX_INPUT_MESSAGES" in error["message"]
    # The schema says so too: the limit as maxItems, the refusal as a documented 413.
    schema = client.get("/openapi.json").json()
    template = path.replace("/threads/bounded", "/threads/{thread_id}")  # /ag-ui/unified: its own path
    assert "413" in schema["paths"][template]["post"]["responses"]
    bodies = schema["components"]["schemas"]
    assert bodies["AgUiInput"]["properties"]["messages"]["maxItems"] == LIMIT
    for name in ("RunBody", "ThreadRunBody"):
        run_input = bodies[name]["properties"]["input"]["anyOf"][0]
        assert run_input["properties"]["messages"]["maxItems"] == LIMIT


def test_a_request_at_the_message_limit_runs(client: TestClient):
    answer = client.post("/runs/wait", json={"assistant_id": "unified", "input": {"messages": _user(LIMIT)}})
    assert answer.status_code == 200 and len(answer.json()["messages"]) > LIMIT
    with client.stream("POST", "/ag-ui/unified", json=_ag_ui(LIMIT, "at-limit")) as streamed:
        assert streamed.status_code == 200
        assert "RUN_FINISHED" in "".join(streamed.iter_text())


@pytest.fixture(scope="module")
def long_thread(client: TestClient) -> int:
    """A thread of several runs; returns how many checkpoints it has."""
    client.post("/threads", json={"thread_id": "long"})
    for _ in range(RUNS):
        ran = client.post(
            "/threads/long/runs/wait", json={"assistant_id": "unified", "input": {"messages": _user(1)}}
        )
        assert ran.status_code == 200
    whole = client.post("/threads/long/history", json={"limit": 1000}).json()
    assert len(whole) > 4 * 10
    return len(whole)


def test_a_history_page_loads_only_its_own_checkpoints(client: TestClient, long_thread: int):
    loads = Loads(client.app.state.manager.checkpointer)  # type: ignore[attr-defined]
    default = client.post("/threads/long/history", json={})
    assert default.status_code == 200 and len(default.json()) == 10  # the default page
    assert loads.count == 10  # not the thread's ~60

    fifteen = client.post("/threads/long/history", json={"limit": 15}).json()
    loads.count = 0
    before = default.json()[-1]["checkpoint_id"]
    older = client.post("/threads/long/history", json={"limit": 5, "before": before}).json()
    assert [s["checkpoint_id"] for s in older] == [s["checkpoint_id"] for s in fifteen[10:]]
    assert loads.count == 5

    loads.count = 0  # a metadata filter the saver can apply: only the matches are loaded
    inputs = client.post("/threads/long/history", json={"metadata": {"source": "input"}}).json()
    assert len(inputs) == RUNS and {s["metadata"]["source"] for s in inputs} == {"input"}  # one per run
    assert loads.count == RUNS

    too_many = client.post("/threads/long/history", json={"limit": 1001})
    assert too_many.status_code == 422  # the page has a maximum


def test_a_walk_that_stops_early_loads_one_page(client: TestClient, long_thread: int):
    manager = client.app.state.manager  # type: ignore[attr-defined]
    graph, loads = manager.protocol("unified").graph, Loads(manager.checkpointer)

    async def first_three() -> list[Any]:
        taken = []
        async for snapshot in walk(graph, thread_config("default/long"), page=7):
            taken.append(snapshot)
            if len(taken) == 3:
                break
        return taken

    assert len(asyncio.run(first_three())) == 3
    assert loads.count == 7  # the page it stopped in, not the thread (resume by phase walks this way)
