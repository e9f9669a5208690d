"""Read a model stream up to its first complete tool call, then stop reading."""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator, Callable, Sequence
from contextlib import aclosing
from dataclasses import dataclass, field
from typing import Any, cast

from langchain_core.language_models import LanguageModelInput
from langchain_core.messages import AIMessageChunk, BaseMessage
from langchain_core.runnables import Runnable


@dataclass
class PartialCall:
    """A tool call assembled from stream chunks."""

    index: int
    id: str = ""
    name: str = ""
    raw_args: str = ""

    def parsed_args(self, *, ended: bool = False) -> dict[str, Any] | None:
        """The arguments once they form a complete JSON object, else ``None``.

        Empty arguments mean ``{}`` only once the stream has ended (a provider may send
        the name before any argument text).
        """
        if not self.raw_args.strip():
            return {} if ended else None
        try:
            value = json.loads(self.raw_args)
        except json.JSONDecodeError:
            return None
        return value if isinstance(value, dict) else None


@dataclass
class StreamOutcome:
    """What one model stream yielded before it ended or was cut."""

    text: str = ""
    call: dict[str, Any] | None = None  # {"id", "name", "args"} of the first complete call
    ignored: list[dict[str, Any]] = field(default_factory=list)  # {"name", "args", "reason"}
    chunks_read: int = 0
    cut: bool = False


async def stream_until_first_call(
    model: Runnable[LanguageModelInput, Any],
    messages: Sequence[BaseMessage],
    on_text: Callable[[str], object],
    *,
    take_calls: bool = True,
) -> StreamOutcome:
    """Stream ``model``, forwarding text, and close the stream at the first complete tool call.

    Args:
        model: A chat model (tools bound when ``take_calls``).
        messages: The prompt.
        on_text: Called with each piece of text as it arrives.
        take_calls: When false (tools unbound), the stream is read to its end and every
            call it contains is reported as ignored.
    """
    outcome = StreamOutcome()
    calls: dict[int, PartialCall] = {}
    stream = cast(AsyncGenerator[Any, None], model.astream(list(messages)))
    async with aclosing(stream):
        async for chunk in stream:
            outcome.chunks_read += 1
            _absorb(chunk, calls, outcome, on_text)
            if take_calls and (first := _first_complete(calls)) is not None:
                outcome.call = {"id": first.id, "name": first.name, "args": first.parsed_args()}
                outcome.cut = True
                break
    if take_calls and outcome.call is None and (first := _first_complete(calls, ended=True)) is not None:
        outcome.call = {"id": first.id, "name": first.name, "args": first.parsed_args(ended=True)}
    reason = "after_first_call" if take_calls else "tools_unbound"
    for partial in sorted(calls.values(), key=lambda c: c.index):
        if outcome.call is not None and partial.id == outcome.call["id"]:
            continue
        args = partial.parsed_args(ended=True)
        outcome.ignored.append(
            {"name": partial.name, "args": args or {}, "reason": reason if args is not None else "incomplete"}
        )
    return outcome


def _absorb(
    chunk: AIMessageChunk,
    calls: dict[int, PartialCall],
    outcome: StreamOutcome,
    on_text: Callable[[str], object],
) -> None:
    if chunk.text:
        outcome.text += chunk.text
        on_text(chunk.text)
    for piece in chunk.tool_call_chunks:
        index = piece.get("index")
        key = index if isinstance(index, int) else len(calls)
        partial = calls.setdefault(key, PartialCall(index=key))
        partial.id = partial.id or piece.get("id") or f"call_{key + 1}"
        partial.name += piece.get("name") or ""
        partial.raw_args += piece.get("args") or ""


def _first_complete(calls: dict[int, PartialCall], *, ended: bool = False) -> PartialCall | None:
    for index in sorted(calls):
        partial = calls[index]
        if partial.name and partial.parsed_args(ended=ended) is not None:
            return partial
    return None
