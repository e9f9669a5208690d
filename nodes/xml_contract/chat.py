"""The calls of an iteration as a chat shows them: one assistant message, then how each call ended.

The model's XML and the ``<result>`` tags it reads stay in the protocol's transcript; ``messages``
gets the native shape every chat UI renders (``nodes/conversation.py``). A block that broke the
contract ran nothing and names no call a chat could show: its problems are ``validation_error``
events, and the model reads them in its transcript.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

from langchain_core.messages import BaseMessage

from phasegraph.nodes.conversation import call_message, refused_message, result_message
from phasegraph.nodes.xml_contract.contract import Block
from phasegraph.tools import ToolResult


class Answered(NamedTuple):
    """One call of a block: how it ended, its ``<result>`` tag, whether it ran, its arguments as run."""

    result: ToolResult
    tag: str
    ran: bool
    args: dict[str, Any]  # ``$result_of_step_N`` replaced, as its ``tool_call`` event shows them


def call_id(group: str, step_index: int, user_turn: int) -> str:
    """A call's id, unique in its thread: ``1.2.1`` (iteration, block, step), ``m2.1.2.1`` later on."""
    return f"{group}.{step_index}" if user_turn == 0 else f"m{user_turn + 1}.{group}.{step_index}"


def block_calls(
    block: Block, group: str, user_turn: int, answered: Sequence[Answered]
) -> list[dict[str, Any]]:
    """The block's calls, each with the arguments it ran with."""
    return [
        {"id": call_id(group, s.index, user_turn), "name": f"{s.service}.{s.tool}", "args": a.args}
        for s, a in zip(block.steps, answered, strict=True)
    ]


def iteration_messages(
    calls: Sequence[dict[str, Any]], answered: Sequence[Answered], *, show_output: bool
) -> list[BaseMessage]:
    """The iteration's calls in one message, then one tool message per call, in block order."""
    if not calls:
        return []
    ended = [
        result_message(c, a.result, show_output=show_output)
        if a.ran
        else refused_message(c, a.result.error or "not run")
        for c, a in zip(calls, answered, strict=True)
    ]
    return [call_message(calls), *ended]
