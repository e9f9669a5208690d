"""Read a model stream up to its first complete tool call, then stop reading.

Every protocol judges a streamed call by its raw argument text, here: LangChain closes JSON that never
ended (``parse_partial_json``), so a call cut off mid-argument would otherwise read as complete whatever
the provider's finish reason says.
"""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator, Callable, Sequence
from contextlib import aclosing
from dataclasses import dataclass, field
from typing import Any, cast
from uuid import UUID

from langchain_core.callbacks import AsyncCallbackHandler
from langchain_core.language_models import LanguageModelInput
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage
from langchain_core.messages.tool import invalid_tool_call, tool_call
from langchain_core.messages.utils import message_chunk_to_message
from langchain_core.outputs import ChatGenerationChunk, GenerationChunk
from langchain_core.runnables import Runnable

from phasegraph.nodes.models import stream_model
from phasegraph.nodes.prompts import ARGS_CUT_OFF, ARGS_NOT_JSON, ARGS_TOO_LARGE


class JsonObjectScanner:
    """Tells, as text arrives, whether it has become one complete JSON object.

    Each character is looked at once (strings, escapes and nesting are tracked as they
    stream) and the text is parsed only when its outermost object closes, so a long
    argument costs linear time instead of a full parse at every chunk.
    """

    def __init__(self) -> None:
        self.blank = True  # nothing but whitespace so far
        self._depth = 0
        self._in_string = False
        self._escaped = False
        self._closed = False  # the outermost object ended; only whitespace may follow
        self._broken = False  # not a single JSON object, whatever comes next
        self._value: dict[str, Any] | None = None

    def feed(self, text: str) -> None:
        """Look at the next piece of text."""
        for char in text:
            if self._broken:
                return
            self._step(char)

    @property
    def unfinished(self) -> bool:
        """An object was opened and never closed: the text stops before its JSON does."""
        return not (self.blank or self._broken or self._closed)

    def value(self, raw: Callable[[], str]) -> dict[str, Any] | None:
        """The parsed object once the text fed so far (``raw()``) is complete, else ``None``."""
        if self._broken or not self._closed:
            return None
        if self._value is None:
            try:  # control characters inside strings pass, as LangChain's own parsing lets them
                parsed = json.loads(raw(), strict=False)
            except json.JSONDecodeError:
                parsed = None
            if not isinstance(parsed, dict):
                self._broken = True
                return None
            self._value = parsed
        return self._value

    def _step(self, char: str) -> None:
        if self._in_string:
            if self._escaped:
                self._escaped = False
            elif char == "\\":
                self._escaped = True
            elif char == '"':
                self._in_string = False
            return
        if char.isspace():
            return
        if self._closed or (self.blank and char != "{"):
            self._broken = True  # text after the object, or a value that is not an object
        self.blank = False
        if char == '"':
            self._in_string = True
        elif char in "{[":
            self._depth += 1
        elif char in "}]":
            self._depth -= 1
            self._closed = self._depth == 0


@dataclass
class PartialCall:
    """A tool call assembled from stream chunks."""

    index: int
    id: str = ""
    name: str = ""
    size: int = 0  # characters of argument text received
    _pieces: list[str] = field(default_factory=list, repr=False)
    _scanner: JsonObjectScanner = field(default_factory=JsonObjectScanner, repr=False)

    @property
    def raw_args(self) -> str:
        """The argument text received so far."""
        return "".join(self._pieces)

    def add_args(self, text: str) -> None:
        """Append streamed argument text (kept as pieces: no copy of the whole per chunk)."""
        if text:
            self._pieces.append(text)
            self.size += len(text)
            self._scanner.feed(text)

    def parsed_args(self, *, ended: bool = False) -> dict[str, Any] | None:
        """The arguments once they form a complete JSON object, else ``None``.

        Empty arguments mean ``{}`` only once the stream has ended (a provider may send
        the name before any argument text).
        """
        if self._scanner.blank:
            return {} if ended else None
        return self._scanner.value(lambda: self.raw_args)

    @property
    def cut_off(self) -> bool:
        """The argument text stops before its JSON does (an object opened, never closed)."""
        return self._scanner.unfinished

    def refusal(self) -> str | None:
        """Why this call, its stream having ended, must not run (the model reads it), or ``None``.

        Its arguments must be one complete JSON object: text cut off before its JSON ended is
        never completed by guessing, whatever the provider's finish reason.
        """
        if self.parsed_args(ended=True) is not None:
            return None
        template = ARGS_CUT_OFF if self.cut_off else ARGS_NOT_JSON
        return template.format(name=self.name or "unnamed")


@dataclass
class StreamOutcome:
    """What one model stream yielded before it ended or was cut."""

    #: {"id", "name", "args"} of the first complete call; with "error" when it must not run
    call: dict[str, Any] | None = None
    ignored: list[dict[str, Any]] = field(default_factory=list)  # {"name", "args", "reason"}
    chunks_read: int = 0
    cut: bool = False
    _text: list[str] = field(default_factory=list, repr=False)

    @property
    def text(self) -> str:
        """All text the stream carried (pieces are joined once, not per chunk)."""
        return "".join(self._text)


async def stream_until_first_call(
    model: Runnable[LanguageModelInput, Any],
    messages: Sequence[BaseMessage],
    on_text: Callable[[str], object],
    *,
    take_calls: bool = True,
    max_args_chars: int | None = None,
) -> StreamOutcome:
    """Stream ``model``, forwarding text, and close the stream at the first complete tool call.

    Args:
        model: A chat model (tools bound when ``take_calls``).
        messages: The prompt.
        on_text: Called with each piece of text as it arrives.
        take_calls: When false (tools unbound), the stream is read to its end and every
            call it contains is reported as ignored.
        max_args_chars: A call whose argument text grows past this closes the stream at
            once; it becomes the call, with an ``error`` instead of running (or is ignored
            as ``too_large`` when tools are unbound).

    A stream that ends with no complete call but a broken one (cut off before its JSON ended,
    or not JSON) makes that the call, with an ``error`` instead of running.
    """
    outcome = StreamOutcome()
    calls: dict[int, PartialCall] = {}
    oversized: PartialCall | None = None
    stream = cast(AsyncGenerator[Any, None], stream_model(model, messages))
    async with aclosing(stream):
        async for chunk in stream:
            outcome.chunks_read += 1
            _absorb(chunk, calls, outcome, on_text)
            if max_args_chars is not None:
                oversized = next((c for c in calls.values() if c.size > max_args_chars), None)
            if oversized is not None:
                outcome.call = _refused(oversized, max_args_chars) if take_calls else None
                outcome.cut = True
                break
            if take_calls and (first := _first_complete(calls)) is not None:
                outcome.call = {"id": first.id, "name": first.name, "args": first.parsed_args()}
                outcome.cut = True
                break
    if take_calls and outcome.call is None:
        outcome.call = _call_at_end(calls)
    outcome.ignored = _ignored(calls, outcome.call, oversized, take_calls)
    return outcome


def _call_at_end(calls: dict[int, PartialCall]) -> dict[str, Any] | None:
    """The stream's first complete call, else its first broken one, refused (it never runs)."""
    if (first := _first_complete(calls, ended=True)) is not None:
        return {"id": first.id, "name": first.name, "args": first.parsed_args(ended=True)}
    for partial in sorted(calls.values(), key=lambda c: c.index):
        if (refusal := partial.refusal()) is not None:
            return {"id": partial.id, "name": partial.name, "args": {}, "error": refusal}
    return None


def _refused(partial: PartialCall, limit: int | None) -> dict[str, Any]:
    error = ARGS_TOO_LARGE.format(name=partial.name or "unnamed", limit=limit)
    return {"id": partial.id, "name": partial.name, "args": {}, "error": error}


def _ignored(
    calls: dict[int, PartialCall],
    taken: dict[str, Any] | None,
    oversized: PartialCall | None,
    take_calls: bool,
) -> list[dict[str, Any]]:
    """Every call the stream showed that will not run, with why."""
    reason = "after_first_call" if take_calls else "tools_unbound"
    ignored = []
    for partial in sorted(calls.values(), key=lambda c: c.index):
        if taken is not None and partial.id == taken["id"]:
            continue
        if partial is oversized:
            ignored.append({"name": partial.name, "args": {}, "reason": "too_large"})
            continue
        args = partial.parsed_args(ended=True)
        ignored.append(
            {"name": partial.name, "args": args or {}, "reason": reason if args is not None else "incomplete"}
        )
    return ignored


def _absorb(
    chunk: AIMessageChunk,
    calls: dict[int, PartialCall],
    outcome: StreamOutcome,
    on_text: Callable[[str], object],
) -> None:
    if text := chunk.text:
        outcome._text.append(text)
        on_text(text)
    absorb_call_pieces(chunk, calls)


def absorb_call_pieces(chunk: AIMessageChunk, calls: dict[int, PartialCall]) -> None:
    """Add a chunk's tool-call pieces to the calls being streamed (by index; no re-parsing)."""
    for piece in chunk.tool_call_chunks:
        index = piece.get("index")
        key = index if isinstance(index, int) else len(calls)
        partial = calls.setdefault(key, PartialCall(index=key))
        partial.id = partial.id or piece.get("id") or f"call_{key + 1}"
        partial.name += piece.get("name") or ""
        partial.add_args(piece.get("args") or "")


def _first_complete(calls: dict[int, PartialCall], *, ended: bool = False) -> PartialCall | None:
    """The first call whose arguments are complete.

    A call without a name counts too: it then runs as an unknown tool, so the model reads
    why nothing happened.
    """
    for index in sorted(calls):
        partial = calls[index]
        if partial.parsed_args(ended=ended) is not None:
            return partial
    return None


def reply_message(reply: AIMessageChunk | None) -> AIMessage:
    """A streamed reply (its chunks added up) as one message, its calls judged by their raw text.

    A call whose argument text is not one complete JSON object is an invalid tool call, with the
    reason the model will read as its ``error`` when it was cut off (``None`` for other broken JSON).
    """
    if reply is None:
        return AIMessage("")
    message = message_chunk_to_message(reply)
    if not isinstance(message, AIMessage):
        return AIMessage(message.text)
    calls: dict[int, PartialCall] = {}
    absorb_call_pieces(reply, calls)
    if not calls:
        return message
    valid, invalid = [], []
    for partial in sorted(calls.values(), key=lambda c: c.index):
        if (args := partial.parsed_args(ended=True)) is not None:
            valid.append(tool_call(name=partial.name, args=args, id=partial.id))
            continue
        error = partial.refusal() if partial.cut_off else None
        invalid.append(
            invalid_tool_call(name=partial.name, args=partial.raw_args, id=partial.id, error=error)
        )
    return message.model_copy(update={"tool_calls": valid, "invalid_tool_calls": invalid})


class StreamedCalls(AsyncCallbackHandler):
    """Keeps the raw argument text of the calls a chat model streams inside ``ainvoke``.

    A streaming model (``streaming=True``) adds its chunks up itself and returns only what LangChain's
    partial-JSON parser made of them; this handler sees each chunk first (one model call per handler).
    """

    def __init__(self) -> None:
        self.calls: dict[int, PartialCall] = {}

    async def on_llm_new_token(
        self,
        token: str | list[str | dict[str, Any]],
        *,
        chunk: GenerationChunk | ChatGenerationChunk | None = None,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        tags: list[str] | None = None,
        **kwargs: Any,
    ) -> None:
        """Add the chunk's tool-call pieces."""
        if isinstance(chunk, ChatGenerationChunk) and isinstance(chunk.message, AIMessageChunk):
            absorb_call_pieces(chunk.message, self.calls)

    def cut_off(self) -> PartialCall | None:
        """The first call whose argument text stops before its JSON ends."""
        ordered = sorted(self.calls.values(), key=lambda c: c.index)
        return next((c for c in ordered if c.cut_off), None)
