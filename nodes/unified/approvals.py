"""Approval in the unified loop: after the model asks for calls, before the tool node runs any of them.

``create_agent``'s tool node runs a message's calls concurrently, so a question there could leave a
call waiting while others run; the ``after_model`` hook asks every approval first, one after
another (LangChain's own human-in-the-loop middleware waits at the same point). An edit rewrites the
call in the model's message (same id), so the thread shows what ran; every verdict is kept by call
id for the tool node, where a rejected call is answered with its reason and never run.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict
from typing import Annotated, Any, NotRequired

from langchain.agents.middleware import AgentMiddleware
from langchain.agents.middleware.types import PrivateStateAttr
from langchain_core.messages import AIMessage
from langgraph.runtime import Runtime

from phasegraph.nodes.approval import Verdict, ask, needs_approval
from phasegraph.nodes.emit import Emitter, errors_reported
from phasegraph.nodes.state_shapes import Holds
from phasegraph.nodes.unified.context import UnifiedContext
from phasegraph.nodes.unified.outputs import UnifiedState


def merge_verdicts(known: Mapping[str, Any] | None, new: Mapping[str, Any] | None) -> dict[str, Any]:
    """Reducer: verdicts accumulate by call id."""
    return {**(known or {}), **(new or {})}


#: What ``approvals`` keeps: each Verdict as a dict, by call id.
Verdicts = Holds(dict[str, Verdict])


class ApprovalState(UnifiedState):
    """The unified state with the verdicts on calls that waited for a person."""

    approvals: NotRequired[Annotated[dict[str, Any], PrivateStateAttr, Verdicts, merge_verdicts]]


class ApprovalMiddleware(AgentMiddleware[Any, UnifiedContext]):
    """Asks for approval of the calls whose tools' policies say ``confirm``."""

    state_schema = ApprovalState

    async def aafter_model(self, state: Any, runtime: Runtime[UnifiedContext]) -> dict[str, Any] | None:
        """Ask for each call of the model's message that needs approval; apply edits to the message."""
        last = state["messages"][-1] if state["messages"] else None
        if not isinstance(last, AIMessage) or not last.tool_calls:
            return None
        context, emitter = runtime.context, Emitter(runtime.context, runtime.stream_writer)
        with errors_reported(emitter):
            registry = await context.open_tools()
        waiting = [c for c in last.tool_calls if needs_approval(registry, c["name"])]
        if not waiting:
            return None
        verdicts: dict[str, Verdict] = {}
        for call in waiting:
            call_id = call["id"] or ""
            payload = {"id": call_id, "name": call["name"], "args": call["args"]}
            verdicts[call_id] = await ask(context, emitter, registry, payload)
        calls = [
            {**c, "args": verdicts[c["id"] or ""].args} if (c["id"] or "") in verdicts else c
            for c in last.tool_calls
        ]
        return {
            "messages": [last.model_copy(update={"tool_calls": calls})],
            "approvals": {call_id: asdict(verdict) for call_id, verdict in verdicts.items()},
        }


def verdict_of(state: Mapping[str, Any], call_id: str) -> Verdict | None:
    """The verdict the approval hook recorded on ``call_id``, if it waited for one."""
    found = (state.get("approvals") or {}).get(call_id)
    return Verdict(**found) if found else None


def rejected_calls(state: Mapping[str, Any]) -> set[str]:
    """The ids of the calls a person rejected: they never run, so no tool budget counts them."""
    return {
        call_id for call_id, found in (state.get("approvals") or {}).items() if found["decision"] == "reject"
    }
