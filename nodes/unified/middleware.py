"""Middleware that puts ``create_agent`` on phasegraph's model factory, tool runtime and events."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any, cast

from langchain.agents.middleware import AgentMiddleware, ModelRequest, ModelResponse
from langchain.agents.middleware.types import ToolCallRequest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from langgraph.runtime import Runtime
from langgraph.types import Command

from nodes.context import RunContext
from nodes.emit import Emitter
from nodes.errors import PhasegraphError
from nodes.models import provider_error
from nodes.prompts import ARGS_TOO_LARGE
from nodes.tool_calls import execute_tool_call, trace_tool_registration


class RunContextMiddleware(AgentMiddleware[Any, RunContext]):
    """Takes model, system prompt and tools from the run Context, and runs tools through ToolRunner."""

    async def abefore_agent(self, state: Any, runtime: Runtime[RunContext]) -> dict[str, Any] | None:
        """Trace the tools this run offers, as every protocol does first."""
        trace_tool_registration(Emitter(runtime.context, runtime.stream_writer), runtime.context.registry())
        return None

    async def awrap_model_call(
        self,
        request: ModelRequest[RunContext],
        handler: Callable[[ModelRequest[RunContext]], Awaitable[ModelResponse[Any]]],
    ) -> ModelResponse[Any] | AIMessage:
        """Swap in the run's model (positioned by this turn's model calls), prompt and tools."""
        context = request.runtime.context
        model = context.resolve_model(call_index=_calls_this_turn(request.messages))
        try:
            return await handler(
                request.override(
                    model=model,
                    system_message=SystemMessage(context.system_prompt),
                    tools=list(context.registry()),
                )
            )
        except PhasegraphError:
            raise
        except Exception as exc:  # the provider failed: a redacted, typed error instead of its own
            raise provider_error(exc, model) from None

    async def awrap_tool_call(
        self,
        request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], Awaitable[ToolMessage | Command[Any]]],
    ) -> ToolMessage | Command[Any]:
        """Execute the call with the run's ToolRunner; errors come back as readable tool messages."""
        context = cast(RunContext, request.runtime.context)
        registry = context.registry()
        call = request.tool_call
        signature = registry.signature(call["name"], call["args"], context.project_id)
        emitter = Emitter(context, request.runtime.stream_writer)
        payload = {"id": call["id"] or "", "name": call["name"], "args": call["args"]}
        too_large = len(json.dumps(call["args"])) > context.max_tool_args_chars
        refusal = (
            ARGS_TOO_LARGE.format(name=call["name"], limit=context.max_tool_args_chars) if too_large else None
        )
        result = await execute_tool_call(context, emitter, registry, payload, signature, refusal=refusal)
        return ToolMessage(
            content=result.as_text(),
            tool_call_id=call["id"],
            name=call["name"],
            status="success" if result.status == "ok" else "error",
        )


def _calls_this_turn(messages: list[Any]) -> int:
    count = 0
    for message in reversed(messages):
        if isinstance(message, HumanMessage):
            break
        count += isinstance(message, AIMessage)
    return count
