"""Run one tool call with its events and trace; shared by every protocol that executes tools."""

from __future__ import annotations

from collections import Counter
from collections.abc import Awaitable, Callable
from typing import Any

from opentelemetry.trace import Status, StatusCode

from phasegraph.nodes.approval import Verdict, ask, needs_approval
from phasegraph.nodes.context import RunContext
from phasegraph.nodes.emit import Emitter
from phasegraph.nodes.events import ToolCall, ToolResultEvent
from phasegraph.nodes.finished_calls import FinishedCalls
from phasegraph.nodes.redact import redactor
from phasegraph.nodes.telemetry import content, tool_span
from phasegraph.tools import ToolRegistry, ToolResult, ToolRunner
from phasegraph.tools.sources import policy_of

#: What the model reads of a call past its tool's ``max_calls_per_turn``.
OVER_LIMIT = "{name} may run at most {limit} time(s) per user turn; this call was not run."


class NotRun(ToolResult):
    """The result of a call refused and never invoked (a person rejected it, a limit, its arguments)."""


def ran(result: ToolResult) -> bool:
    """Whether the call behind ``result`` ran (a failed call ran; a refused one did not)."""
    return not isinstance(result, NotRun)


async def execute_tool_call(
    context: RunContext,
    emitter: Emitter,
    registry: ToolRegistry,
    call: dict[str, Any],
    signature: str,
    meta: dict[str, Any] | None = None,
    *,
    refusal: str | None = None,
    invoke: Callable[[], Awaitable[ToolResult]] | None = None,
    verdict: Verdict | None = None,
    turn_calls: Counter[str] | None = None,
) -> ToolResult:
    """Trace and emit ``tool_call``, run the tool, record it, trace the raw result and emit ``tool_result``.

    Each trace entry is written before its event: the run layer stores an event with the trace
    entries written before it, so a server killed mid-tool keeps the call in the trace whenever
    the event log shows it. A call the step finished before a crash (the same call id, the same
    call) is not run again: its recorded result is emitted and traced again, the trace entries
    marked ``replayed`` (the first ones may have been lost with the server, or not).

    Args:
        context: The run's context (workspace, project, output visibility).
        emitter: Where events and trace entries go.
        registry: Tools the run may call.
        call: ``{"id", "name", "args"}`` as the model sent it.
        signature: The call's canonical signature.
        meta: Extra fields for the events (phase metadata).
        refusal: Why the call must not run (its arguments were too large, ...); the result
            is then this error, which the model reads, and the tool is never invoked.
        invoke: Runs the call somewhere else than the registry's tools (an MCP service).
        verdict: A person's answer on the call, when its node asked before (a call whose tool needs
            approval and has none is asked here, before anything of it is emitted); a rejected call
            never runs, an edited one runs with the edited arguments (``call`` is updated in place).
        turn_calls: How many times each tool ran this user turn, for the tools' ``max_calls_per_turn``
            (counted up here; without it no per-turn limit applies).

    Returns:
        How the call ended: a ``NotRun`` when it was refused unrun (rejected, past a limit, ``refusal``).
    """
    meta = meta or {}
    call["name"] = registry.canonical(call["name"])  # a call made under the tool's wire name
    if refusal is None and verdict is None and needs_approval(registry, call["name"]):
        verdict = await ask(context, emitter, registry, call, meta)
    rejected = False
    if verdict is not None and refusal is None:
        if verdict.decision == "edit":
            call["args"] = verdict.args
            signature = registry.signature(call["name"], verdict.args, context.project_id)
        refusal, rejected = verdict.refusal(), not verdict.runs
    if refusal is None and turn_calls is not None:
        refusal = _over_limit(registry, call["name"], turn_calls)
    name, args, call_id = call["name"], call["args"], call["id"]
    finished = FinishedCalls.of_this_step() if refusal is None and call_id else None
    result = await finished.recorded(call_id, signature) if finished is not None else None
    # A replayed call is traced again, marked: its first entries may have died with the server.
    replayed = {"replayed": True} if result is not None else {}
    emitter.trace("tool_call", call_id=call_id, name=name, args=args, signature=signature, **replayed, **meta)
    emitter.emit(ToolCall, call_id=call_id, name=name, args=args, signature=signature, **meta)
    if result is None:
        result = await _run(context, registry, call, refusal, invoke)
        if finished is not None:  # durable before anything after this call (the next step of a block) runs
            await finished.record(call_id, signature, result)
    emitter.trace("tool_result", call_id=call_id, name=name, **result.model_dump(), **replayed, **meta)
    emitter.emit(
        ToolResultEvent,
        call_id=call_id,
        name=name,
        status=result.status,
        duration_ms=result.duration_ms,
        output=result.output if context.show_tool_outputs else None,
        error=result.error,
        not_run=None if refusal is None else "rejected" if rejected else "refused",
        **meta,
    )
    return result


async def _run(
    context: RunContext,
    registry: ToolRegistry,
    call: dict[str, Any],
    refusal: str | None,
    invoke: Callable[[], Awaitable[ToolResult]] | None,
) -> ToolResult:
    """The call's result: the refusal, the other runner's or the registry tool's, secrets redacted."""
    name, args = call["name"], call["args"]
    if refusal is not None:
        result: ToolResult = NotRun(status="error", error=refusal)
    elif invoke is not None:  # a call the protocol runs itself: its span is made here
        with tool_span(name, str(call["id"] or ""), args) as span:
            result = await invoke()
            if result.status == "error":
                span.set_status(Status(StatusCode.ERROR, (result.error or "")[:200]))
            if content.allowed():
                span.set_attribute("gen_ai.tool.call.result", content.text(result.as_text()))
    else:
        result = await ToolRunner(registry, context.tool_context()).run(name, args, call_id=call["id"])
    return redactor().model(result)  # a tool echoing a configured secret: neither model nor store sees it


def _over_limit(registry: ToolRegistry, name: str, turn_calls: Counter[str]) -> str | None:
    """Why a call is past its tool's per-turn limit (``None``: it runs, and is counted)."""
    found = registry.get(name)
    limit = policy_of(found).max_calls_per_turn if found is not None else None
    if limit is not None and turn_calls[name] >= limit:
        return OVER_LIMIT.format(name=name, limit=limit)
    turn_calls[name] += 1
    return None


def trace_tool_registration(emitter: Emitter, registry: ToolRegistry) -> None:
    """Record which tools the run offers the model (the trace's first entry)."""
    tools = [{"name": t.name, "description": t.description} for t in registry]
    unavailable = emitter.context.unavailable_tools()  # MCP servers that did not start, with why
    emitter.trace("tool_registration", tools=tools, **({"unavailable": unavailable} if unavailable else {}))
