"""State edits and inputs a checkpoint cannot hold are refused up front (422 naming the value), not a 500 or
a run that ends ``internal``: integers past 64 bits (MessagePack's limit) and removing a message the thread
does not have. The thread is left as it was and goes on taking turns."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from phasegraph.nodes.models import DEMO_WORKSPACE
from phasegraph.nodes.settings import ServerSettings
from phasegraph.server.app import create_app

PROTOCOL = "triggered_phase"
WIDE = 2**64


@pytest.fixture(scope="module")
def client() -> Iterator[TestClient]:
    settings = ServerSettings(checkpointer="memory", workspace=str(DEMO_WORKSPACE))
    with TestClient(create_app(settings)) as test_client:
        yield test_client


def _turn(client: TestClient, thread_id: str, **message: Any) -> Any:
    human = {"type": "human", "content": "Summarise the roadmap", **message}
    body = {"assistant_id": PROTOCOL, "input": {"messages": [human]}}
    return client.post(f"/threads/{thread_id}/runs/wait", json=body)


@pytest.fixture
def thread(client: TestClient) -> str:
    thread_id = client.post("/threads", json={}).json()["thread_id"]
    assert _turn(client, thread_id).status_code == 200
    return thread_id


@pytest.mark.parametrize(
    ("values", "says"),
    [
        ({"cycles_used": WIDE}, "values.cycles_used: 18446744073709551616 is past the 64-bit integers"),
        ({"cycles_used": -(2**63) - 1}, "values.cycles_used: -9223372036854775809 is past the 64-bit"),
        ({"messages": [{"type": "human", "content": "x", "additional_kwargs": {"n": WIDE}}]},
         "values.messages[0].additional_kwargs.n"),
        ({"messages": [{"type": "remove", "id": "nope", "content": ""}]}, "doesn't exist ('nope')"),
    ],
)  # fmt: skip
def test_a_state_edit_a_checkpoint_cannot_hold_is_refused_naming_it(
    client: TestClient, thread: str, values: dict[str, Any], says: str
):
    before = client.get(f"/threads/{thread}/state").json()
    answer = client.post(f"/threads/{thread}/state", json={"values": values})
    assert answer.status_code == 422, answer.text
    assert says in answer.text
    after = client.get(f"/threads/{thread}/state").json()
    assert after["checkpoint"] == before["checkpoint"]  # nothing saved
    assert _turn(client, thread).status_code == 200


def test_an_input_message_a_checkpoint_cannot_hold_is_refused_before_the_run(client: TestClient, thread: str):
    answer = _turn(client, thread, additional_kwargs={"n": 2**70})
    assert answer.status_code == 422, answer.text
    assert "input.messages[0].additional_kwargs.n" in answer.text
    assert [r["status"] for r in client.get(f"/threads/{thread}/runs").json()] == ["success"]  # none started
