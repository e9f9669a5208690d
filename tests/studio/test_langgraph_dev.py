"""Every protocol in langgraph.json, driven through ``langgraph dev`` and langgraph-sdk as Studio does."""

from __future__ import annotations

from pathlib import Path

import pytest
from langgraph_sdk.client import SyncLangGraphClient

from graphs.registry import PROTOCOLS
from nodes.events import Event
from tests.helpers import turn, write_script
from tests.studio.conftest import CONFIG, stream_events

GRAPHS = sorted(CONFIG["graphs"])
ASK = {"messages": [{"role": "user", "content": "Summarise the roadmap"}]}
PYTHON_ONLY = {"chat_model", "tool_registry"}


def _types(events: list[Event]) -> list[str]:
    return [e.type for e in events]


def _ran(events: list[Event]) -> list[tuple[str, str]]:
    """(call id, tool) of every tool that ran."""
    return [(e.call_id, e.name) for e in events if e.type == "tool_result"]


def _assistant(client: SyncLangGraphClient, graph_id: str) -> str:
    found = client.assistants.search(graph_id=graph_id)
    assert len(found) == 1, found
    return str(found[0]["assistant_id"])


@pytest.mark.parametrize("graph_id", GRAPHS)
def test_schemas_give_studio_an_input_form_and_a_context_form(client: SyncLangGraphClient, graph_id: str):
    schemas = client.assistants.get_schemas(_assistant(client, graph_id))
    assert "messages" in schemas["input_schema"]["properties"]
    assert schemas["output_schema"]["properties"]
    context = schemas["context_schema"]["properties"]
    assert {"model", "workspace", "project_id", "show_tool_outputs"} <= set(context)
    assert not PYTHON_ONLY & set(context)
    assert not PYTHON_ONLY & set((schemas.get("config_schema") or {}).get("properties", {}))
    assert all(field.get("description") for field in context.values()), context


@pytest.mark.parametrize("graph_id", GRAPHS)
def test_an_empty_context_runs_the_demo_to_one_final_event(client: SyncLangGraphClient, graph_id: str):
    thread = client.threads.create()
    events, errors = stream_events(client, thread["thread_id"], graph_id, ASK, context={})
    assert errors == []
    assert _types(events).count("final") == 1 and events[-1].type == "final"
    assert "error" not in _types(events)
    assert any(e.type == "text" for e in events)  # the graph streams its own text
    results = [e for e in events if e.type == "tool_result"]
    assert results and all(e.status == "ok" for e in results)  # the bundled demo workspace
    assert not events[-1].all_tools_failed and events[-1].answer


@pytest.mark.parametrize("graph_id", GRAPHS)
def test_pause_at_the_pause_point_and_resume_runs_no_tool_twice(client: SyncLangGraphClient, graph_id: str):
    straight, _ = stream_events(client, client.threads.create()["thread_id"], graph_id, ASK, context={})
    thread_id = client.threads.create()["thread_id"]
    pause_after = list(PROTOCOLS[graph_id].pause_after)
    first, errors = stream_events(client, thread_id, graph_id, ASK, context={}, interrupt_after=pause_after)
    assert errors == [] and "final" not in _types(first)
    paused = client.threads.get_state(thread_id)
    assert paused["next"], "the run did not stop at its pause point"
    assert len(_ran(first)) >= 1
    rest, errors = stream_events(client, thread_id, graph_id, None, context={})
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
    events, errors = stream_events(client, thread["thread_id"], graph_id, ASK, context=context)
    assert events == []
    assert len(errors) == 1 and reason in errors[0]["message"], errors


@pytest.mark.parametrize("graph_id", GRAPHS)
def test_a_failing_turn_ends_with_one_error_event_naming_the_cause(
    client: SyncLangGraphClient, graph_id: str, tmp_path: Path
):
    script = write_script(tmp_path, turn("", ("list_files", {"path": "docs"})))  # no turn 2
    thread = client.threads.create()
    events, errors = stream_events(client, thread["thread_id"], graph_id, ASK, context={"model": script})
    assert _types(events)[-1] == "error" and _types(events).count("error") == 1
    assert "final" not in _types(events)
    assert events[-1].kind == "script" and "has no turn 2" in events[-1].message
    assert len(errors) == 1 and "has no turn 2" in errors[0]["message"]


@pytest.mark.parametrize("graph_id", GRAPHS)
def test_every_tool_failing_is_not_reported_as_success(
    client: SyncLangGraphClient, graph_id: str, tmp_path: Path
):
    empty = tmp_path / "empty"
    empty.mkdir()
    context = {"workspace": str(empty)}  # the demo script's files are not there
    events, errors = stream_events(
        client, client.threads.create()["thread_id"], graph_id, ASK, context=context
    )
    assert errors == [] and events[-1].type == "final"
    assert {e.status for e in events if e.type == "tool_result"} == {"error"}
    assert events[-1].all_tools_failed
