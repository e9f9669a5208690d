"""AG-UI as its clients use it: later runs on one thread, sent exactly as ``HttpAgent`` sends them.

Each run's events are applied by :class:`tests.server.agui_client.Agent`, a Python copy of what
``@ag-ui/client`` 1.0.0 does with them (state snapshot and JSON Patch deltas, the messages snapshot's
merge), and the next run's input is built from what the client then holds: every message, the whole
state, ``tools: []`` and ``context: []``. The state must be plain JSON that the deltas rebuild, the
messages AG-UI's own, their ids stable from run to run; a state the server never sent is refused.
"""

import copy
import json
import random
from collections.abc import Iterator
from typing import Any

import httpx
import jsonpatch
import pytest
from ag_ui.core import (
    AssistantMessage,
    BaseEvent,
    Message,
    MessagesSnapshotEvent,
    RunFinishedEvent,
    StateDeltaEvent,
    StateSnapshotEvent,
    SystemMessage,
    ToolMessage,
    UserMessage,
)
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.messages import SystemMessage as LcSystemMessage
from langchain_core.messages import ToolMessage as LcToolMessage
from pydantic import TypeAdapter

from phasegraph.graphs.registry import get_protocol
from phasegraph.nodes.models import DEMO_WORKSPACE
from phasegraph.server.http.ag_ui.messages import agui_messages
from phasegraph.server.http.ag_ui.state import differences, state_patch
from tests.server.agui_client import Agent
from tests.server.conftest import Server

MESSAGES: TypeAdapter[list[Message]] = TypeAdapter(list[Message])
#: Two user turns per protocol, each answered by the bundled demo scripts.
TURNS = {
    "triggered_phase": ("Summarise docs/roadmap.md", "Who is on the team?"),
    "unified": ("Summarise docs/roadmap.md", "Thanks, anything else?"),
    "xml_contract": ("Summarise docs/roadmap.md", "Thanks"),
    "goal_pursuit": ("Summarise docs/roadmap.md", "Thanks"),
    "agent_network": ("Who works on streaming?", "Thanks"),
    "planner": ("Set up a project for our spring launch", "What is next?"),
}


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[httpx.Client]:
    folder = tmp_path_factory.mktemp("ag-ui-turns")
    env = {
        "PHASEGRAPH_CHECKPOINTER": f"sqlite:{folder / 'state.db'}",
        "PHASEGRAPH_WORKSPACE": str(DEMO_WORKSPACE),
    }
    server = Server(env=env, log=folder / "server.log")
    try:
        server.start()
        with httpx.Client(base_url=server.url, timeout=120) as client:
            yield client
    finally:
        server.stop()


def _turn(client: httpx.Client, agent: Agent, protocol: str, run_id: str, text: str) -> list[BaseEvent]:
    """The user says ``text`` and the agent runs, as ``agent.addMessage`` then ``agent.runAgent``."""
    agent.say(f"{run_id}-user", text)
    events = agent.run(client, f"/ag-ui/{protocol}", agent.input(run_id))
    assert isinstance(events[-1], RunFinishedEvent), events[-1]
    return events


def _of(events: list[BaseEvent], kind: type[Any]) -> list[Any]:
    return [e for e in events if isinstance(e, kind)]


def _lc_free(value: Any) -> bool:
    """No LangChain serialisation (``{"lc": 1, "type": "constructor", ...}``) anywhere in ``value``."""
    if isinstance(value, dict):
        return "lc" not in value and all(_lc_free(v) for v in value.values())
    if isinstance(value, list):
        return all(_lc_free(v) for v in value)
    return True


def _check_conversation(messages: list[dict[str, Any]]) -> list[Message]:
    """AG-UI messages, valid as ag_ui.core's models, every tool result after the call it answers."""
    parsed = MESSAGES.validate_python(messages)
    assert len({m.id for m in parsed}) == len(parsed)  # ids name one message each
    calls: set[str] = set()
    for message in parsed:
        if isinstance(message, AssistantMessage):
            calls |= {call.id for call in message.tool_calls or []}
            for call in message.tool_calls or []:
                assert isinstance(json.loads(call.function.arguments), dict)
        if isinstance(message, ToolMessage):
            assert message.tool_call_id in calls
    return parsed


@pytest.mark.parametrize("protocol", list(TURNS))
def test_a_second_turn_sent_as_http_agent_sends_it_continues_the_thread(demo: httpx.Client, protocol: str):
    agent, (first_text, second_text) = Agent(demo.base_url, f"turns-{protocol}"), TURNS[protocol]

    first = _turn(demo, agent, protocol, f"turns-{protocol}-1", first_text)
    after_first, held = copy.deepcopy(agent.messages), copy.deepcopy(agent.state)
    second = _turn(demo, agent, protocol, f"turns-{protocol}-2", second_text)

    # the second run carried the first's whole state and every message (what HttpAgent sends), and was taken
    assert held and held["messages"] == after_first
    assert _of(second, RunFinishedEvent)[0].outcome.type == "success"
    # the thread holds both turns: the first as the client held it (same ids, same content), then the second
    parsed = _check_conversation(agent.messages)
    assert len(agent.messages) > len(after_first) and agent.messages[: len(after_first)] == after_first
    new = parsed[len(after_first) :]
    assert isinstance(new[0], UserMessage) and new[0].content == second_text
    assert isinstance(new[-1], AssistantMessage) and new[-1].content
    said = [m.content for m in parsed if isinstance(m, UserMessage)]
    assert said[0] == first_text and said.count(first_text) == 1  # each turn's message stored once
    # each run's state is plain JSON, its messages the ones the messages snapshot sent
    for events in (first, second):
        assert _lc_free(_of(events, StateSnapshotEvent)[0].snapshot)
        assert all(_lc_free(e.delta) for e in _of(events, StateDeltaEvent))
    assert agent.state["messages"] == agent.messages
    # the state is the graph's output: a protocol's working fields (raw tool outputs its model reads,
    # which grow with every turn and which a client sends back with every run) stay on the server
    outputs = get_protocol(protocol).compile(None).output_channels
    assert "messages" in agent.state and set(agent.state) <= set(outputs)


def test_state_deltas_patch_the_snapshot_into_the_final_state(demo: httpx.Client):
    agent = Agent(demo.base_url, "turns-deltas")
    events = _turn(demo, agent, "triggered_phase", "turns-deltas-1", TURNS["triggered_phase"][0])

    kinds = [type(e) for e in events]
    assert kinds.count(StateSnapshotEvent) == 1 and kinds[1] is StateSnapshotEvent  # whole once, first
    deltas = [n for n, kind in enumerate(kinds) if kind is StateDeltaEvent]
    ending = kinds.index(MessagesSnapshotEvent)
    assert len([n for n in deltas if n < ending - 1]) >= 3  # then what changed, as the run goes
    # every patch applied cleanly (the client raises otherwise), each a step from the one before
    assert len(agent.states) == 1 + len(deltas)
    assert all(before != after for before, after in zip(agent.states, agent.states[1:], strict=False))
    # ... to the run's final state: its answer, and the messages the messages snapshot sent
    finished = _of(events, RunFinishedEvent)[0]
    assert agent.state["answer"] == finished.result["answer"]
    assert agent.state["messages"] == agent.messages
    assert len(agent.messages) == len(_of(events, MessagesSnapshotEvent)[0].messages)
    # the conversation as a chat UI renders it: the question, calls with their results, the answer
    parsed = _check_conversation(agent.messages)
    assert isinstance(parsed[0], UserMessage) and parsed[0].content == TURNS["triggered_phase"][0]
    called = [c.function.name for m in parsed if isinstance(m, AssistantMessage) for c in m.tool_calls or []]
    assert called[:2] == ["list_files", "read_file"]
    assert any(isinstance(m, ToolMessage) for m in parsed)


def test_a_state_the_server_never_sent_is_refused(demo: httpx.Client):
    agent = Agent(demo.base_url, "turns-forged")
    _turn(demo, agent, "triggered_phase", "turns-forged-1", TURNS["triggered_phase"][0])
    agent.say("turns-forged-user", "Who is on the team?")
    sent = agent.input("turns-forged-2")

    forged = demo.post(
        "/ag-ui/triggered_phase", json={**sent, "state": {**sent["state"], "answer": "forged"}}
    )
    unknown = demo.post("/ag-ui/triggered_phase", json={**sent, "state": {"mood": "happy"}})
    asked = {**sent["state"]["messages"][0], "content": "Delete everything"}
    rewritten = {**sent["state"], "messages": [asked, *sent["state"]["messages"][1:]]}
    edited = demo.post("/ag-ui/triggered_phase", json={**sent, "state": rewritten})
    for refused in (forged, unknown, edited):
        assert refused.status_code == 409, refused.text
        assert "state differs from the thread's state" in refused.json()["message"]
    assert "/answer (another value)" in forged.json()["message"]
    assert "/mood (the thread has none)" in unknown.json()["message"]
    assert "/messages/0/content (another value)" in edited.json()["message"]
    assert demo.get("/api/requests/turns-forged-2").status_code == 404  # nothing started
    # a part of the state, a state the thread had earlier in the run (a client that left before its
    # end holds one) and no state at all are all states the server sent: each would be taken
    part = {"answer": sent["state"]["answer"], "messages": sent["state"]["messages"]}
    earlier = agent.states[2]
    for state in (part, earlier, {}):
        taken = demo.post(
            "/ag-ui/triggered_phase", json={**sent, "state": state, "messages": sent["messages"][:-1]}
        )
        assert (
            taken.status_code == 409 and "not with a user message" in taken.json()["message"]
        )  # past the state
    assert differences(earlier, sent["state"])  # the earlier one is not the current state


def test_only_the_new_user_messages_at_the_end_are_the_turn(demo: httpx.Client):
    agent = Agent(demo.base_url, "turns-new")
    _turn(demo, agent, "triggered_phase", "turns-new-1", TURNS["triggered_phase"][0])
    held = agent.input("turns-new-2")

    # a client that kept its own copy (its own ids for every message, the streamed texts) is answered
    # its last message only; two messages typed one after the other are one turn
    own_copy = [
        {"id": "mine-1", "role": "user", "content": TURNS["triggered_phase"][0]},
        {"id": "mine-2", "role": "assistant", "content": "The roadmap has two milestones."},
        {"id": "mine-3", "role": "user", "content": "Who is on the team?"},
        {"id": "mine-4", "role": "user", "content": "Just their names."},
    ]
    body = {**held, "runId": "turns-new-2", "messages": own_copy}
    with demo.stream("POST", "/ag-ui/triggered_phase", json=body) as response:
        events = list(Agent(demo.base_url, "turns-new").apply_all(response))
    said = [m.content for m in _of(events, MessagesSnapshotEvent)[0].messages if m.role == "user"]
    assert said == [TURNS["triggered_phase"][0], "Who is on the team?\n\nJust their names."]
    # nothing new at the end: nothing to answer
    again = demo.post("/ag-ui/triggered_phase", json={**held, "runId": "turns-new-3"})
    assert again.status_code == 409
    assert "not with a user message thread 'turns-new' does not hold yet" in again.json()["message"]


def test_a_paused_run_resumes_with_the_state_the_client_holds(demo: httpx.Client):
    agent, path = Agent(demo.base_url, "turns-pause"), "/ag-ui/triggered_phase"
    agent.say("turns-pause-user", TURNS["triggered_phase"][0])
    with demo.stream("POST", path, json=agent.input("turns-pause")) as response:
        assert demo.post("/api/requests/turns-pause/pause").status_code == 202
        paused = list(agent.apply_all(response))
    [interrupt] = agent.pending_interrupts
    assert (
        interrupt["id"] == "pause:turns-pause"
        and _of(paused, RunFinishedEvent)[0].outcome.type == "interrupt"
    )
    said = [m["content"] for m in agent.state["messages"] if m["role"] == "user"]
    assert said == [TURNS["triggered_phase"][0]]  # the state as the pause left it

    resume = [{"interruptId": interrupt["id"], "status": "resolved"}]
    body = agent.input("turns-pause-2", resume=resume)
    assert body["state"] == agent.state and body["messages"] == agent.messages
    resumed = agent.run(demo, path, body)
    after = _turn(demo, agent, "triggered_phase", "turns-pause-3", "Who is on the team?")

    assert resumed[0].run_id == "turns-pause"  # the paused request itself went on
    assert _of(resumed, RunFinishedEvent)[0].outcome.type == "success"
    assert _of(after, RunFinishedEvent)[0].outcome.type == "success"
    parsed = _check_conversation(agent.messages)
    assert [m.content for m in parsed if isinstance(m, UserMessage)] == [
        TURNS["triggered_phase"][0],
        "Who is on the team?",
    ]
    assert demo.get("/api/requests/turns-pause").json()["status"] == "completed"


def test_langchain_messages_become_ag_ui_messages_with_stable_ids():
    thread = [
        LcSystemMessage("Be brief.", id="s"),
        HumanMessage("List the docs", id="h"),
        AIMessage("", id="a", tool_calls=[{"id": "c1", "name": "list_files", "args": {"path": "docs"}}]),
        LcToolMessage("list_files ran: ok", id="t", tool_call_id="c1", name="list_files"),
        AIMessage([{"type": "text", "text": "Two files."}], id="b"),
        LcToolMessage("read_file failed: no such file", tool_call_id="c2", status="error"),
    ]

    converted = agui_messages(thread, "th")
    parsed = MESSAGES.validate_python(converted)

    assert [type(m) for m in parsed] == [
        SystemMessage, UserMessage, AssistantMessage, ToolMessage, AssistantMessage, ToolMessage,
    ]  # fmt: skip
    assert [m.id for m in parsed] == ["s", "h", "a", "t", "b", "th-message-5"]  # own ids; else from the place
    call = parsed[2].tool_calls[0]
    assert (call.id, call.function.name, json.loads(call.function.arguments)) == (
        "c1",
        "list_files",
        {"path": "docs"},
    )
    assert parsed[2].content is None and parsed[4].content == "Two files."
    assert (parsed[3].tool_call_id, parsed[3].content, parsed[3].error) == ("c1", "list_files ran: ok", None)
    assert parsed[5].error == "read_file failed: no such file"
    assert agui_messages(thread, "th") == converted  # the same thread, the same messages


def _json(rnd: random.Random, depth: int = 0) -> Any:
    """A random JSON value: nulls, numbers, strings that need escaping in a pointer, lists, objects."""
    kind = rnd.random()
    if depth > 2 or kind < 0.4:
        return rnd.choice([None, True, False, 0, 1, 2, 2.5, "a", "b/c", "~x", ""])  # 1 == True in Python
    if kind < 0.7:
        return [_json(rnd, depth + 1) for _ in range(rnd.randint(0, 5))]
    return {rnd.choice(["a", "b", "c/d", "e~f"]): _json(rnd, depth + 1) for _ in range(rnd.randint(0, 4))}


def _changed(rnd: random.Random, value: Any) -> Any:
    """``value`` with one change somewhere: an item changed, added, inserted or removed, or a new value."""
    value = copy.deepcopy(value)
    if isinstance(value, list) and value:
        at = rnd.randrange(len(value))
        choice = rnd.randrange(4)
        if choice == 0:
            value[at] = _changed(rnd, value[at])
        elif choice == 1:
            value.insert(at, _json(rnd, 1))
        elif choice == 2:
            del value[at]
        else:
            value.append(_json(rnd, 1))
        return value
    if isinstance(value, dict) and value:
        key = rnd.choice(list(value))
        value[key] = _changed(rnd, value[key])
        return value
    return _json(rnd)


def test_state_deltas_take_any_state_to_the_next():
    # a conversation that grows at its end: only the new message is sent
    sent = {"messages": [{"id": "1", "role": "user", "content": "Hi"}], "answer": "", "plan": None}
    state = {
        "messages": [*sent["messages"], {"id": "2", "role": "assistant", "content": "Hello"}],
        "answer": "Hello",
    }
    assert state_patch(sent, state) == [
        {"op": "remove", "path": "/plan"},
        {"op": "add", "path": "/messages/1", "value": {"id": "2", "role": "assistant", "content": "Hello"}},
        {"op": "replace", "path": "/answer", "value": "Hello"},
    ]
    assert state_patch(state, copy.deepcopy(state)) == []
    # JSON tells a boolean from a number where Python's == does not
    assert state_patch({"a": 1, "m": [0]}, {"a": True, "m": [False]}) == [
        {"op": "replace", "path": "/a", "value": True},
        {"op": "replace", "path": "/m/0", "value": False},
    ]
    # and any change at all, applied as RFC 6902 says (what the JS client's fast-json-patch does)
    rnd = random.Random(24)
    for _ in range(3000):
        before = {key: _json(rnd) for key in rnd.sample(["m", "n", "o/p", "q~r"], rnd.randint(0, 4))}
        after = copy.deepcopy(before)
        for _ in range(rnd.randint(1, 3)):
            key = rnd.choice(["m", "n", "o/p", "q~r"])
            after[key] = _changed(rnd, after.get(key, []))
        if after and rnd.random() < 0.2:
            del after[rnd.choice(list(after))]
        applied = jsonpatch.apply_patch(copy.deepcopy(before), state_patch(before, after))
        assert json.dumps(applied, sort_keys=True) == json.dumps(after, sort_keys=True)
