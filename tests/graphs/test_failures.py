"""Any failure inside a protocol ends its turn with exactly one error event, emitted by the graph itself."""

from pathlib import Path
from typing import Any

import pytest
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import HumanMessage
from langchain_core.outputs import ChatResult

from phasegraph.graphs.registry import PROTOCOLS
from phasegraph.nodes.emit import EVENT_KEY
from phasegraph.nodes.errors import ProviderError
from phasegraph.nodes.events import parse_event
from tests.helpers import kinds


class ProviderDown(BaseChatModel):
    """A chat model whose provider cannot be reached."""

    @property
    def _llm_type(self) -> str:
        return "provider-down"

    def bind_tools(self, tools: Any, **kwargs: Any) -> "ProviderDown":
        return self

    def _generate(
        self, messages: Any, stop: Any = None, run_manager: Any = None, **kwargs: Any
    ) -> ChatResult:
        raise ConnectionError("provider down")


@pytest.mark.parametrize("protocol", sorted(PROTOCOLS))
async def test_the_graph_itself_reports_an_unexpected_failure(protocol: str, workspace: Path):
    """What Studio and langgraph-sdk read: the graph's custom stream, with no run layer around it."""
    spec = PROTOCOLS[protocol]
    context = spec.make_context(chat_model=ProviderDown(), workspace=str(workspace))
    events = []
    with pytest.raises(ProviderError):
        async for chunk in spec.compile().astream(
            {"messages": [HumanMessage("Hi")]}, context=context, stream_mode="custom"
        ):
            events += [parse_event(chunk[EVENT_KEY])] if EVENT_KEY in chunk else []
    errors = [e for e in events if e.type == "error"]
    assert len(errors) == 1 and errors[0].kind == "provider"
    assert "could not be reached (ConnectionError)" in errors[0].message


@pytest.mark.parametrize("protocol", sorted(PROTOCOLS))
async def test_the_run_layer_does_not_repeat_it(collect, protocol: str):
    result = await collect(protocol, chat_model=ProviderDown())
    assert result.final is None
    assert kinds(result)[-1] == "error" and kinds(result).count("error") == 1
    assert result.error.kind == "provider" and "provider down" in result.error.message
