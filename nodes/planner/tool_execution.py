"""The planner's tool calls: real tools through the ToolRunner, meta-tools handed to the plan nodes.

Every call of a step is answered (a model must read one result per call it made): run, refused
with the reason, or left to the plan nodes, which answer the plan call when the plan is done.
"""

from __future__ import annotations

import asyncio
from typing import Any, Literal, cast

from langchain_core.messages import ToolMessage
from langgraph.runtime import Runtime

from phasegraph.nodes.answers import GatheredResult
from phasegraph.nodes.conversation import result_message
from phasegraph.nodes.emit import Emitter, reports_errors
from phasegraph.nodes.events import AgentState
from phasegraph.nodes.planner.clock import TurnClock
from phasegraph.nodes.planner.context import PlannerContext
from phasegraph.nodes.planner.ledger import record_error
from phasegraph.nodes.planner.prompts import (
    AWAITING_CONFIRMATION,
    CAP_NOTE,
    PLAN_PER_STEP,
    VIRTUAL_TOOLS,
    WATCHDOG_NOTE,
)
from phasegraph.nodes.planner.state import PendingCall, PlannerState, Stop, meta
from phasegraph.nodes.planner.transcript import not_run
from phasegraph.nodes.tool_calls import execute_tool_call
from phasegraph.tools import ToolResult
from phasegraph.tools.planning import is_destructive


@reports_errors
async def run_tools(state: PlannerState, runtime: Runtime[PlannerContext]) -> dict[str, Any]:
    """Run the planner's calls in order, meta-tools last, within the turn's call cap and time."""
    context, emitter = runtime.context, Emitter(runtime.context, runtime.stream_writer)
    await context.planning()
    clock, fields = TurnClock(state["elapsed"], context.session_seconds), meta(state, context.context_type)
    registry = context.registry()
    used, stop = state["tool_calls_used"], state["stop"]
    messages: list[ToolMessage] = []
    outputs = dict(state.get("tool_outputs") or {})
    results: list[GatheredResult] = []
    errors = state["errors_logged"]
    update: dict[str, Any] = {}
    calls = sorted(state["pending"], key=lambda c: c["name"] in VIRTUAL_TOOLS)  # stable: order kept otherwise
    for call in calls:
        if clock.expired:
            stop = "watchdog"
        if stop in ("watchdog", "tool_cap"):
            limit = context.session_seconds if stop == "watchdog" else context.max_tool_calls
            messages.append(
                _answer(call, (WATCHDOG_NOTE if stop == "watchdog" else CAP_NOTE).format(limit=limit))
            )
            continue
        if used >= context.max_tool_calls:
            stop = "tool_cap"
            messages.append(_answer(call, CAP_NOTE.format(limit=context.max_tool_calls)))
            continue
        used += 1
        if call["name"] in VIRTUAL_TOOLS:
            meta_update, note = _meta_call(state, call, stop, update)
            update |= meta_update
            stop = update.pop("stop", stop)
            if note is not None:
                messages.append(_answer(call, note))
            continue
        signature = registry.signature(call["name"], call["args"], context.project_id)
        tool = registry.get(call["name"])
        gated = tool is not None and is_destructive(tool) and context.context_type == "project"
        if gated and signature not in state["confirmed"] and "error" not in call:
            update["pending_confirmation"] = PendingCall(**call, signature=signature)
            stop = "confirm"
            messages.append(_answer(call, AWAITING_CONFIRMATION))
            continue
        emitter.emit(AgentState, state="executing_tool", details=call["name"], **fields)
        result = await _run(context, emitter, registry, call, signature, fields, clock.remaining)
        if result.status == "error":
            errors = await record_error(
                context,
                errors,
                stage="tool_execution",
                kind="tool_error",
                message=result.error or "",
                tool_name=call["name"],
            )
        if gated:
            update["pending_confirmation"] = None  # the confirmed call ran
        outputs[call["id"]] = result.as_text()
        messages.append(result_message(dict(call), result, show_output=context.show_tool_outputs))
        results.append(
            GatheredResult(name=call["name"], args=call["args"], status=result.status, text=result.as_text())
        )
    return update | {
        "messages": messages,
        "results": [*state["results"], *results],
        "tool_calls_used": used,
        "pending": [],
        "stop": stop,
        "elapsed": clock.elapsed,
        "errors_logged": errors,
        "tool_outputs": outputs,
    }


async def route_after_tools(
    state: PlannerState,
) -> Literal["next", "tool_cap", "watchdog", "confirm", "plan", "run_plan"]:
    """Back to the planner, unless a guardrail, a confirmation or a plan takes the turn elsewhere."""
    if state["stop"] in ("watchdog", "tool_cap", "confirm", "run_plan"):
        return cast(Literal["watchdog", "tool_cap", "confirm", "run_plan"], state["stop"])
    return "plan" if state["plan_request"] is not None else "next"


def _meta_call(
    state: PlannerState, call: PendingCall, stop: Stop, update: dict[str, Any]
) -> tuple[dict[str, Any], str | None]:
    """Hand a meta-tool call to the plan nodes, or say why it cannot be; a plan call is answered later."""
    if "error" in call:
        return {}, f"ERROR: {call['error']}"
    if stop == "confirm" or "plan_request" in update or "plan" in update:
        return {}, PLAN_PER_STEP
    if call["name"] == "agent_create_plan":
        return {"plan_request": call}, None
    plan, wanted = state["pending_plan"], call["args"].get("plan_id")
    if plan is None or plan["plan_id"] != wanted:
        waiting = f"plan {plan['plan_id']!r} waits for review" if plan else "no plan waits for review"
        return {}, f"ERROR: there is no drafted plan {wanted!r} to run ({waiting})."
    return {
        "plan": {**plan, "call_id": call["id"], "status": "approved"},
        "pending_plan": None,
        "stop": "run_plan",
    }, None


async def _run(
    context: PlannerContext,
    emitter: Emitter,
    registry: Any,
    call: PendingCall,
    signature: str,
    fields: dict[str, Any],
    seconds: float,
) -> ToolResult:
    """One real tool call, its events and trace; the watchdog's remaining time bounds it."""
    plain = {"id": call["id"], "name": call["name"], "args": call["args"]}
    try:
        async with asyncio.timeout(seconds):
            return await execute_tool_call(
                context, emitter, registry, plain, signature, fields, refusal=call.get("error")
            )
    except TimeoutError:
        return ToolResult(status="error", error=WATCHDOG_NOTE.format(limit=context.session_seconds))


def _answer(call: PendingCall, text: str) -> ToolMessage:
    """A call that did not run (a guardrail, a confirmation, a broken call), or a meta-tool's refusal."""
    return not_run(call, text)
