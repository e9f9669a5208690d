"""Network definitions: publish-time validation as pure functions, compiled snapshots, the stores."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any
from uuid import uuid4

import pytest
import yaml

from phasegraph.server.storage.store import RequestStore
from phasegraph.tools import default_registry
from phasegraph.tools.networks import (
    EXAMPLE_NETWORK,
    EXAMPLES,
    NetworkError,
    NetworkNotFound,
    NetworkStore,
    NetworkValidationError,
    compile_network,
    load_definition,
    network_problems,
    open_network_store,
    parse_definition,
    tool_catalogue,
)

TOOLS = {name: info.params for name, info in tool_catalogue(default_registry()).items()}


def agent(key: str, **fields: Any) -> dict[str, Any]:
    return {"key": key, "prompt_template": f"You are {key}.", **fields}


def problems(*agents: dict[str, Any]) -> list[str]:
    return network_problems(parse_definition(yaml.safe_dump({"name": "n", "agents": list(agents)})), TOOLS)


def test_a_valid_network_has_no_problems():
    assert problems(agent("a", is_default=True, routes=["b"]), agent("b", allow_respond=True)) == []
    assert network_problems(load_definition(EXAMPLE_NETWORK), TOOLS) == []


def test_multiple_defaults_alone():
    found = problems(
        agent("a", is_default=True, allow_respond=True), agent("b", is_default=True, allow_respond=True)
    )
    assert found == ["Agents 'a' and 'b' are both marked is_default; exactly one agent may start runs."]


def test_no_default_alone():
    assert problems(agent("a", allow_respond=True)) == [
        "No agent is marked is_default: a run would not know which agent starts; mark exactly one."
    ]


def test_no_responding_agent_alone_also_means_none_is_reachable():
    found = problems(agent("a", is_default=True, routes=["b"]), agent("b"))
    assert len(found) == 2
    assert found[0].startswith("No agent has allow_respond")
    assert found[1] == (
        "No agent that may respond can be reached from the default agent 'a': it reaches only 'a' and 'b', "
        "and no agent may respond."
    )


def test_missing_route_target_alone():
    found = problems(agent("a", is_default=True, allow_respond=True, routes=["ghost"]))
    assert found == ["Agent 'a' routes to 'ghost', which is not an agent of this network (agents: 'a')."]


def test_unreachable_responder_alone_names_what_can_be_reached():
    found = problems(
        agent("a", is_default=True, routes=["b"]), agent("b", routes=["a"]), agent("c", allow_respond=True)
    )
    assert found == [
        "No agent that may respond can be reached from the default agent 'a': it reaches only 'a' and 'b', "
        "and the agents that may respond are 'c'."
    ]


def test_the_broken_example_reports_all_four_problems_at_once():
    found = network_problems(load_definition(EXAMPLES / "broken.yaml"), TOOLS)
    text = "\n".join(found)
    assert "'intake' and 'reviewer' are both marked is_default" in text
    assert "No agent has allow_respond" in text
    assert "Agent 'reviewer' routes to 'editor', which is not an agent" in text
    assert "reached from the default agent 'intake': it reaches only 'intake' and 'reviewer'" in text
    with pytest.raises(NetworkValidationError) as raised:
        compile_network(load_definition(EXAMPLES / "broken.yaml"), default_registry())
    assert raised.value.problems == found and str(raised.value).count("\n- ") == len(found)


def test_tools_and_their_parameters_must_exist():
    found = problems(
        agent(
            "a", is_default=True, allow_respond=True,
            tools=[{"tool": "launch"}, {"tool": "read_file", "agent_params": ["path", "mode"]},
                   {"tool": "search_files", "system_params": {"root": "/"}}],
        ),
    )  # fmt: skip
    assert len(found) == 3
    assert found[0].startswith("Agent 'a' is equipped with the tool 'launch', which does not exist")
    assert "'read_file' the parameter(s) 'mode', which it does not have (it has 'path')" in found[1]
    assert "'search_files' the parameter(s) 'root'" in found[2]


def test_duplicate_keys_are_named():
    found = problems(agent("a", is_default=True, allow_respond=True), agent("a"))
    assert found[0] == "The key 'a' is used by 2 agents; each agent needs its own key."


def test_unreadable_files_name_the_file_not_the_server_path(tmp_path: Path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: [unclosed", encoding="utf-8")
    with pytest.raises(NetworkError, match=r"^bad.yaml is not valid YAML"):
        load_definition(bad)
    bad.write_text("name: x\nagents: []\nextra: 1\n", encoding="utf-8")
    with pytest.raises(NetworkError) as raised:
        load_definition(bad)
    assert "agents: List should have at least 1 item" in str(raised.value) and "extra" in str(raised.value)
    assert str(tmp_path) not in str(raised.value)
    with pytest.raises(NetworkError, match=r"ends in \.yaml, \.yml or \.json"):
        load_definition(tmp_path / "net.txt")
    (tmp_path / "net.json").write_text("{", encoding="utf-8")
    with pytest.raises(NetworkError, match=r"net\.json is not valid JSON"):
        load_definition(tmp_path / "net.json")


def test_publishing_compiles_prompts_into_a_snapshot():
    snapshot = compile_network(load_definition(EXAMPLE_NETWORK), default_registry())
    assert snapshot.default_agent_key == "triage" and list(snapshot.agents) == [
        "triage",
        "researcher",
        "writer",
    ]
    researcher = snapshot.agents["researcher"]
    assert researcher.prompt.startswith("You are researcher.")
    assert "- search_files(query): Find lines" in researcher.prompt  # only what the agent provides
    assert "- writer: Writes the answer to the user." in researcher.prompt
    assert "{tools}" not in researcher.prompt and "{routes}" not in researcher.prompt
    assert researcher.tools["search_files"].system_params == {"path": "docs"}
    assert researcher.tools["read_file"].agent_params == ["path"]
    with pytest.raises(KeyError, match="agents: triage, researcher, writer"):
        snapshot.agent("editor")


@pytest.fixture(params=["memory", "sqlite", "postgres"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[NetworkStore]:
    if request.param == "memory":
        yield open_network_store("memory")
        return
    if request.param == "sqlite":
        database = f"sqlite:{tmp_path / 'state.db'}"
    else:
        database = os.environ.get("PHASEGRAPH_TEST_POSTGRES_URL", "")
        if not database:
            pytest.skip("PHASEGRAPH_TEST_POSTGRES_URL unset")
    requests = RequestStore.for_checkpointer(database)
    await requests.setup()  # the server's migrations create the networks table
    await requests.close()
    store = open_network_store(database)
    yield store
    await store.close()


async def test_stores_version_snapshots_and_pin_them(store: NetworkStore):
    project = f"p-{uuid4().hex[:8]}"
    definition = load_definition(EXAMPLE_NETWORK)
    first = await store.publish(project, compile_network(definition, default_registry()))
    assert first.version == 1
    assert (await store.publish(project, compile_network(definition, default_registry()))).version == 1
    changed = definition.model_copy(update={"description": "second"})
    second = await store.publish(project, compile_network(changed, default_registry()))
    assert second.version == 2
    assert (await store.get(project, "research")).description == "second"
    assert (await store.get(project, "research", 1)).description == definition.description
    with pytest.raises(NetworkNotFound, match="has no version 3; its latest is 2"):
        await store.get(project, "research", 3)
    with pytest.raises(NetworkNotFound, match="publish it first"):
        await store.get(project, "other")
    with pytest.raises(NetworkNotFound):
        await store.get("another-project", "research")  # networks belong to their project
    listed = [s for s in await store.list(frozenset({project}))]
    assert [(s.name, s.version, s.agents, s.default_agent_key) for s in listed] == [
        ("research", 2, 3, "triage")
    ]


async def test_concurrent_publishers_get_distinct_versions(store: NetworkStore):
    project = f"p-{uuid4().hex[:8]}"
    base = load_definition(EXAMPLE_NETWORK)
    snapshots = [
        compile_network(base.model_copy(update={"description": f"d{i}"}), default_registry())
        for i in range(4)
    ]
    published = await asyncio.gather(*(store.publish(project, s) for s in snapshots))
    assert sorted(p.version for p in published) == [1, 2, 3, 4]


async def test_a_database_that_never_had_networks_answers_not_found(tmp_path: Path):
    store = open_network_store(f"sqlite:{tmp_path / 'empty.db'}")
    with pytest.raises(NetworkNotFound, match="publish it first"):
        await store.get("default", "research")
    assert await store.list() == []
    await store.close()
