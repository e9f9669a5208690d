"""Graph state of the xml_contract protocol. Counters live here; their limits live in the Context."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any

from langchain_core.messages import AnyMessage
from langgraph.graph.message import add_messages
from typing_extensions import TypedDict

from phasegraph.nodes.events import Phase
from phasegraph.nodes.state_shapes import Holds
from phasegraph.nodes.xml_contract.contract import KeptProposal


class XmlContractInput(TypedDict):
    """What a caller sends: the conversation, ending with the user's task."""

    messages: Annotated[list[AnyMessage], add_messages]


class XmlContractOutput(TypedDict):
    """What a caller gets back: the conversation (the calls that ran, how they ended) and the answer."""

    messages: Annotated[list[AnyMessage], add_messages]
    answer: str


class XmlContractState(TypedDict):
    """Everything one turn tracks."""

    # the conversation a chat shows: the user's messages, each iteration's calls and how they ended, answers
    messages: Annotated[list[AnyMessage], add_messages]
    # what the model reads, across turns: the user's messages, its XML answers, the <result> replies
    transcript: Annotated[list[AnyMessage], add_messages]
    turn_start: int  # index in messages of this turn's user message
    # what the last model answer proposed (blocks, problems, final answer)
    proposal: Annotated[dict[str, Any] | None, Holds(KeptProposal | None)]
    steps: int  # iterations that ran blocks this turn
    calls: dict[str, int]  # this turn's tool calls that ran, by status ("ok", "error")
    refused_in_a_row: int  # iterations in a row whose answer could not run at all (broken XML, ...)
    model_calls: int  # model calls this turn, positions a scripted model
    phase: Phase  # the phase running or last run
    phase_index: int  # 1..N, incremented at each phase start
    answer: str  # the turn's final answer


def progress(state: Mapping[str, Any]) -> dict[str, Any]:
    """Progress fields every xml_contract event carries."""
    return {"phase": state["phase"], "phase_index": state["phase_index"], "step": state["steps"]}
