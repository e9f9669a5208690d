"""Run Context defaults: a meaningful offline run, and a form without Python-only fields."""

from pathlib import Path

import pytest

from phasegraph.graphs.registry import PROTOCOLS
from phasegraph.nodes.errors import ConfigurationError
from phasegraph.nodes.models import DEMO_WORKSPACE
from tests.helpers import scripted, turn, write_script


@pytest.mark.parametrize("protocol", sorted(PROTOCOLS))
def test_the_demo_model_reads_the_demo_workspace_by_default(protocol: str):
    context = PROTOCOLS[protocol].make_context()
    assert Path(context.workspace) == DEMO_WORKSPACE


def test_another_model_reads_the_folder_the_process_started_in(tmp_path: Path):
    context = PROTOCOLS["unified"].make_context(model=write_script(tmp_path, turn("Hi.")))
    assert Path(context.workspace) == Path.cwd()
    assert Path(PROTOCOLS["unified"].make_context(chat_model=scripted(turn("Hi."))).workspace) == Path.cwd()


def test_a_relative_workspace_becomes_absolute():
    context = PROTOCOLS["unified"].make_context(workspace="nodes")
    assert context.workspace == str(Path.cwd() / "nodes")


@pytest.mark.parametrize("protocol", sorted(PROTOCOLS))
def test_python_only_fields_stay_out_of_the_schema(protocol: str):
    graph = PROTOCOLS[protocol].compile()
    properties = graph.get_context_jsonschema()["properties"]
    assert "chat_model" not in properties and "tool_registry" not in properties
    assert {"model", "workspace", "project_id"} <= set(properties)


def test_configuration_errors_keep_their_message_under_langgraph_api():
    # langgraph-api shows the message of RuntimeError (and a few other built-ins) and hides others
    with pytest.raises(RuntimeError, match="workspace '/no/such/folder' is not a folder"):
        PROTOCOLS["unified"].make_context(workspace="/no/such/folder")
    assert issubclass(ConfigurationError, RuntimeError)
