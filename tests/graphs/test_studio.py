"""Every langgraph.json target imports as a compiled graph Studio can load."""

import importlib.util
import json
from dataclasses import fields
from pathlib import Path

import pytest
from langgraph.graph.state import CompiledStateGraph

from graphs.registry import PROTOCOLS

ROOT = Path(__file__).parents[2]
TARGETS = json.loads((ROOT / "langgraph.json").read_text(encoding="utf-8"))["graphs"]


def test_every_protocol_is_listed():
    assert set(TARGETS) == set(PROTOCOLS)


@pytest.mark.parametrize("name", sorted(TARGETS))
def test_target_is_a_compiled_graph_without_checkpointer(name: str):
    path, attribute = TARGETS[name].split(":")
    spec = importlib.util.spec_from_file_location(f"studio_{name}", ROOT / path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    graph = getattr(module, attribute)
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
