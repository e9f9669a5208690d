"""Every langgraph.json target imports as a compiled graph Studio can load."""

import importlib
import json
from dataclasses import fields
from pathlib import Path

import pytest
from langgraph.graph.state import CompiledStateGraph

from phasegraph.graphs.registry import PROTOCOLS

ROOT = Path(__file__).parents[2]
TARGETS = json.loads((ROOT / "langgraph.json").read_text(encoding="utf-8"))["graphs"]


def test_every_protocol_is_listed():
    assert set(TARGETS) == set(PROTOCOLS)


@pytest.mark.parametrize("name", sorted(TARGETS))
def test_target_is_a_compiled_graph_without_checkpointer(name: str):
    module, attribute = TARGETS[name].split(":")
    assert module == f"phasegraph.graphs.{name}", "langgraph.json names the installed module, not a path"
    graph = getattr(importlib.import_module(module), attribute)
    assert isinstance(graph, CompiledStateGraph)
    assert graph.checkpointer is None
    assert graph.name == name


@pytest.mark.parametrize("name", sorted(PROTOCOLS))
def test_context_renders_as_a_form(name: str):
    context = PROTOCOLS[name].context_schema
    described = {f.name: f.metadata.get("description") for f in fields(context)}
    assert all(described.values()), f"fields without a description: {described}"
    schema = PROTOCOLS[name].compile().get_context_jsonschema()
    assert {"model", "workspace", "project_id", "show_tool_outputs"} <= set(schema["properties"])


@pytest.mark.parametrize("name", sorted(PROTOCOLS))
def test_input_and_output_render_as_forms(name: str):
    graph = PROTOCOLS[name].compile()
    assert "messages" in graph.get_input_jsonschema()["properties"]
    assert "messages" in graph.get_output_jsonschema()["properties"]
