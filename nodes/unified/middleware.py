"""Middleware that puts ``create_agent`` on phasegraph's model factory, tool runtime and events."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import AsyncGenerator, Awaitable, Callable, Sequence
from contextlib import aclosing
from typing import Any, cast

from langchain.agents.middleware import AgentMiddleware, ModelRequest, ModelResponse
from langchain.agents.middleware.types import ToolCallRequest
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    AnyMessage,
    BaseMessage,
    SystemMessage,
    ToolMessage,
)
from langgraph.runtime import Runtime
from langgraph.types import Command

from phasegraph.nodes.conversation import tool_counts, user_turn
from phasegraph.nodes.emit import Emitter, errors_reported
from phasegraph.nodes.events import BudgetExhaustedEvent, TextChunk
from phasegraph.nodes.models import stream_model
from phasegraph.nodes.prompts import ARGS_TOO_LARGE
from phasegraph.nodes.streaming import PartialCall, absorb_call_pieces
from phasegraph.nodes.tool_calls import execute_tool_call, ran, trace_tool_registration
from phasegraph.nodes.unified.approvals import rejected_calls, verdict_of
from phasegraph.nodes.unified.budget import over_budget, turn_usage
from phasegraph.nodes.unified.context import UnifiedContext
from phasegraph.nodes.unified.outputs import UnifiedState, answered_call, model_view
from phasegraph.nodes.unified.prompts import BUDGET_REFUSAL
from phasegraph.tools import ToolRegistry


class RunContextMiddleware(AgentMiddleware[Any, UnifiedContext]):
    """Takes model, system prompt and tools from the run Context, and runs tools through ToolRunner."""

    state_schema = UnifiedState

    async def abefore_agent(self, state: Any, runtime: Runtime[UnifiedContext]) -> dict[str, Any] | None:
        """Trace the tools this run offers, as every protocol does first."""
        emitter = Emitter(runtime.context, runtime.stream_writer)
        with errors_reported(emitter):
            trace_tool_registration(emitter, await runtime.context.open_tools())
        return None

    async def awrap_model_call(
        self,
        request: ModelRequest[UnifiedContext],
        handler: Callable[[ModelRequest[UnifiedContext]], Awaitable[ModelResponse[Any]]],
    ) -> ModelResponse[Any]:
        """Stream the run's model (positioned by this turn's calls) as ``text`` events.

        The model is called here instead of through ``handler`` (which only invokes it), so the
        graph itself streams ``text`` to every client. Once a budget is spent the call answers
        with tools unbound and the budget notice. The model reads every tool output, also those
        the thread's messages hide.
        """
        context = request.runtime.context
        emitter = Emitter(context, request.runtime.stream_writer)
        outputs = cast(dict[str, str], request.state.get("tool_outputs") or {})
        with errors_reported(emitter):
            return await _answer(context, request.messages, emitter, outputs)

    async def awrap_tool_call(
        self,
        request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], Awaitable[ToolMessage | Command[Any]]],
    ) -> ToolMessage | Command[Any]:
        """Execute the call with the run's ToolRunner; errors come back as readable tool messages.

        The message says what ran and how it ended; the output is in it only with
        ``show_tool_outputs``, and is otherwise kept apart for the model (``outputs.py``).
        """
        context = cast(UnifiedContext, request.runtime.context)
        registry = await context.open_tools()
        call = request.tool_call
        signature = registry.signature(call["name"], call["args"], context.project_id)
        emitter = Emitter(context, request.runtime.stream_writer)
        payload: dict[str, Any] = {"id": call["id"] or "", "name": call["name"], "args": call["args"]}
        refusal = _refusal(request, context)
        verdict = verdict_of(request.state, payload["id"])  # asked after the model, before any call ran
        rejected = refusal is None and verdict is not None and not verdict.runs
        result = await execute_tool_call(
            context,
            emitter,
            registry,
            payload,
            signature,
            refusal=refusal,
            verdict=verdict,
            turn_calls=_turn_calls(request.state, payload["id"], registry),
        )
        refusal = None if ran(result) else result.error or ""  # rejected, past a per-turn limit, ...
        return answered_call(
            payload, result, refusal=refusal, show_output=context.show_tool_outputs, rejected=rejected
        )


#: Where a model message keeps, by call id, why calls it streamed must not run (too large, cut off).
REFUSED_KEY = "phasegraph_refused_calls"


def _turn_calls(state: Any, call_id: str, registry: ToolRegistry) -> Counter[str]:
    """The turn's calls of each tool before ``call_id``: those answered, then its message's earlier calls.

    The tool node runs a message's calls concurrently, so each counts its siblings by position rather
    than by what has finished: per-turn limits hold whichever finishes first. A rejected sibling never
    runs, so it is not counted.
    """
    messages: Sequence[BaseMessage] = state["messages"]
    used, rejected = tool_counts(messages), rejected_calls(state)
    last = next((m for m in reversed(messages) if isinstance(m, AIMessage) and m.tool_calls), None)
    for sibling in last.tool_calls if last is not None else []:
        if sibling["id"] == call_id:
            break
        if sibling["id"] not in rejected:
            used[registry.canonical(sibling["name"])] += 1
    return used


def _refused_calls(messages: Sequence[BaseMessage]) -> dict[str, str]:
    """Why each call of the last model message that must not run is refused, by call id."""
    last = next((m for m in reversed(messages) if isinstance(m, AIMessage)), None)
    return dict(last.response_metadata.get(REFUSED_KEY, {})) if last is not None else {}


async def _answer(
    context: UnifiedContext, messages: list[AnyMessage], emitter: Emitter, outputs: dict[str, str]
) -> ModelResponse[Any]:
    """One model call: tools bound within budget, else tools unbound with the budget notice."""
    usage = turn_usage(messages)
    model = context.resolve_model(call_index=usage.model_calls, user_turn=user_turn(messages))
    prompt = context.system_prompt
    spent = usage.spent(context)
    if spent is not None:
        emitter.emit(BudgetExhaustedEvent, budget=spent.budget, limit=spent.limit, used=spent.used)
        prompt = f"{prompt}\n\n{context.budget_notice}"
    else:
        model = cast(BaseChatModel, model.bind_tools((await context.open_tools()).schemas()))
    message = await _stream_text(
        model, [SystemMessage(prompt), *model_view(messages, outputs)], emitter, context.max_tool_args_chars
    )
    return ModelResponse(result=[message])


def _refusal(request: ToolCallRequest, context: UnifiedContext) -> str | None:
    """Why the call must not run: past the turn's tool budget, arguments too large, cut off or not JSON."""
    call = request.tool_call
    if over_budget(request.state["messages"], call["id"] or "", context, rejected_calls(request.state)):
        return BUDGET_REFUSAL.format(limit=context.max_tool_calls)
    if (refusal := _refused_calls(request.state["messages"]).get(call["id"] or "")) is not None:
        return refusal
    if len(json.dumps(call["args"])) > context.max_tool_args_chars:
        return ARGS_TOO_LARGE.format(name=call["name"], limit=context.max_tool_args_chars)
    return None


async def _stream_text(
    model: Any, messages: Sequence[BaseMessage], emitter: Emitter, max_args_chars: int
) -> AIMessage:
    """Stream the model, emitting its text as it arrives, and return the whole message.

    Text and call arguments are gathered as pieces and joined once (linear in the stream), and
    a call whose arguments grow past ``max_args_chars`` closes the stream at once. It, and any
    call whose arguments are not one complete JSON object (cut off, whatever the finish reason),
    is kept with empty arguments and named in ``response_metadata`` so it is refused unrun.
    """
    text: list[str] = []
    calls: dict[int, PartialCall] = {}
    oversized: list[PartialCall] = []
    chunks = cast(AsyncGenerator[AIMessageChunk, None], stream_model(model, messages))
    async with aclosing(chunks) as stream:
        async for chunk in stream:
            if piece := chunk.text:
                emitter.emit(TextChunk, text=piece)
                text.append(piece)
            absorb_call_pieces(chunk, calls)
            if oversized := [c for c in calls.values() if c.size > max_args_chars]:
                break
    refused = {c.id: ARGS_TOO_LARGE.format(name=c.name, limit=max_args_chars) for c in oversized}
    refused |= {c.id: why for c in calls.values() if c.id not in refused and (why := c.refusal()) is not None}
    tool_calls = [
        {"id": c.id, "name": c.name, "args": {} if c.id in refused else c.parsed_args(ended=True)}
        for c in sorted(calls.values(), key=lambda c: c.index)
    ]
    return AIMessage(
        content="".join(text),
        tool_calls=tool_calls,
        response_metadata={REFUSED_KEY: refused} if refused else {},
    )
