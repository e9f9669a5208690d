"""Every protocol in langgraph.json, driven through ``langgraph dev`` and langgraph-sdk as Studio does."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from langgraph_sdk.client import SyncLangGraphClient

from phasegraph.graphs.registry import PROTOCOLS
from phasegraph.nodes.events import Event
from tests.graphs.test_agent_network import QUESTION, route
from tests.graphs.test_goal_pursuit import GOAL, MIRA, approve, discover, execute, finalize
from tests.graphs.test_xml_contract import TASK
from tests.helpers import turn, write_script
from tests.studio.conftest import CONFIG, stream_events

GRAPHS = sorted(CONFIG["graphs"])
ASK = {"messages": [{"role": "user", "content": "Summarise the roadmap"}]}
#: The message the planner's demo script answers.
PLANNER_MESSAGE = "Set up a project for our spring launch"
PYTHON_ONLY = {"chat_model", "tool_registry", "database"}


def _empty_workspace(tmp_path: Path) -> dict[str, str]:
    empty = tmp_path / "empty"
    empty.mkdir()
    return {"workspace": str(empty)}  # the demo script's files are not there


def _failing_call(tmp_path: Path) -> dict[str, str]:
    """A model whose only call fails, then answers anyway."""
    return {
        "model": write_script(
            tmp_path, turn("<demo><always_fails/></demo>"), turn("Final Answer: it failed.")
        )
    }


def _unknown_item(tmp_path: Path) -> dict[str, str]:
    """A model that moves an item the story world does not have, then claims success."""
    script = write_script(
        tmp_path,
        discover(),
        execute("move_item", item_uri="res://item/no-such-item", to_uri=MIRA),
        approve(),
        discover(),
        finalize("The item is back with its owner.", "success"),
        approve(),
    )
    return {"model": script}


def _failing_project(tmp_path: Path) -> dict[str, str]:
    """A planner that creates a project from a template that does not exist, then answers anyway."""
    create = ("create_project", {"name": "Nowhere", "template_id": "no-such-template"})
    return {"model": write_script(tmp_path, turn("", create), turn("The project could not be created."))}


@dataclass(frozen=True)
class Demo:
    """What a graph's offline demo does in Studio, and how to make it fail."""

    ask: dict[str, Any] = field(default_factory=lambda: ASK)
    #: Context fields only the Python API can set: Studio's form must not offer them.
    python_only: frozenset[str] = frozenset(PYTHON_ONLY)
    #: Context and output fields of the protocol's own that the forms must offer.
    own_fields: frozenset[str] = frozenset()
    outputs: frozenset[str] = frozenset()
    #: The graph streams model text (``text`` events).
    streams_text: bool = True
    #: The tools the demo runs, in order (None: not checked).
    tools: tuple[str, ...] | None = None
    #: ``next`` at each pause point the demo stops at, until its first tool has run (None: not checked).
    stops: tuple[tuple[str, ...], ...] | None = None
    #: A script turn after which the script ends, though the run needs more.
    last_turn: dict[str, Any] = field(default_factory=lambda: turn("", ("list_files", {"path": "docs"})))
    #: A context with which every tool the demo calls fails.
    failing_tools: Callable[[Path], dict[str, str]] = _empty_workspace
    #: Some events come from a subgraph: a client sees them only with ``stream_subgraphs=True``.
    subgraphs: bool = False


DEMOS = {
    "triggered_phase": Demo(),
    "unified": Demo(),
    "goal_pursuit": Demo(
        ask={"messages": [{"role": "user", "content": GOAL}]},
        python_only=frozenset({*PYTHON_ONLY, "resource_repository"}),
        own_fields=frozenset(
            {"mode", "min_iter", "max_iter", "max_context_rounds", "max_steps", "resources"}
        ),
        outputs=frozenset({"answer", "resolution", "operation_plan"}),
        streams_text=False,
        tools=("move_item", "add_chapter_note"),
        # after iteration 1 (refined), iteration 2 (move_item approved), then move_item's execution
        stops=(("discover_context",), ("execute_action",), ("discover_context",)),
        last_turn=discover(),  # the action decision then finds the script ended
        failing_tools=_unknown_item,
    ),
    "agent_network": Demo(
        ask={"messages": [{"role": "user", "content": QUESTION}]},
        python_only=frozenset({*PYTHON_ONLY, "network_store"}),
        own_fields=frozenset(
            {"network", "network_version", "network_file", "agent_key", "max_steps", "max_tool_errors"}
        ),
        outputs=frozenset({"answer", "responder", "instructions", "execution_log", "tool_execution_log"}),
        streams_text=False,
        tools=("search_files", "read_file"),
        # after triage's handoff, then after the researcher's first tool
        stops=(("run_agent_step",), ("run_agent_step",)),
        last_turn=route("researcher"),  # the researcher then finds the script ended
    ),
    "xml_contract": Demo(
        ask={"messages": [{"role": "user", "content": TASK}]},
        python_only=frozenset({*PYTHON_ONLY, "mcp_services"}),
        own_fields=frozenset(
            {"mcp_config", "max_steps", "call_timeout_seconds", "max_result_chars", "dataset_dir"}
        ),
        outputs=frozenset({"answer"}),
        streams_text=False,
        tools=("demo.read_file", "demo.read_file", "demo.calculate", "demo.slow_echo"),
        stops=(("propose_action",),),  # after the parallel reads
        last_turn=turn("<demo><calculate>1 + 1</calculate></demo>"),
        failing_tools=_failing_call,
    ),
    "planner": Demo(
        ask={"messages": [{"role": "user", "content": PLANNER_MESSAGE}]},
        python_only=frozenset({*PYTHON_ONLY, "planning_store"}),
        own_fields=frozenset(
            {
                "context_type",
                "entity_id",
                "user_id",
                "session_id",
                "profile",
                "profiles",
                "max_tool_calls",
                "session_seconds",
                "max_plan_steps",
                "structured_output",
            }
        ),
        outputs=frozenset({"answer", "usage", "plan"}),
        # list_templates by the planner, then the plan's three steps, run by the executor subgraph
        tools=("list_templates", "list_templates", "create_project", "publish_context_document"),
        stops=(("call_planner",),),  # after the planner's own list_templates
        last_turn=turn("", ("list_templates", {"query": "launch"})),
        failing_tools=_failing_project,
        subgraphs=True,
    ),
}


def _types(events: list[Event]) -> list[str]:
    return [e.type for e in events]


def _ran(events: list[Event]) -> list[tuple[str, str]]:
    """(call id, tool) of every tool that ran."""
    return [(e.call_id, e.name) for e in events if e.type == "tool_result"]


def _assistant(client: SyncLangGraphClient, graph_id: str) -> str:
    found = client.assistants.search(graph_id=graph_id)
    assert len(found) == 1, found
    return str(found[0]["assistant_id"])


def test_every_graph_has_its_demo_expectations():
    assert set(DEMOS) == set(GRAPHS)


@pytest.mark.parametrize("graph_id", GRAPHS)
def test_schemas_give_studio_an_input_form_and_a_context_form(client: SyncLangGraphClient, graph_id: str):
    demo = DEMOS[graph_id]
    schemas = client.assistants.get_schemas(_assistant(client, graph_id))
    assert "messages" in schemas["input_schema"]["properties"]
    assert schemas["output_schema"]["properties"]
    assert demo.outputs <= set(schemas["output_schema"]["properties"])
    context = schemas["context_schema"]["properties"]
    assert {"model", "workspace", "project_id", "show_tool_outputs", *demo.own_fields} <= set(context)
    assert not demo.python_only & set(context)
    assert not demo.python_only & set((schemas.get("config_schema") or {}).get("properties", {}))
    assert all(field.get("description") for field in context.values()), context


@pytest.mark.parametrize("graph_id", GRAPHS)
def test_an_empty_context_runs_the_demo_to_one_final_event(client: SyncLangGraphClient, graph_id: str):
    demo = DEMOS[graph_id]
    thread = client.threads.create()
    events, errors = stream_events(
        client, thread["thread_id"], graph_id, demo.ask, context={}, stream_subgraphs=demo.subgraphs
    )
    assert errors == []
    assert _types(events).count("final") == 1 and events[-1].type == "final"
    assert "error" not in _types(events)
    assert any(e.type == "text" for e in events) == demo.streams_text  # the graph streams its own text
    results = [e for e in events if e.type == "tool_result"]
    assert results and all(e.status == "ok" for e in results)  # the bundled workspace or story world
    assert demo.tools is None or tuple(e.name for e in results) == demo.tools
    assert not events[-1].all_tools_failed and events[-1].answer


@pytest.mark.parametrize("graph_id", GRAPHS)
def test_pause_at_the_pause_point_and_resume_runs_no_tool_twice(client: SyncLangGraphClient, graph_id: str):
    demo = DEMOS[graph_id]
    straight, _ = stream_events(
        client,
        client.threads.create()["thread_id"],
        graph_id,
        demo.ask,
        context={},
        stream_subgraphs=demo.subgraphs,
    )
    thread_id = client.threads.create()["thread_id"]
    pause_after = list(PROTOCOLS[graph_id].pause_after)
    first: list[Event] = []
    stops: list[tuple[str, ...]] = []
    while not _ran(first):  # stop at each pause point until a tool has run
        assert len(stops) < 10, "no tool ran"
        graph_input = None if stops else demo.ask
        segment, errors = stream_events(
            client,
            thread_id,
            graph_id,
            graph_input,
            context={},
            interrupt_after=pause_after,
            stream_subgraphs=demo.subgraphs,
        )
        assert errors == [] and "final" not in _types(segment)
        paused = client.threads.get_state(thread_id)
        assert paused["next"], "the run did not stop at its pause point"
        first += segment
        stops.append(tuple(paused["next"]))
    assert demo.stops is None or tuple(stops) == demo.stops
    assert len(_ran(first)) >= 1
    rest, errors = stream_events(
        client, thread_id, graph_id, None, context={}, stream_subgraphs=demo.subgraphs
    )
    assert errors == [] and _types(rest).count("final") == 1 and rest[-1].type == "final"
    both = _ran(first) + _ran(rest)
    assert len({call_id for call_id, _ in both}) == len(both)  # no call ran in both segments
    assert [name for _, name in both] == [name for _, name in _ran(straight)]
    assert rest[-1].answer == straight[-1].answer


@pytest.mark.parametrize("graph_id", GRAPHS)
@pytest.mark.parametrize(
    ("context", "reason"),
    [
        ({"workspace": "/no/such/folder"}, "workspace '/no/such/folder' is not a folder"),
        ({"model": "nonsense"}, "unknown model spec 'nonsense'"),
        ({"model": "scripted:/no/such/script.json"}, "cannot read script script.json"),
    ],
)
def test_a_bad_context_reaches_the_client_with_its_reason(
    client: SyncLangGraphClient, graph_id: str, context: dict[str, str], reason: str
):
    thread = client.threads.create()
    events, errors = stream_events(
        client, thread["thread_id"], graph_id, DEMOS[graph_id].ask, context=context
    )
    assert events == []
    assert len(errors) == 1 and reason in errors[0]["message"], errors


@pytest.mark.parametrize(
    ("context", "reason"),
    [
        ({"resources": "/no/such/folder"}, "resources folder '/no/such/folder' is not a folder"),
        ({"min_iter": 5}, "min_iter (5) must be below max_iter (5)"),
    ],
)
def test_a_bad_goal_pursuit_setting_reaches_the_client_with_its_reason(
    client: SyncLangGraphClient, context: dict[str, Any], reason: str
):
    thread = client.threads.create()
    events, errors = stream_events(
        client, thread["thread_id"], "goal_pursuit", DEMOS["goal_pursuit"].ask, context=context
    )
    assert events == []
    assert len(errors) == 1 and reason in errors[0]["message"], errors


@pytest.mark.parametrize("graph_id", GRAPHS)
def test_a_failing_turn_ends_with_one_error_event_naming_the_cause(
    client: SyncLangGraphClient, graph_id: str, tmp_path: Path
):
    demo = DEMOS[graph_id]
    script = write_script(tmp_path, demo.last_turn)  # no turn 2
    thread = client.threads.create()
    events, errors = stream_events(
        client,
        thread["thread_id"],
        graph_id,
        demo.ask,
        context={"model": script},
        stream_subgraphs=demo.subgraphs,
    )
    assert _types(events)[-1] == "error" and _types(events).count("error") == 1
    assert "final" not in _types(events)
    assert events[-1].kind == "script" and "has no turn 2" in events[-1].message
    assert len(errors) == 1 and "has no turn 2" in errors[0]["message"]


@pytest.mark.parametrize("graph_id", GRAPHS)
def test_every_tool_failing_is_not_reported_as_success(
    client: SyncLangGraphClient, graph_id: str, tmp_path: Path
):
    demo = DEMOS[graph_id]
    context = demo.failing_tools(tmp_path)
    events, errors = stream_events(
        client,
        client.threads.create()["thread_id"],
        graph_id,
        demo.ask,
        context=context,
        stream_subgraphs=demo.subgraphs,
    )
    assert errors == [] and events[-1].type == "final"
    assert {e.status for e in events if e.type == "tool_result"} == {"error"}
    assert events[-1].all_tools_failed


def test_the_plan_executors_events_need_stream_subgraphs(client: SyncLangGraphClient):
    """The plan executor is a subgraph: plan_created comes from the graph, the steps from the subgraph."""
    ask = DEMOS["planner"].ask
    runs = {
        subgraphs: stream_events(
            client,
            client.threads.create()["thread_id"],
            "planner",
            ask,
            context={},
            stream_subgraphs=subgraphs,
        )[0]
        for subgraphs in (False, True)
    }
    without, with_subgraphs = _types(runs[False]), _types(runs[True])
    assert "plan_created" in without and "step_start" not in without and without[-1] == "final"
    assert with_subgraphs.count("step_start") == with_subgraphs.count("step_complete") == 3
    steps = [(e.type, e.step) for e in runs[True] if e.type in ("step_start", "tool_result", "step_complete")]
    assert steps[1:] == [(t, n) for n in (1, 2, 3) for t in ("step_start", "tool_result", "step_complete")]


@pytest.mark.parametrize("graph_id", GRAPHS)
def test_later_messages_on_a_thread_continue_its_conversation(client: SyncLangGraphClient, graph_id: str):
    """Studio's chat sends each new message on the thread: every one is answered, none starts over."""
    demo = DEMOS[graph_id]
    thread = client.threads.create()["thread_id"]
    follow_ups = ["And what else is there?", "Thanks, one more thing please."]
    answers = []
    for message in [demo.ask["messages"][0]["content"], *follow_ups]:
        ask = {"messages": [{"role": "user", "content": message}]}
        events, errors = stream_events(
            client, thread, graph_id, ask, context={}, stream_subgraphs=demo.subgraphs
        )
        assert errors == [] and "error" not in _types(events), (message, events[-1])
        assert events[-1].type == "final" and events[-1].answer
        answers.append(events[-1].answer)
    messages = client.threads.get_state(thread)["values"]["messages"]
    humans = [m["content"] for m in messages if m["type"] == "human"]
    assert humans == [demo.ask["messages"][0]["content"], *follow_ups]
    said = [m["content"] for m in messages if m["type"] == "ai" and m["content"] and not m.get("tool_calls")]
    assert said[-3:] == answers  # each turn's answer, in order
    called = {c["id"] for m in messages if m["type"] == "ai" for c in m.get("tool_calls") or []}
    answered = {m["tool_call_id"] for m in messages if m["type"] == "tool"}
    assert called and called == answered  # every call the chat shows has its outcome
