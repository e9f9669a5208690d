"""Per-turn budgets of the unified loop, counted from the conversation itself.

The counts come from the messages since the user's last message, not from counters that live
only as long as one graph invocation: a driver that re-invokes the graph at every pause point
(the server, Studio, a resume after a restart) sees the same budget as one that runs straight
through.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from langchain.agents.middleware import AgentMiddleware, hook_config
from langchain_core.messages import AIMessage, AnyMessage, BaseMessage, HumanMessage, ToolMessage
from langgraph.runtime import Runtime

from phasegraph.nodes.answers import GatheredResult
from phasegraph.nodes.conversation import NOT_RUN, is_rejected
from phasegraph.nodes.emit import Emitter
from phasegraph.nodes.events import BudgetExhaustedEvent, IgnoredToolCall
from phasegraph.nodes.unified.context import UnifiedContext


@dataclass(frozen=True)
class TurnUsage:
    """What the current user turn has used so far."""

    model_calls: int
    tool_calls: int

    def spent(self, context: UnifiedContext) -> BudgetExhaustedEvent | None:
        """The budget that forces the next model call to answer with tools unbound, if any."""
        if self.tool_calls >= context.max_tool_calls:
            return BudgetExhaustedEvent(
                budget="tool_calls", limit=context.max_tool_calls, used=self.tool_calls
            )
        if self.model_calls >= context.max_model_calls:
            return BudgetExhaustedEvent(
                budget="model_calls", limit=context.max_model_calls, used=self.model_calls
            )
        return None


def this_turn(messages: Sequence[BaseMessage]) -> list[BaseMessage]:
    """The messages after the user's last message."""
    for index in range(len(messages) - 1, -1, -1):
        if isinstance(messages[index], HumanMessage):
            return list(messages[index + 1 :])
    return list(messages)


def turn_usage(messages: Sequence[BaseMessage]) -> TurnUsage:
    """Model calls (AI messages) and tool calls (tool messages) of the current turn.

    A call a person rejected never ran and is not counted: the model may still make the corrected call.
    """
    turn = this_turn(messages)
    return TurnUsage(
        model_calls=sum(isinstance(m, AIMessage) for m in turn),
        tool_calls=sum(isinstance(m, ToolMessage) and not is_rejected(m) for m in turn),
    )


def turn_results(messages: Sequence[BaseMessage]) -> list[GatheredResult]:
    """The tool results of the current turn, with the arguments each call was made with."""
    turn = this_turn(messages)
    args = {c["id"]: c["args"] for m in turn if isinstance(m, AIMessage) for c in m.tool_calls}
    return [
        GatheredResult(
            name=m.name or "",
            args=args.get(m.tool_call_id, {}),
            status=_status(m),
            text=m.text,
            ran=not m.response_metadata.get(NOT_RUN),
        )
        for m in turn
        if isinstance(m, ToolMessage)
    ]


def over_budget(
    messages: Sequence[BaseMessage], call_id: str, context: UnifiedContext, rejected: Collection[str] = ()
) -> bool:
    """True when the call ``call_id`` of the last model message would exceed the tool budget.

    Calls of one message run concurrently, so each is placed by its position in that message, among
    the calls a person did not reject (``rejected``: their ids).
    """
    last = next((m for m in reversed(messages) if isinstance(m, AIMessage)), None)
    ids = [c["id"] for c in last.tool_calls if c["id"] not in rejected] if last is not None else []
    position = ids.index(call_id) if call_id in ids else 0
    return turn_usage(messages).tool_calls + position >= context.max_tool_calls


class TurnBudgetMiddleware(AgentMiddleware[Any, UnifiedContext]):
    """Ends the turn after the answer a spent budget forced, whatever that answer asked for."""

    @hook_config(can_jump_to=["end"])
    async def aafter_model(self, state: Any, runtime: Runtime[UnifiedContext]) -> dict[str, Any] | None:
        """A forced answer that still calls tools loses those calls, and the turn ends."""
        messages: list[AnyMessage] = state["messages"]
        answer = messages[-1]
        if not isinstance(answer, AIMessage) or turn_usage(messages[:-1]).spent(runtime.context) is None:
            return None
        emitter = Emitter(runtime.context, runtime.stream_writer)
        for call in answer.tool_calls:
            ignored = {"name": call["name"], "args": call["args"], "reason": "tools_unbound"}
            emitter.emit(IgnoredToolCall, **ignored)
            emitter.trace("ignored_tool_call", **ignored)
        stripped = AIMessage(content=answer.content, id=answer.id, name=answer.name)
        return {"messages": [stripped], "jump_to": "end"}


def _status(message: ToolMessage) -> Literal["ok", "error"]:
    return "error" if message.status == "error" else "ok"
