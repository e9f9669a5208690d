"""Starting a turn, and its two ends: the model's final answer, or one last tool-less call."""

from __future__ import annotations

from typing import Any

from langchain_core.messages import AIMessage, HumanMessage, SystemMessage
from langgraph.runtime import Runtime

from phasegraph.nodes.conversation import dialogue, user_turn
from phasegraph.nodes.emit import Emitter, reports_errors
from phasegraph.nodes.errors import ConfigurationError
from phasegraph.nodes.events import BudgetExhaustedEvent, Final, PhaseEnd, PhaseStart
from phasegraph.nodes.models import stream_model
from phasegraph.nodes.xml_contract.context import XmlContractContext
from phasegraph.nodes.xml_contract.contract import answer_text
from phasegraph.nodes.xml_contract.prompts import ANSWER_NOW, REFUSED_TWICE
from phasegraph.nodes.xml_contract.state import XmlContractState, progress


@reports_errors
async def start_turn(state: XmlContractState, runtime: Runtime[XmlContractContext]) -> dict[str, Any]:
    """Reset the turn's counters and give the model the user's message; services open at the first call.

    A thread's first turn takes the whole conversation the caller sent into the model's transcript
    (its user messages and answers); a later one adds the new message (by id, so a re-run adds it once).
    """
    last = state["messages"][-1] if state["messages"] else None
    if not isinstance(last, HumanMessage) or not last.text.strip():
        raise ConfigurationError("the conversation does not end with the user's task: say what to do")
    return {
        "transcript": [last] if state.get("transcript") else dialogue(state["messages"]),
        "turn_start": len(state["messages"]) - 1,
        "proposal": None,
        "steps": 0,
        "calls": {"ok": 0, "error": 0},
        "refused_in_a_row": 0,
        "model_calls": 0,
        "phase": "action_phase",
        "phase_index": state.get("phase_index", 0),
        "answer": "",
    }


@reports_errors
async def finish_turn(state: XmlContractState, runtime: Runtime[XmlContractContext]) -> dict[str, Any]:
    """The model answered: the text after "Final Answer:", or its prose when it wrote no block at all."""
    proposal = state["proposal"] or {}
    answer = proposal.get("final_answer")
    if answer is None:
        answer = answer_text(proposal.get("text", ""))
    Emitter(runtime.context, runtime.stream_writer).emit(
        Final, answer=answer, all_tools_failed=_all_failed(state), **progress(state)
    )
    await runtime.context.aclose()
    return {"answer": answer, "messages": [AIMessage(answer)]}


@reports_errors
async def answer_without_tools(
    state: XmlContractState, runtime: Runtime[XmlContractContext]
) -> dict[str, Any]:
    """The step budget is spent: one last call, with no stop sequences, writes the answer."""
    context, emitter = runtime.context, Emitter(runtime.context, runtime.stream_writer)
    meta = progress(state)
    emitter.emit(BudgetExhaustedEvent, budget="steps", limit=context.max_steps, used=state["steps"], **meta)
    return await _last_answer(state, runtime, HumanMessage(ANSWER_NOW.format(limit=context.max_steps)))


@reports_errors
async def answer_after_refusals(
    state: XmlContractState, runtime: Runtime[XmlContractContext]
) -> dict[str, Any]:
    """Two answers in a row could not run at all (one correction was had): the model answers without tools."""
    return await _last_answer(state, runtime, HumanMessage(REFUSED_TWICE))


async def _last_answer(
    state: XmlContractState, runtime: Runtime[XmlContractContext], ask: HumanMessage
) -> dict[str, Any]:
    context, emitter = runtime.context, Emitter(runtime.context, runtime.stream_writer)
    update: dict[str, Any] = {"phase": "action_phase", "phase_index": state["phase_index"] + 1}
    meta = progress({**state, **update})
    emitter.emit(PhaseStart, final=True, **meta)
    system = SystemMessage((state["proposal"] or {}).get("system", ""))
    model = context.resolve_model(state["model_calls"], user_turn(state["messages"]))
    chunks = [chunk async for chunk in stream_model(model, [system, *state["transcript"], ask])]
    text = "".join(chunk.text for chunk in chunks)
    answer = answer_text(text)
    emitter.emit(PhaseEnd, reason="answered", chunks_read=len(chunks), **meta)
    emitter.emit(Final, answer=answer, all_tools_failed=_all_failed(state), **meta)
    await context.aclose()
    return update | {
        "answer": answer,
        "messages": [AIMessage(answer)],
        "transcript": [ask, AIMessage(text)],
        "model_calls": state["model_calls"] + 1,
    }


def _all_failed(state: XmlContractState) -> bool:
    """The turn ran tools and every call failed: the answer rests on no tool output."""
    calls = state["calls"]
    return calls["error"] > 0 and calls["ok"] == 0
