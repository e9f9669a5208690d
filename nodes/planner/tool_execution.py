"""The planner's tool calls: real tools through the ToolRunner, meta-tools handed to the plan nodes.

Every call of a step is answered (a model must read one result per call it made): run, refused
with the reason (a guardrail, a broken call, a person's rejection), or left to the plan nodes, which
answer the plan call when the plan is done. Calls that wait for approval (``approvals``) are asked
for at the node's start.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any, Literal, cast

from langchain_core.messages import ToolMessage
from langgraph.runtime import Runtime

from phasegraph.nodes.answers import GatheredResult
from phasegraph.nodes.approval import Verdict
from phasegraph.nodes.conversation import refused_message, result_message
from phasegraph.nodes.emit import Emitter, reports_errors
from phasegraph.nodes.events import AgentState
from phasegraph.nodes.planner.approvals import EDITED, approve_planner_calls
from phasegraph.nodes.planner.clock import TurnClock
from phasegraph.nodes.planner.context import PlannerContext
from phasegraph.nodes.planner.ledger import record_error
from phasegraph.nodes.planner.prompts import CAP_NOTE, PLAN_PER_STEP, VIRTUAL_TOOLS, WATCHDOG_NOTE
from phasegraph.nodes.planner.state import PendingCall, PlannerState, meta
from phasegraph.nodes.planner.transcript import not_run
from phasegraph.nodes.tool_calls import execute_tool_call, ran
from phasegraph.tools import ToolRegistry, ToolResult


@reports_errors
async def run_tools(state: PlannerState, runtime: Runtime[PlannerContext]) -> dict[str, Any]:
    """Run the planner's calls in order, meta-tools last, within the turn's call cap and time.

    Calls that wait for a person's approval are asked first, all of them, before anything is emitted
    or run (a resumed node runs again from its start); the wait does not count against the watchdog.
    """
    context, emitter = runtime.context, Emitter(runtime.context, runtime.stream_writer)
    await context.planning()
    registry, fields = await context.open_tools(), meta(state, context.context_type)
    calls = sorted(state["pending"], key=lambda c: c["name"] in VIRTUAL_TOOLS)  # stable: order kept otherwise
    verdicts = await approve_planner_calls(
        context, emitter, registry, _runnable(calls, state, context), fields
    )
    clock = TurnClock(state["elapsed"], context.session_seconds)
    used, stop = state["tool_calls_used"], state["stop"]
    messages: list[ToolMessage] = []
    outputs = dict(state.get("tool_outputs") or {})
    results: list[GatheredResult] = []
    errors = state["errors_logged"]
    update: dict[str, Any] = {}
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
        verdict = verdicts.get(call["id"])
        rejected = verdict is not None and not verdict.runs
        used += 0 if rejected else 1  # a person's rejection is no tool call: the corrected one may still run
        if call["name"] in VIRTUAL_TOOLS:
            meta_update, note = _meta_call(state, call, update)
            update |= meta_update
            stop = update.pop("stop", stop)
            if note is not None:
                messages.append(_answer(call, note))
            continue
        emitter.emit(AgentState, state="executing_tool", details=call["name"], **fields)
        plain: dict[str, Any] = {"id": call["id"], "name": call["name"], "args": call["args"]}
        result = await _run(context, emitter, registry, plain, call.get("error"), verdict, fields, clock)
        if result.status == "error" and not rejected:  # a rejection is no tool error
            errors = await record_error(
                context,
                errors,
                stage="tool_execution",
                kind="tool_error",
                message=result.error or "",
                tool_name=plain["name"],
            )
        text = result.as_text()
        edited = verdict is not None and verdict.decision == "edit"
        outputs[call["id"]] = EDITED.format(args=json.dumps(plain["args"])) + text if edited else text
        messages.append(
            refused_message(plain, result.error or "", rejected=True)
            if rejected
            else result_message(plain, result, show_output=context.show_tool_outputs)
        )
        results.append(
            GatheredResult(
                name=plain["name"], args=plain["args"], status=result.status, text=text, ran=ran(result)
            )
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


def _runnable(calls: list[PendingCall], state: PlannerState, context: PlannerContext) -> list[dict[str, Any]]:
    """The real tool calls ``run_tools`` will try (within the cap and time, not broken): those to ask for."""
    if state["stop"] in ("watchdog", "tool_cap") or state["elapsed"] >= context.session_seconds:
        return []
    room = max(0, context.max_tool_calls - state["tool_calls_used"])
    return [dict(c) for c in calls[:room] if c["name"] not in VIRTUAL_TOOLS and "error" not in c]


async def route_after_tools(
    state: PlannerState,
) -> Literal["next", "tool_cap", "watchdog", "plan", "run_plan"]:
    """Back to the planner, unless a guardrail or a plan takes the turn elsewhere."""
    if state["stop"] in ("watchdog", "tool_cap", "run_plan"):
        return cast(Literal["watchdog", "tool_cap", "run_plan"], state["stop"])
    return "plan" if state["plan_request"] is not None else "next"


def _meta_call(
    state: PlannerState, call: PendingCall, update: dict[str, Any]
) -> tuple[dict[str, Any], str | None]:
    """Hand a meta-tool call to the plan nodes, or say why it cannot be; a plan call is answered later."""
    if "error" in call:
        return {}, f"ERROR: {call['error']}"
    if "plan_request" in update or "plan" in update:
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
    registry: ToolRegistry,
    call: dict[str, Any],
    refusal: str | None,
    verdict: Verdict | None,
    fields: dict[str, Any],
    clock: TurnClock,
) -> ToolResult:
    """One real tool call, its events and trace; the watchdog's remaining time bounds it.

    ``call`` is updated in place when a person edited its arguments.
    """
    signature = registry.signature(call["name"], call["args"], context.project_id)
    try:
        async with asyncio.timeout(clock.remaining):
            return await execute_tool_call(
                context, emitter, registry, call, signature, fields, refusal=refusal, verdict=verdict
            )
    except TimeoutError:
        return ToolResult(status="error", error=WATCHDOG_NOTE.format(limit=context.session_seconds))


def _answer(call: PendingCall, text: str) -> ToolMessage:
    """A call that did not run (a guardrail, a broken call), or a meta-tool's refusal."""
    return not_run(call, text)
