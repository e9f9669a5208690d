"""Structured model calls of the plan meta-tool, each accounted for as a usage row."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage
from pydantic import BaseModel

from phasegraph.nodes.errors import InvalidModelOutput, ProviderError
from phasegraph.nodes.planner.context import PlannerContext
from phasegraph.nodes.planner.guidance import ProfileName
from phasegraph.nodes.planner.ledger import record_call
from phasegraph.nodes.planner.state import TurnUsage
from phasegraph.nodes.structured import ModelCall, ask_structured

M = TypeVar("M", bound=BaseModel)


@dataclass
class Asked(Generic[M]):
    """The answer (or why there is none) and the counters after the calls it took."""

    value: M | None
    problem: str | None
    model_calls: int
    usage: TurnUsage
    retries: int


async def ask_accounted(
    context: PlannerContext,
    model_calls: int,
    usage: TurnUsage,
    prompt: Sequence[BaseMessage],
    schema: type[M],
    *,
    profile: ProfileName,
    operation: str,
    execution_mode: str,
    position: tuple[int, int],
    check: Callable[[M], str | None] | None = None,
    role: str = "",
) -> Asked[M]:
    """Ask for a ``schema`` answer (one corrective retry) and store a usage row per model call.

    ``model_calls`` keys the rows (calls of the thread); ``position`` (the call index within the user
    message, and which message it is) positions a scripted model. A ``role`` (``reviewer``) takes
    the model the project file gives it, if any (``PlannerContext.profile_model``).

    An unusable answer or a provider failure is returned as ``problem``, for the planner to read; the
    call that failed is a usage row too (``status`` error), after those that answered.
    """
    calls: list[ModelCall] = []
    names: list[str] = []
    started = time.perf_counter()

    def model_for(index: int) -> BaseChatModel:
        model, name = context.profile_model(profile, position[0] + index, position[1], role)
        names.append(name)
        return model

    value, problem, retries, failed = None, None, 0, None
    try:
        answer = await ask_structured(
            model_for, prompt, schema, method=context.structured_output, check=check, on_call=calls.append
        )
        value, retries = answer.value, len(answer.rejected)
    except (InvalidModelOutput, ProviderError) as exc:
        problem, retries = str(exc), max(0, len(calls) - 1)
        if isinstance(exc, ProviderError):  # the call after those that answered failed: no tokens
            spent = (time.perf_counter() - started) * 1000 - sum(c.latency_ms for c in calls)
            failed = ModelCall(len(calls), input_tokens=None, output_tokens=None, latency_ms=round(spent, 3))
    for call in [*calls, *([failed] if failed else [])]:
        usage = await record_call(
            context,
            usage,
            call_index=model_calls + call.index,
            operation=operation,
            profile=profile,
            model=names[call.index],
            input_tokens=call.input_tokens,
            output_tokens=call.output_tokens,
            latency_ms=call.latency_ms,
            execution_mode=execution_mode,
            status="error" if call is failed else "ok",
            error_kind=ProviderError.kind if call is failed else None,
        )
    return Asked(value, problem, model_calls + len(names), usage, retries)
