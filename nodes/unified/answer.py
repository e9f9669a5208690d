"""The end of a unified turn: exactly one ``final`` event, with a fallback for an empty answer."""

from __future__ import annotations

from typing import Any

from langchain.agents.middleware import AgentMiddleware
from langchain_core.messages import AIMessage, AnyMessage
from langgraph.runtime import Runtime

from phasegraph.nodes.answers import all_tools_failed, fallback_answer
from phasegraph.nodes.emit import Emitter
from phasegraph.nodes.events import Final
from phasegraph.nodes.unified.budget import turn_results
from phasegraph.nodes.unified.context import UnifiedContext
from phasegraph.nodes.unified.outputs import model_view


class FinalAnswerMiddleware(AgentMiddleware[Any, UnifiedContext]):
    """Emits the turn's ``final`` event once the loop is done (``after_agent`` runs once per turn)."""

    async def aafter_agent(self, state: Any, runtime: Runtime[UnifiedContext]) -> dict[str, Any] | None:
        """Emit ``final``; an empty answer becomes a deterministic summary of the tool results."""
        messages: list[AnyMessage] = state["messages"]
        last = messages[-1] if messages else None
        answer = last.text.strip() if isinstance(last, AIMessage) else ""
        results = turn_results(model_view(messages, state.get("tool_outputs") or {}))
        fallback = not answer
        if fallback:
            answer = fallback_answer(results)
        Emitter(runtime.context, runtime.stream_writer).emit(
            Final, answer=answer, fallback=fallback, all_tools_failed=all_tools_failed(results)
        )
        await (
            runtime.context.close_tools()
        )  # a client driving the graph itself (langgraph dev) closes nothing
        if not fallback:
            return None
        # the conversation keeps the answer the user saw, in place of the empty model message
        replaced = {"id": last.id} if isinstance(last, AIMessage) else {}
        return {"messages": [AIMessage(answer, **replaced)]}
