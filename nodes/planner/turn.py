"""A turn's start and its endings: the answer, the clarifying question, and the guardrails' stops."""

from __future__ import annotations

from typing import Any, Literal

from langchain_core.messages import AIMessage
from langgraph.runtime import Runtime

from phasegraph.nodes.answers import all_tools_failed, fallback_answer
from phasegraph.nodes.emit import Emitter, reports_errors
from phasegraph.nodes.events import AgentState, BudgetExhaustedEvent, Final, LastTurnContext, Session
from phasegraph.nodes.planner.context import PlannerContext
from phasegraph.nodes.planner.guidance import GUIDANCE
from phasegraph.nodes.planner.ledger import public_usage, record_call, record_error, session_id
from phasegraph.nodes.planner.prompts import CLARIFYING_QUESTION, VIRTUAL_TOOLS
from phasegraph.nodes.planner.state import PlannerState, meta, model_position, no_usage, public_plan

#: Characters of the previous answer a turn's ``last_turn_context`` repeats.
SUMMARY_CHARS = 240


@reports_errors
async def start_turn(state: PlannerState, runtime: Runtime[PlannerContext]) -> dict[str, Any]:
    """Open the session: say who and what it is about, and what carries over from the last turn."""
    context, emitter = runtime.context, Emitter(runtime.context, runtime.stream_writer)
    await context.planning()
    guide, turn = GUIDANCE[context.context_type], state.get("turn", 0) + 1
    fields = {"context_type": context.context_type}
    emitter.emit(
        Session,
        session_id=session_id(context),
        user_id=context.user_id,
        profile=context.session_profile,
        entity_id=context.entity_id or None,
        intent=guide.intent,
        required_behaviors=list(guide.required_behaviors),
        tools=[*(await context.open_tools()).names(), *VIRTUAL_TOOLS],
        **fields,
    )
    pending_plan = state.get("pending_plan")
    if turn > 1:
        emitter.emit(
            LastTurnContext,
            turn=turn,
            summary=_summary(state),
            pending_plan=public_plan(pending_plan) if pending_plan else None,
            **fields,
        )
    return {
        "context_type": context.context_type,
        "turn": turn,
        "model_calls": state.get("model_calls", 0),
        "turn_first_call": state.get("model_calls", 0),
        "elapsed": 0.0,
        "pending": [],
        "tool_calls_used": 0,
        "results": [],
        "usage": no_usage(),
        "plan": None,
        "plan_request": None,
        "plan_results": [],
        "plans_made": state.get("plans_made", 0),
        "pending_plan": pending_plan,
        "stop": "",
        "answer": "",
        "review_outcomes": state.get("review_outcomes", {}),
        "errors_logged": 0,
        "tool_outputs": state.get("tool_outputs") or {},
    }


async def route_turn(state: PlannerState) -> Literal["blank", "plan"]:
    """A blank message gets a clarifying question; anything else goes to the planner."""
    last = state["messages"][-1] if state["messages"] else None
    return "plan" if last is not None and last.text.strip() else "blank"


@reports_errors
async def clarify(state: PlannerState, runtime: Runtime[PlannerContext]) -> dict[str, Any]:
    """Ask what the user wants, without a model call (recorded as a zero-token usage row)."""
    context, emitter = runtime.context, Emitter(runtime.context, runtime.stream_writer)
    profile = context.session_profile
    _, model = context.profile_model(profile, *model_position(state))
    await record_call(
        context,
        state["usage"],
        call_index=state["model_calls"],
        operation="clarifying_question",
        profile=profile,
        model=model,
        input_tokens=0,
        output_tokens=0,
        latency_ms=0.0,
    )
    fields = meta(state, context.context_type)
    emitter.emit(Final, answer=CLARIFYING_QUESTION, usage=public_usage(state["usage"]), **fields)
    await context.close_tools()  # the turn ends: no MCP session stays open
    return {"messages": [AIMessage(CLARIFYING_QUESTION)], "answer": CLARIFYING_QUESTION}


@reports_errors
async def finish_turn(state: PlannerState, runtime: Runtime[PlannerContext]) -> dict[str, Any]:
    """The planner answered without calling tools: its text is the turn's answer.

    An empty answer is replaced by one built from the turn's tool results (marked ``fallback``).
    """
    context, emitter = runtime.context, Emitter(runtime.context, runtime.stream_writer)
    last = state["messages"][-1]
    answer = last.text.strip() if isinstance(last, AIMessage) else ""
    fallback = not answer
    answer = answer or fallback_answer(state["results"])
    fields = meta(state, context.context_type)
    if state["pending_plan"] is not None:
        emitter.emit(
            AgentState, state="waiting_on_user", details="the drafted plan waits for your review", **fields
        )
    emitter.emit(
        Final,
        answer=answer,
        fallback=fallback,
        all_tools_failed=all_tools_failed(state["results"]),
        usage=public_usage(state["usage"]),
        **fields,
    )
    await context.close_tools()  # the turn ends: no MCP session stays open
    update: dict[str, Any] = {"answer": answer}
    return update | ({"messages": [AIMessage(answer)]} if fallback else {})


@reports_errors
async def stop_at_tool_cap(state: PlannerState, runtime: Runtime[PlannerContext]) -> dict[str, Any]:
    """The turn made as many tool calls as it may: warn, log it, answer from what was done."""
    limit = runtime.context.max_tool_calls
    note = f"This turn reached its limit of {limit} tool calls, so I stopped there."
    return await _stop(state, runtime, "tool_calls", limit, state["tool_calls_used"], note)


@reports_errors
async def stop_at_watchdog(state: PlannerState, runtime: Runtime[PlannerContext]) -> dict[str, Any]:
    """The turn ran out of time: warn, log it, answer from what was done."""
    limit = runtime.context.session_seconds
    note = f"This turn ran out of time ({limit:g} s), so I stopped there."
    return await _stop(state, runtime, "session_seconds", int(limit), int(state["elapsed"]), note)


async def _stop(
    state: PlannerState,
    runtime: Runtime[PlannerContext],
    budget: Literal["tool_calls", "session_seconds"],
    limit: int,
    used: int,
    note: str,
) -> dict[str, Any]:
    context, emitter = runtime.context, Emitter(runtime.context, runtime.stream_writer)
    fields = meta(state, context.context_type)
    emitter.emit(BudgetExhaustedEvent, budget=budget, limit=limit, used=used, **fields)
    kind = "tool_call_cap" if budget == "tool_calls" else "session_timeout"
    logged = await record_error(
        context,
        state["errors_logged"],
        stage="planner_loop",
        kind=kind,
        message=note,
        execution_mode=state["plan"]["execution_mode"] if state["plan"] else None,
    )
    answer = f"{note}\n{fallback_answer(state['results'])}"
    emitter.emit(
        Final,
        answer=answer,
        fallback=True,
        all_tools_failed=all_tools_failed(state["results"]),
        usage=public_usage(state["usage"]),
        **fields,
    )
    await context.close_tools()  # the turn ends: no MCP session stays open
    return {"messages": [AIMessage(answer)], "answer": answer, "errors_logged": logged}


def _summary(state: PlannerState) -> str:
    previous = state.get("answer", "")
    text = previous if len(previous) <= SUMMARY_CHARS else previous[: SUMMARY_CHARS - 1] + "…"
    return f"Turn {state.get('turn', 0)} answered: {text}" if text else "The previous turn gave no answer."
