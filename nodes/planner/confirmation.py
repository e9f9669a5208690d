"""Destructive calls in a ``project`` context wait for the user's yes: a question, then an interrupt.

The turn ends with the question as its ``final``; the graph then waits in ``await_confirmation``
(LangGraph's ``interrupt``). The user's next message on the thread answers it, in their own words,
and starts the next turn, in which the planner makes the call again if they agreed.
"""

from __future__ import annotations

import json
from typing import Any

from langchain_core.messages import AIMessage, HumanMessage
from langgraph.runtime import Runtime
from langgraph.types import interrupt

from phasegraph.nodes.emit import Emitter, reports_errors
from phasegraph.nodes.events import AgentState, Final
from phasegraph.nodes.planner.context import PlannerContext
from phasegraph.nodes.planner.ledger import public_usage
from phasegraph.nodes.planner.prompts import CONFIRMATION_QUESTION
from phasegraph.nodes.planner.state import PlannerState, meta


@reports_errors
async def ask_confirmation(state: PlannerState, runtime: Runtime[PlannerContext]) -> dict[str, Any]:
    """End the turn with the question; the call is remembered for the answer."""
    context, emitter = runtime.context, Emitter(runtime.context, runtime.stream_writer)
    call = state["pending_confirmation"]
    assert call is not None
    question = CONFIRMATION_QUESTION.format(
        tool=call["name"], call=f"{call['name']}({json.dumps(call['args'])})"
    )
    fields = meta(state, context.context_type)
    emitter.emit(AgentState, state="waiting_on_user", details=f"confirm {call['name']}", **fields)
    emitter.emit(Final, answer=question, usage=public_usage(state["usage"]), **fields)
    return {"messages": [AIMessage(question)], "answer": question}


async def await_confirmation(state: PlannerState) -> dict[str, Any]:
    """Wait for the user's answer (an interrupt); it becomes their message of the next turn.

    Nothing else happens here: a node resumed after an interrupt runs again from its start.
    """
    call = state["pending_confirmation"]
    answer = interrupt({"question": state["answer"], "call": dict(call) if call else None})
    return {"messages": [HumanMessage(answer if isinstance(answer, str) else json.dumps(answer))]}
