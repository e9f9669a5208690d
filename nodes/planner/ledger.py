"""Usage and error rows: every model call (failed ones too) and every caught error of a session, persisted."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from langgraph.config import get_config

from phasegraph.nodes.errors import describe
from phasegraph.nodes.planner.context import PlannerContext
from phasegraph.nodes.planner.state import PlannerState, TurnUsage
from phasegraph.nodes.prices import cost_usd
from phasegraph.tools.planning import ErrorRow, UsageRow
from phasegraph.tools.planning.records import CallStatus

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
    status: CallStatus = "ok",
    error_kind: str | None = None,
) -> TurnUsage:
    """Store one model call's row and return the turn's usage with it added.

    Tokens come from the provider's usage metadata (0 when it reported none); cost from the price table.
    A call that failed or was cut off counts as a call too (``status`` and ``error_kind`` say how it ended).
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
        status=status,
        error_kind=error_kind,
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


@asynccontextmanager
async def failure_recorded(
    context: PlannerContext, state: PlannerState, *, operation: str, profile: str, model: str
) -> AsyncIterator[None]:
    """Around the turn's next model call: if it fails, store its usage row and an error row, then raise.

    The failed call's row has ``status`` error and the failure's kind; the error row is tagged
    ``planner_loop``. Cancellation (the turn's watchdog) is not a failure and passes untouched.
    """
    started = time.perf_counter()
    try:
        yield
    except Exception as exc:
        kind, message = describe(exc)  # a provider's error is built redacted; others get a generic text
        await record_call(
            context,
            state["usage"],
            call_index=state["model_calls"],
            operation=operation,
            profile=profile,
            model=model,
            input_tokens=None,
            output_tokens=None,
            latency_ms=round((time.perf_counter() - started) * 1000, 3),
            status="error",
            error_kind=kind,
        )
        await record_error(context, state["errors_logged"], stage="planner_loop", kind=kind, message=message)
        raise


def public_usage(usage: TurnUsage) -> dict[str, object]:
    """The usage totals a ``final`` event carries (wire names)."""
    return {
        "calls": usage["calls"],
        "inputTokens": usage["input_tokens"],
        "outputTokens": usage["output_tokens"],
        "costUsd": usage["cost_usd"],
    }
