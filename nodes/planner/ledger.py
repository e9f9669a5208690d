"""Usage and error rows: every model call and every caught error of a planner session, persisted."""

from __future__ import annotations

import time

from langgraph.config import get_config

from phasegraph.nodes.planner.context import PlannerContext
from phasegraph.nodes.planner.state import TurnUsage
from phasegraph.nodes.prices import cost_usd
from phasegraph.tools.planning import ErrorRow, UsageRow

#: The component name error rows carry.
COMPONENT = "planner"


def session_id(context: PlannerContext) -> str:
    """The session of the rows: the Context's, or the thread id (without the server's project prefix)."""
    if context.session_id:
        return context.session_id
    try:
        thread = str(get_config().get("configurable", {}).get("thread_id") or "")
    except RuntimeError:
        thread = ""
    return thread.removeprefix(f"{context.project_id}/") or context.request_id


async def record_call(
    context: PlannerContext,
    usage: TurnUsage,
    *,
    call_index: int,
    operation: str,
    profile: str,
    model: str,
    input_tokens: int | None,
    output_tokens: int | None,
    latency_ms: float,
    execution_mode: str | None = None,
) -> TurnUsage:
    """Store one model call's row and return the turn's usage with it added.

    Tokens come from the provider's usage metadata (0 when it reported none); cost from the price table.
    """
    tokens_in, tokens_out = input_tokens or 0, output_tokens or 0
    cost = cost_usd(model, tokens_in, tokens_out)
    row = UsageRow(
        scope=context.project_id,
        request_id=context.request_id,
        call_index=call_index,
        session_id=session_id(context),
        user_id=context.user_id,
        context_type=context.context_type,
        operation_type=operation,
        profile=profile,
        execution_mode=execution_mode,
        model=model,
        input_tokens=tokens_in,
        output_tokens=tokens_out,
        latency_ms=latency_ms,
        cost_usd=cost,
        created_at=time.time(),
    )
    await (await context.planning()).ledger.record_usage(row)
    return TurnUsage(
        calls=usage["calls"] + 1,
        input_tokens=usage["input_tokens"] + tokens_in,
        output_tokens=usage["output_tokens"] + tokens_out,
        cost_usd=round(usage["cost_usd"] + cost, 8),
    )


async def record_error(
    context: PlannerContext,
    index: int,
    *,
    stage: str,
    kind: str,
    message: str,
    tool_name: str | None = None,
    execution_mode: str | None = None,
) -> int:
    """Store one caught error's row; returns the turn's error count with it."""
    row = ErrorRow(
        scope=context.project_id,
        request_id=context.request_id,
        error_index=index,
        session_id=session_id(context),
        user_id=context.user_id,
        component=COMPONENT,
        stage=stage,
        tool_name=tool_name,
        context_type=context.context_type,
        execution_mode=execution_mode,
        kind=kind,
        message=message,
        created_at=time.time(),
    )
    await (await context.planning()).ledger.record_error(row)
    return index + 1


def public_usage(usage: TurnUsage) -> dict[str, object]:
    """The usage totals a ``final`` event carries (wire names)."""
    return {
        "calls": usage["calls"],
        "inputTokens": usage["input_tokens"],
        "outputTokens": usage["output_tokens"],
        "costUsd": usage["cost_usd"],
    }
