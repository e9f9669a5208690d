"""The planner's model call: one streaming step of the session, with every tool and the meta-tools bound."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any, Literal

from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage, SystemMessage
from langgraph.runtime import Runtime

from phasegraph.nodes.emit import Emitter, reports_errors
from phasegraph.nodes.events import AgentState, TextChunk
from phasegraph.nodes.models import stream_model
from phasegraph.nodes.planner.clock import TurnClock
from phasegraph.nodes.planner.context import PlannerContext
from phasegraph.nodes.planner.guidance import guidance_text
from phasegraph.nodes.planner.ledger import failure_recorded, record_call
from phasegraph.nodes.planner.prompts import (
    NO_TOOLS_REMINDER,
    PENDING_PLAN_NOTE,
    SYSTEM_PROMPT,
    virtual_tool_schemas,
)
from phasegraph.nodes.planner.state import PendingCall, PlannerState, meta, model_position
from phasegraph.nodes.planner.transcript import session
from phasegraph.nodes.prompts import ARGS_TOO_LARGE
from phasegraph.nodes.streaming import reply_message
from phasegraph.nodes.structured import hit_token_limit

OPERATION = "planner_stream"
CUT_OFF = (
    "The {name} call was cut off at the model's token limit, so its arguments may be incomplete; it was not "
    "run. Make the call again with shorter arguments."
)


@reports_errors
async def call_planner(state: PlannerState, runtime: Runtime[PlannerContext]) -> dict[str, Any]:
    """Stream one planner step: its text goes out as it arrives, its tool calls wait for ``run_tools``.

    The watchdog cuts a step that outlives the turn's time; the cut call is still a usage row, and so
    is a call that fails (with an error row) before the failure ends the run.
    """
    context, emitter = runtime.context, Emitter(runtime.context, runtime.stream_writer)
    clock, fields = TurnClock(state["elapsed"], context.session_seconds), meta(state, context.context_type)
    emitter.emit(AgentState, state="thinking", **fields)
    registry = await context.open_tools()
    tools = [*registry.schemas(), *virtual_tool_schemas()] if len(registry) else []
    profile = context.session_profile
    model, name = context.profile_model(profile, *model_position(state))
    bound = model.bind_tools(tools) if tools else model
    reply: AIMessageChunk | None = None
    started, timed_out = time.perf_counter(), False
    try:
        async with (
            asyncio.timeout(clock.remaining),
            failure_recorded(context, state, operation=OPERATION, profile=profile, model=name),
        ):
            async for chunk in stream_model(bound, _prompt(context, state, bool(tools))):
                if chunk.text:
                    emitter.emit(TextChunk, text=chunk.text, **fields)
                reply = chunk if reply is None else reply + chunk
    except TimeoutError:
        timed_out = True
    usage_meta = reply.usage_metadata if reply is not None and not timed_out else None
    usage = await record_call(
        context,
        state["usage"],
        call_index=state["model_calls"],
        operation=OPERATION,
        profile=profile,
        model=name,
        input_tokens=usage_meta["input_tokens"] if usage_meta else None,
        output_tokens=usage_meta["output_tokens"] if usage_meta else None,
        latency_ms=round((time.perf_counter() - started) * 1000, 3),
        status="timeout" if timed_out else "ok",
        error_kind="session_timeout" if timed_out else None,
    )
    update: dict[str, Any] = {
        "model_calls": state["model_calls"] + 1,
        "usage": usage,
        "elapsed": clock.elapsed,
    }
    if timed_out:
        return update | {"pending": [], "stop": "watchdog"}
    message = reply_message(reply)  # a call cut off mid-argument is invalid, never closed by guessing
    return update | {"messages": [message], "pending": _calls(message, context.max_tool_args_chars)}


async def route_after_planner(state: PlannerState) -> Literal["tools", "answer", "watchdog"]:
    """Tool calls go to ``run_tools``; plain text ends the turn; the watchdog ends it with what was done."""
    if state["stop"] == "watchdog":
        return "watchdog"
    return "tools" if state["pending"] else "answer"


def _prompt(context: PlannerContext, state: PlannerState, has_tools: bool) -> list[BaseMessage]:
    notes = [guidance_text(context.context_type, context.entity_id)]
    if not has_tools:
        notes.append(NO_TOOLS_REMINDER)
    if (plan := state["pending_plan"]) is not None:
        notes.append(PENDING_PLAN_NOTE.format(plan_id=plan["plan_id"], objective=plan["objective"]))
    system = SystemMessage(SYSTEM_PROMPT.format(guidance="\n\n".join(notes)))
    return [system, *session(state["messages"], state.get("tool_outputs") or {})]


def _calls(message: AIMessage, max_chars: int) -> list[PendingCall]:
    """Every call of the reply; a broken or oversized one carries the error the model will read."""
    calls: list[PendingCall] = []
    cut = hit_token_limit(message)
    for call in message.tool_calls:
        size = len(json.dumps(call["args"]))
        pending = PendingCall(id=call["id"] or f"call_{len(calls) + 1}", name=call["name"], args=call["args"])
        if cut:  # streamed arguments are closed silently: what parses may be half of what was meant
            pending["args"], pending["error"] = {}, CUT_OFF.format(name=call["name"])
        elif size > max_chars:
            pending["args"], pending["error"] = {}, ARGS_TOO_LARGE.format(name=call["name"], limit=max_chars)
        calls.append(pending)
    for broken in message.invalid_tool_calls:
        name, raw = broken.get("name") or "", (broken.get("args") or "")[:200]
        error = broken.get("error") or f"the arguments of {name or 'a call'} were not valid JSON: {raw!r}"
        calls.append(
            PendingCall(id=broken.get("id") or f"call_{len(calls) + 1}", name=name, args={}, error=error)
        )
    return calls
