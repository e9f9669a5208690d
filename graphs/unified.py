"""The unified fallback (seed 000): LangChain's ``create_agent`` loop with per-turn budgets."""

from __future__ import annotations

from typing import Any

from langchain.agents import create_agent
from langchain.agents.middleware import AgentMiddleware
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import Checkpointer

from phasegraph.nodes.models import DEMO_MODEL, make_model
from phasegraph.nodes.unified.answer import FinalAnswerMiddleware
from phasegraph.nodes.unified.approvals import ApprovalMiddleware
from phasegraph.nodes.unified.budget import TurnBudgetMiddleware
from phasegraph.nodes.unified.context import UnifiedContext
from phasegraph.nodes.unified.middleware import RunContextMiddleware
from phasegraph.tools import default_registry

NAME = "unified"
Context = UnifiedContext


def compile_graph(
    checkpointer: Checkpointer = None, *, interrupt_after: list[str] | None = None
) -> CompiledStateGraph:
    """Build the agent; model, tools and budgets of each run come from its Context via middleware."""
    middleware: list[AgentMiddleware[Any, Any]] = [
        RunContextMiddleware(),
        ApprovalMiddleware(),
        TurnBudgetMiddleware(),
        FinalAnswerMiddleware(),
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
