"""Structured answers from a chat model: tool calling first, JSON text as the fallback, one corrective retry.

Protocols whose phases answer with a pydantic model (goal_pursuit's plans and decisions) ask
through ``ask_structured``. It uses LangChain's ``with_structured_output`` (the provider's tool
calling), reads a JSON object from the answer's text when a server ignores tools, and, when the
answer cannot be used (broken JSON, arguments cut off before their JSON ended, wrong schema, empty,
oversized, or refused by the protocol's own ``check``), asks once more with the reason. A second
unusable answer is an ``InvalidModelOutput``, never a crash or a loop.
"""

from __future__ import annotations

import json
import re
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, Literal, TypeVar

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.runnables.config import ensure_config, merge_configs
from pydantic import BaseModel, ValidationError

from phasegraph.nodes.errors import InvalidModelOutput, PhasegraphError, ProviderError
from phasegraph.nodes.models import provider_error
from phasegraph.nodes.streaming import StreamedCalls

M = TypeVar("M", bound=BaseModel)
StructuredMethod = Literal["auto", "tool_calling", "json_mode"]

#: Statuses with which a server says it does not accept tools (then "auto" asks for JSON text).
TOOLS_REFUSED = frozenset({400, 404, 422, 501})
#: Longest piece of a rejected answer quoted back to the model and into the trace.
QUOTE_CHARS = 400
#: Most validation problems listed in one correction.
MAX_PROBLEMS = 6

JSON_INSTRUCTION = (
    "Answer with one JSON object and nothing else (no prose, no code fence). It must match this JSON "
    "schema:\n{schema}"
)
CORRECTION = (
    "Your previous answer could not be used: {problem}\n"
    "Answer again with a {name} and nothing else, following the schema exactly."
)
_FENCE = re.compile(r"^```(?:json)?\s*|\s*```$", re.IGNORECASE)


@dataclass
class StructuredAnswer(Generic[M]):
    """A usable answer and what it took to get it."""

    value: M
    calls: int  # model calls made (1, or 2 after a corrective retry)
    prompt_chars: int  # characters of the prompt the accepted answer replied to
    prompt_tokens: int | None  # its input tokens, when the provider reported usage
    method: Literal["tool_calling", "json_mode"]
    rejected: list[str]  # why each earlier answer was refused
    raw: str = ""  # the accepted answer as the model sent it (its call's JSON arguments, or its text)
    output_tokens: int | None = None  # its output tokens, when the provider reported usage


@dataclass(frozen=True)
class ModelCall:
    """One model call an ask made, accepted or not (for usage accounting)."""

    index: int  # 0, then 1 for the corrective retry
    input_tokens: int | None  # from the provider's usage metadata, when it reported any
    output_tokens: int | None
    latency_ms: float


@dataclass
class _Attempt:
    raw: AIMessage | None
    value: Any = None
    problem: str | None = None


async def ask_structured(
    models: Callable[[int], BaseChatModel],
    messages: Sequence[BaseMessage],
    schema: type[M],
    *,
    method: StructuredMethod = "auto",
    check: Callable[[M], str | None] | None = None,
    max_chars: int = 100_000,
    on_reject: Callable[[str, str], object] | None = None,
    on_call: Callable[[ModelCall], object] | None = None,
) -> StructuredAnswer[M]:
    """Ask for a ``schema`` answer; retry once with the reason when the first cannot be used.

    Args:
        models: The chat model for the n-th call of this ask (0, then 1 for the retry); a scripted
            model is positioned by it.
        messages: The prompt.
        schema: The pydantic model the answer must validate against.
        method: ``tool_calling`` (the schema as a forced tool), ``json_mode`` (JSON in the text,
            the schema in the prompt) or ``auto`` (tool calling, taking JSON text from a server
            that answers without calling, and switching to JSON mode when it refuses tools).
        check: The protocol's own rules on a valid answer; returns why it is unusable, or None.
        max_chars: Largest answer (argument or text characters) accepted.
        on_reject: Told why each unusable answer was refused, and its text (for the trace).
        on_call: Told of every model call that answered, with its usage and latency.

    Raises:
        InvalidModelOutput: The corrected answer could not be used either.
        ProviderError: The provider failed.
    """
    prompt, rejected = list(messages), list[str]()
    use: Literal["tool_calling", "json_mode"] = "json_mode" if method == "json_mode" else "tool_calling"
    for call in range(2):
        model, started = models(call), time.perf_counter()
        attempt, use = await _attempt(model, prompt, schema, use, auto=method == "auto")
        if on_call is not None:
            usage = attempt.raw.usage_metadata if attempt.raw is not None else None
            on_call(
                ModelCall(
                    index=call,
                    input_tokens=usage.get("input_tokens") if usage else None,
                    output_tokens=usage.get("output_tokens") if usage else None,
                    latency_ms=round((time.perf_counter() - started) * 1000, 3),
                )
            )
        problem = _cut_off(attempt.raw) or attempt.problem or _size_problem(attempt.raw, max_chars)
        if problem is None and check is not None:
            problem = check(attempt.value)
        if problem is None:
            usage = attempt.raw.usage_metadata if attempt.raw is not None else None
            return StructuredAnswer(
                value=attempt.value,
                calls=call + 1,
                # what was sent: JSON mode adds its instruction and the schema to the prompt
                prompt_chars=sum(len(m.text) for m in prompt)
                + (len(_json_instruction(schema)) if use == "json_mode" else 0),
                prompt_tokens=usage.get("input_tokens") if usage else None,
                method=use,
                rejected=rejected,
                raw=_raw_text(attempt.raw),
                output_tokens=usage.get("output_tokens") if usage else None,
            )
        rejected.append(problem)
        if on_reject is not None:
            on_reject(problem, _answer_text(attempt.raw)[: QUOTE_CHARS * 10])
        prompt = [*prompt, HumanMessage(CORRECTION.format(problem=problem, name=schema.__name__))]
    raise InvalidModelOutput(
        f"the model's {schema.__name__} could not be used, even after a corrective retry: {rejected[-1]}"
    )


async def _attempt(
    model: BaseChatModel,
    prompt: list[BaseMessage],
    schema: type[M],
    use: Literal["tool_calling", "json_mode"],
    *,
    auto: bool,
) -> tuple[_Attempt, Literal["tool_calling", "json_mode"]]:
    if use == "tool_calling":
        try:
            return await _ask_tool_calling(model, prompt, schema, auto=auto), use
        except ProviderError as exc:
            if not (auto and exc.status in TOOLS_REFUSED):
                raise
        except NotImplementedError:  # a chat model without tool calling
            if not auto:
                raise PhasegraphError(
                    f"{type(model).__name__} cannot call tools: use structured_output='json_mode'"
                ) from None
    return await _ask_json_mode(model, prompt, schema), "json_mode"


async def _ask_tool_calling(
    model: BaseChatModel, prompt: list[BaseMessage], schema: type[M], *, auto: bool
) -> _Attempt:
    runnable = model.with_structured_output(schema, method="function_calling", include_raw=True)
    streamed = StreamedCalls()  # the raw argument text, before LangChain closes what was cut off
    result = await _invoke(runnable, prompt, model, streamed)
    raw = result["raw"] if isinstance(result, dict) else None
    raw = raw if isinstance(raw, AIMessage) else None
    if (cut := streamed.cut_off()) is not None:
        return _Attempt(
            raw, problem=f"its arguments were cut off before their JSON ended: {_quote(cut.raw_args)}"
        )
    if isinstance(result, dict) and isinstance(result.get("parsed"), schema):
        return _Attempt(raw, result["parsed"])
    error = result.get("parsing_error") if isinstance(result, dict) else None
    called = {c["name"] for c in raw.tool_calls} if raw is not None else set()
    if error is not None and schema.__name__ in called:
        return _Attempt(raw, problem=_explain(error, raw))
    if auto and raw is not None and raw.text.strip():  # the server ignored the tool: read JSON text
        return _parse_text(raw, schema)
    return _Attempt(raw, problem=_missing_call(raw, schema))


def _is_chat_openai(model: BaseChatModel) -> bool:
    """Whether ``model`` is langchain-openai's ChatOpenAI.

    Read without importing the package (and openai) for a run that never built one: no such model
    exists until something imported it.
    """
    module = sys.modules.get("langchain_openai")
    return module is not None and isinstance(model, module.ChatOpenAI)


async def _ask_json_mode(model: BaseChatModel, prompt: list[BaseMessage], schema: type[M]) -> _Attempt:
    instruction = _json_instruction(schema)
    bound: Any = model.bind(response_format={"type": "json_object"}) if _is_chat_openai(model) else model
    # the instruction goes last as a user message: some providers take system messages only first
    raw = await _invoke(bound, [*prompt, HumanMessage(instruction)], model)
    return _parse_text(raw, schema) if isinstance(raw, AIMessage) else _Attempt(None, problem="no answer")


async def _invoke(
    runnable: Any, prompt: list[BaseMessage], model: BaseChatModel, streamed: StreamedCalls | None = None
) -> Any:
    """``runnable.ainvoke(prompt)``, a provider's failure raised as a redacted ``ProviderError``.

    ``NotImplementedError`` (a model without tool calling) passes, so ``auto`` can switch to JSON.
    ``streamed`` joins the run's callbacks (tracing and LangGraph's own stay) to see each chunk.
    """
    config: RunnableConfig | None = None
    if streamed is not None:
        config = merge_configs(ensure_config(), {"callbacks": [streamed]})
    try:
        return await runnable.ainvoke(prompt, config)
    except (PhasegraphError, NotImplementedError):
        raise
    except Exception as exc:
        raise provider_error(exc, model) from None


def _json_instruction(schema: type[BaseModel]) -> str:
    return JSON_INSTRUCTION.format(schema=json.dumps(schema.model_json_schema()))


def _parse_text(raw: AIMessage, schema: type[M]) -> _Attempt:
    text = _FENCE.sub("", raw.text.strip())
    if not text:
        return _Attempt(raw, problem="the answer was empty")
    start, end = text.find("{"), text.rfind("}")
    if start < 0:
        return _Attempt(raw, problem=f"the answer holds no JSON object: {_quote(text)}")
    try:  # from the first brace to the last (prose around the object is tolerated)
        return _Attempt(
            raw, schema.model_validate_json(text[start : end + 1] if end > start else text[start:])
        )
    except ValidationError as exc:
        return _Attempt(raw, problem=_explain(exc, raw))


def _explain(error: BaseException, raw: AIMessage | None) -> str:
    """A correction a model can act on: which fields were wrong, or what did not parse."""
    cause = error
    while not isinstance(cause, ValidationError) and cause.__cause__ is not None:
        cause = cause.__cause__
    if isinstance(cause, ValidationError):
        problems = [f"{'.'.join(str(p) for p in e['loc']) or 'answer'}: {e['msg']}" for e in cause.errors()]
        listed = "; ".join(problems[:MAX_PROBLEMS])
        more = f" (and {len(problems) - MAX_PROBLEMS} more)" if len(problems) > MAX_PROBLEMS else ""
        if any(e["type"] == "json_invalid" for e in cause.errors()):
            return f"the answer is not valid JSON: {_quote(_answer_text(raw))}"
        return f"it does not match the schema: {listed}{more}"
    return f"the answer is not valid JSON ({type(error).__name__}): {_quote(_answer_text(raw))}"


def _missing_call(raw: AIMessage | None, schema: type[BaseModel]) -> str:
    if raw is None or not (raw.tool_calls or raw.invalid_tool_calls or raw.text.strip()):
        return "the answer was empty"
    if raw.invalid_tool_calls:
        return f"its arguments are not valid JSON: {_quote(_answer_text(raw))}"
    if raw.tool_calls:
        names = ", ".join(str(c["name"]) for c in raw.tool_calls)
        return f"it called {names} instead of {schema.__name__}"
    return f"it did not call {schema.__name__}: {_quote(raw.text)}"


def hit_token_limit(message: AIMessage) -> bool:
    """The provider says the token limit cut the answer short.

    Streamed tool arguments are closed silently, so what was cut may still parse.
    """
    meta = message.response_metadata
    return (meta.get("finish_reason") or meta.get("stop_reason")) in ("length", "max_tokens")


def _cut_off(raw: AIMessage | None) -> str | None:
    """Why an answer the token limit cut short cannot be used, or None."""
    if raw is not None and hit_token_limit(raw):
        return "the answer was cut off at the model's token limit; answer more briefly"
    return None


def _size_problem(raw: AIMessage | None, max_chars: int) -> str | None:
    if raw is None:
        return None
    size = len(raw.text) + sum(len(json.dumps(c["args"])) for c in raw.tool_calls)
    size += sum(len(c.get("args") or "") for c in raw.invalid_tool_calls)
    return (
        f"the answer is {size} characters long; at most {max_chars} are accepted"
        if size > max_chars
        else None
    )


def _raw_text(raw: AIMessage | None) -> str:
    """What the model sent: its tool call's arguments as JSON, else its text."""
    if raw is None:
        return ""
    if raw.tool_calls:
        return json.dumps(raw.tool_calls[0]["args"], ensure_ascii=False)
    return raw.text


def _answer_text(raw: AIMessage | None) -> str:
    if raw is None:
        return ""
    bad = [c.get("args") or "" for c in raw.invalid_tool_calls]
    return " ".join([*bad, raw.text]).strip()


def _quote(text: str) -> str:
    text = " ".join(text.split())
    return repr(text if len(text) <= QUOTE_CHARS else text[:QUOTE_CHARS] + "...")
