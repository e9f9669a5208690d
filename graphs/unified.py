"""The unified fallback (seed 000): LangChain's ``create_agent`` loop with call-limit middleware."""

from __future__ import annotations

from typing import Any

from langchain.agents import create_agent
from langchain.agents.middleware import AgentMiddleware, ModelCallLimitMiddleware, ToolCallLimitMiddleware
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import Checkpointer

from nodes.models import DEMO_MODEL, make_model
from nodes.unified.context import UnifiedContext
from nodes.unified.middleware import RunContextMiddleware
from tools import default_registry

NAME = "unified"
Context = UnifiedContext

#: Soft stops: model calls and tool calls allowed per run.
MODEL_CALL_LIMIT = 10
TOOL_CALL_LIMIT = 8


def compile_graph(
    checkpointer: Checkpointer = None,
    *,
    interrupt_after: list[str] | None = None,
    model_call_limit: int = MODEL_CALL_LIMIT,
    tool_call_limit: int = TOOL_CALL_LIMIT,
) -> CompiledStateGraph:
    """Build the agent; the model and tools of each run come from its Context via middleware."""
    middleware: list[AgentMiddleware[Any, Any]] = [
        RunContextMiddleware(),
        ModelCallLimitMiddleware(run_limit=model_call_limit, exit_behavior="end"),
        ToolCallLimitMiddleware(run_limit=tool_call_limit, exit_behavior="continue"),
    ]
    return create_agent(
        model=make_model(DEMO_MODEL),  # replaced per run by RunContextMiddleware
        tools=list(default_registry()),
        middleware=middleware,
        context_schema=UnifiedContext,
        checkpointer=checkpointer,
        interrupt_after=interrupt_after,
        name=NAME,
    )


graph = compile_graph()
