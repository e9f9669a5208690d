"""State edits and inputs a checkpoint cannot hold are refused up front (422 naming the value), not a 500 or
a run that ends ``internal``: integers past 64 bits (MessagePack's limit) and removing a message the thread
does not have; and state edits the protocol's nodes could not read, checked in full (a field keeping a model
as JSON is built as that model) and against what ties the fields together (agent_network's agent in control
is an agent of its network). The thread is left as it was and goes on taking turns.

Only the LangGraph API's ``POST /threads/{id}/state`` takes state values: the native checkpoint routes read
checkpoints and fork from them, with no values to edit.
"""

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


def _turn(client: TestClient, thread_id: str, protocol: str = PROTOCOL, **message: Any) -> Any:
    human = {"type": "human", "content": "Summarise the roadmap", **message}
    body = {"assistant_id": protocol, "input": {"messages": [human]}}
    return client.post(f"/threads/{thread_id}/runs/wait", json=body)


def _thread_of(client: TestClient, protocol: str) -> str:
    """A thread of ``protocol`` that took one turn (on the demo model)."""
    thread_id = client.post("/threads", json={}).json()["thread_id"]
    answer = _turn(client, thread_id, protocol)
    assert answer.status_code == 200 and "__error__" not in answer.json(), answer.text
    return thread_id


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


#: Values the next node cannot read, as the node a continued run would read them after (``as_node``).
UNREADABLE = [
    ("agent_network", {"current_agent": "ghost"}, "route_to_agent",
     "values.current_agent: network 'research' has no agent 'ghost' to be in control "
     "(agents: triage, researcher, writer)"),
    ("agent_network", {"decision": {"action": "USE_TOOL", "action_reasoning": "r",
                                    "action_details": {"tool": "delete_everything"}}}, "run_agent_step",
     "values.decision: writer has no tool 'delete_everything'"),
    ("agent_network", {"execution_log": [{"type": "tool", "step": 1}]}, "route_to_agent",
     "values.execution_log[0].tool.epoch: Field required"),
    ("xml_contract", {"proposal": {"blocks": 5}}, "propose_action",
     "values.proposal.blocks: Input should be a valid array"),
    ("goal_pursuit", {"decision": {"x": 1}}, "decide_action",
     "values.decision.situation_analysis: Field required"),
    ("goal_pursuit", {"approved": {"kind": "operation_plan", "params": {}}}, "analyze_refinement",
     "values.approved.operation_plan.tool: Field required"),
]  # fmt: skip


@pytest.mark.parametrize(("protocol", "values", "as_node", "says"), UNREADABLE)
def test_a_state_edit_the_next_node_cannot_read_is_refused_naming_the_field(
    client: TestClient, protocol: str, values: dict[str, Any], as_node: str, says: str
):
    thread_id = _thread_of(client, protocol)
    before = client.get(f"/threads/{thread_id}/state").json()
    answer = client.post(f"/threads/{thread_id}/state", json={"values": values, "as_node": as_node})
    assert answer.status_code == 422, answer.text
    assert answer.json()["error"] == "invalid_input" and says in answer.json()["message"]
    after = client.get(f"/threads/{thread_id}/state").json()
    assert (after["checkpoint"], after["values"], after["next"]) == (
        before["checkpoint"], before["values"], before["next"],
    )  # fmt: skip
    again = _turn(client, thread_id, protocol)
    assert again.status_code == 200 and "__error__" not in again.json(), again.text


#: A readable edit of the same fields, and what the thread then holds (defaults filled in, as nodes read it).
READABLE = [
    ("agent_network", {"current_agent": "researcher"}, {"current_agent": "researcher"}),
    ("goal_pursuit",
     {"decision": {"situation_analysis": "done", "decision_type": "finalize",
                   "finalization": {"response": "All done."}}},
     {"decision": {"situation_analysis": "done", "decision_type": "finalize", "execution": None,
                   "finalization": {"response": "All done.", "status": "success"},
                   "context_verification": ""}}),
    ("xml_contract",
     {"proposal": {"text": "Final Answer: done", "final_answer": "done"}},
     {"proposal": {"text": "Final Answer: done", "blocks": [], "final_answer": "done", "problems": [],
                   "dropped_result": False, "model_ms": 0, "system": ""}}),
]  # fmt: skip


@pytest.mark.parametrize(("protocol", "values", "saved"), READABLE)
def test_a_readable_state_edit_is_saved_as_its_nodes_read_it(
    client: TestClient, protocol: str, values: dict[str, Any], saved: dict[str, Any]
):
    thread_id = _thread_of(client, protocol)
    answer = client.post(f"/threads/{thread_id}/state", json={"values": values})
    assert answer.status_code == 200, answer.text
    state = client.get(f"/threads/{thread_id}/state").json()
    assert state["checkpoint"]["checkpoint_id"] == answer.json()["checkpoint_id"]
    assert {key: state["values"][key] for key in saved} == saved
    again = _turn(client, thread_id, protocol)
    assert again.status_code == 200 and "__error__" not in again.json(), again.text


def test_a_run_goes_on_from_an_edited_proposal(client: TestClient):
    thread_id = _thread_of(client, "xml_contract")
    edit = {"values": {"proposal": {"text": "Final Answer: edited", "final_answer": "edited"}},
            "as_node": "propose_action"}  # fmt: skip
    assert client.post(f"/threads/{thread_id}/state", json=edit).status_code == 200
    assert client.get(f"/threads/{thread_id}/state").json()["next"] == ["finish_turn"]
    went_on = client.post(f"/threads/{thread_id}/runs/wait", json={"assistant_id": "xml_contract"})
    assert went_on.status_code == 200 and went_on.json()["answer"] == "edited", went_on.text


def test_an_agent_network_edit_keeps_the_agent_in_control_one_of_its_network(client: TestClient):
    thread_id = _thread_of(client, "agent_network")
    network = client.get(f"/threads/{thread_id}/state").json()["values"]["network"]
    network["agents"]["researcher"]["routes"] = ["writer", "ghost"]
    answer = client.post(f"/threads/{thread_id}/state", json={"values": {"network": network}})
    assert answer.status_code == 422, answer.text
    assert "values.network.agents.researcher.routes: 'ghost' is not an agent of the network" in answer.text
    del network["agents"]["writer"]  # the agent in control (the one that answered)
    for agent in network["agents"].values():
        agent["routes"] = [route for route in agent["routes"] if route in network["agents"]]
    answer = client.post(f"/threads/{thread_id}/state", json={"values": {"network": network}})
    assert answer.status_code == 422, answer.text
    assert "values.network: network 'research' has no agent 'writer' to be in control" in answer.text
    both = {"network": network, "current_agent": "researcher"}  # the agent in control changes with it
    assert client.post(f"/threads/{thread_id}/state", json={"values": both}).status_code == 200

    fresh = client.post("/threads", json={"metadata": {"graph_id": "agent_network"}}).json()["thread_id"]
    answer = client.post(f"/threads/{fresh}/state", json={"values": {"current_agent": "triage"}})
    assert answer.status_code == 422, answer.text
    assert "values.current_agent: the thread has no network yet" in answer.text
    assert client.post(f"/threads/{fresh}/state", json={"values": {"current_agent": ""}}).status_code == 200
