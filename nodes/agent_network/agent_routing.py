"""ROUTE_TO_AGENT hands control over (a new control epoch when the agent changes); RESPOND ends the run."""

from __future__ import annotations

from typing import Any, Literal

from langchain_core.messages import AIMessage
from langgraph.runtime import Runtime

from phasegraph.nodes.agent_network.context import AgentNetworkContext
from phasegraph.nodes.agent_network.schemas import Instruction
from phasegraph.nodes.agent_network.state import AgentNetworkState, progress
from phasegraph.nodes.answers import all_tools_failed
from phasegraph.nodes.emit import Emitter, reports_errors
from phasegraph.nodes.events import BudgetExhaustedEvent, ErrorEvent, Final, Route


@reports_errors
async def route_to_agent(state: AgentNetworkState, runtime: Runtime[AgentNetworkContext]) -> dict[str, Any]:
    """Give control to the target agent, with the note the deciding agent left for it."""
    emitter = Emitter(runtime.context, runtime.stream_writer)
    details = (state["decision"] or {})["action_details"]
    source, target = state["current_agent"], details["target_agent"]
    epoch = state["control_epoch"] + (target != source)
    update: dict[str, Any] = {
        "phase": "agent_routing",
        "phase_index": state["phase_index"] + 1,
        "current_agent": target,
        "control_epoch": epoch,
        "handoff": details.get("message") or "",
    }
    emitter.emit(
        Route,
        from_agent=source,
        to_agent=target,
        message=details.get("message"),
        **progress({**state, **update}),
    )
    instruction = Instruction(
        step=state["steps"], epoch=state["control_epoch"], agent=source, action="ROUTE_TO_AGENT",
        target_agent=target, message=details.get("message"),
    )  # fmt: skip
    return update | {"instructions": [*state["instructions"], instruction.model_dump(mode="json")]}


@reports_errors
async def respond(state: AgentNetworkState, runtime: Runtime[AgentNetworkContext]) -> dict[str, Any]:
    """The agent in control answers the user: the run's one final event, then its logs in the trace."""
    emitter = Emitter(runtime.context, runtime.stream_writer)
    answer = (state["decision"] or {})["action_details"]["message"]
    agent = state["current_agent"]
    instruction = Instruction(
        step=state["steps"], epoch=state["control_epoch"], agent=agent, action="RESPOND", message=answer
    )
    emitter.trace(
        "execution_log", execution_log=state["execution_log"], tool_execution_log=state["tool_execution_log"]
    )
    failed = all_tools_failed(state["tool_execution_log"].values())
    emitter.emit(Final, answer=answer, all_tools_failed=failed, **progress(state))
    await runtime.context.close_tools()  # the turn ends here: its MCP sessions with it
    return {
        "answer": answer,
        "responder": agent,
        "messages": [AIMessage(answer, name=agent)],
        "instructions": [*state["instructions"], instruction.model_dump(mode="json")],
    }


@reports_errors
async def stop_at_max_steps(
    state: AgentNetworkState, runtime: Runtime[AgentNetworkContext]
) -> dict[str, Any]:
    """``max_steps`` decisions were made and no agent responded."""
    return await _stop(state, runtime, "steps")


@reports_errors
async def stop_at_max_tool_errors(
    state: AgentNetworkState, runtime: Runtime[AgentNetworkContext]
) -> dict[str, Any]:
    """``max_tool_errors`` tool calls failed or decisions were refused."""
    return await _stop(state, runtime, "tool_errors")


async def _stop(
    state: AgentNetworkState, runtime: Runtime[AgentNetworkContext], budget: Literal["steps", "tool_errors"]
) -> dict[str, Any]:
    """End the run without an answer: one error event that carries the transcript."""
    context, emitter = runtime.context, Emitter(runtime.context, runtime.stream_writer)
    errors = budget == "tool_errors"
    limit, used = (
        (context.max_tool_errors, state["tool_errors"]) if errors else (context.max_steps, state["steps"])
    )
    meta = progress(state)
    emitter.emit(BudgetExhaustedEvent, budget=budget, limit=limit, used=used, **meta)
    what = f"{used} failed tool calls or refused decisions" if errors else f"{used} agent steps"
    message = f"no agent responded within the budget: {what} (limit {limit}); the transcript shows each step"
    emitter.trace(
        "execution_log", execution_log=state["execution_log"], tool_execution_log=state["tool_execution_log"]
    )
    emitter.emit(
        ErrorEvent, kind="budget_exhausted", message=message, transcript=state["execution_log"], **meta
    )
    await context.close_tools()  # the turn ends here: its MCP sessions with it
    return {"answer": "", "responder": None}
