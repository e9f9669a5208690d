"""A scripted streaming chat model: deterministic turns from a JSON script, streamed for real."""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal

from langchain_core.callbacks import AsyncCallbackManagerForLLMRun, CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel, LangSmithParams, LanguageModelInput
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage
from langchain_core.messages.ai import UsageMetadata
from langchain_core.messages.tool import tool_call_chunk
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
from langchain_core.runnables import Runnable
from langchain_core.tools import BaseTool
from langchain_core.utils.function_calling import convert_to_openai_tool
from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError

from phasegraph.nodes.errors import ScriptError
from phasegraph.tools.config_files import read_config_bytes

#: Size of the pieces a tool call's argument JSON is split into, so consumers see partial JSON.
ARGS_PIECE_CHARS = 6
#: Characters the scripted model counts as one token (a deterministic stand-in for a tokenizer).
CHARS_PER_TOKEN = 4


class ScriptToolCall(BaseModel):
    """One tool call a scripted turn makes."""

    model_config = ConfigDict(frozen=True)

    name: str
    args: dict[str, Any] = Field(default_factory=dict)


class ScriptTurn(BaseModel):
    """What the model answers on one call."""

    model_config = ConfigDict(frozen=True)

    content: str = ""
    tool_calls: list[ScriptToolCall] = Field(default_factory=list)


class Script(BaseModel):
    """A whole script: the turns in order and how to behave past the last one.

    ``turns`` answers the model calls of a thread's first user message; ``follow_ups`` those of each
    later message (the second message reads ``follow_ups[0]``, and so on, starting over after the
    last), so an offline demo can be chatted with. Without follow-ups every message reads ``turns``.
    Frozen: a loaded script is shared by every model made from its file.
    """

    model_config = ConfigDict(frozen=True)

    turns: list[ScriptTurn] = Field(min_length=1)
    follow_ups: list[list[ScriptTurn]] = Field(default_factory=list)
    repeat_last: bool = False
    chunk_delay_ms: int = Field(default=0, ge=0)
    #: A pause before each answer asked for whole (not streamed), as a provider takes to answer one.
    call_delay_ms: int = Field(default=0, ge=0)
    #: "split": each call streams as a header then argument pieces (OpenAI's way);
    #: "batched": all of a turn's calls arrive whole in one chunk (as some compatible servers do).
    tool_call_delivery: Literal["split", "batched"] = "split"


class StreamStats(BaseModel):
    """What one model call had to stream and how much of it the consumer actually read.

    Chunks are generated lazily, one per read, so a consumer that stops early leaves the
    rest of the turn unproduced, as closing a real provider's stream does.
    """

    call_index: int
    chunks_total: int  # chunks the whole turn streams when read to the end
    chunks_read: int = 0  # chunks handed to the consumer
    first_tool_call_complete_at: int | None = None  # index of the chunk completing the first call
    #: The stop sequence that ended the turn (as a provider does: the text is cut before it, and
    #: nothing after it, tool calls included, is produced), or None.
    stopped_by: str | None = None

    @property
    def chunks_after_first_complete_call(self) -> int:
        """Chunks the consumer read after the one completing the first tool call."""
        if self.first_tool_call_complete_at is None:
            return 0
        return max(0, self.chunks_read - self.first_tool_call_complete_at - 1)


def load_script(path: str | Path) -> Script:
    """Read and validate a JSON script, with errors that name the file (never the folders above it).

    A server reports these errors to clients, who must not learn its file system. A script is
    parsed once per version of its file (a run asks for its model at every call): an edited
    file, told by its modification time and size, is read again.
    """
    name = Path(path).name
    try:
        found = Path(path).stat()
        return _parsed_script(str(path), found.st_mtime_ns, found.st_size)
    except OSError as exc:
        raise ScriptError(f"cannot read script {name}: {exc.strerror or type(exc).__name__}") from exc
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc']) or 'script'}: {err['msg']}" for err in exc.errors()
        )
        raise ScriptError(f"script {name} is not a valid script: {problems}") from exc


@lru_cache(maxsize=64)
def _parsed_script(path: str, mtime_ns: int, size: int) -> Script:
    return Script.model_validate_json(read_config_bytes(path))  # bytes: a bad one is a ValidationError


class ScriptedChatModel(BaseChatModel):
    """Returns the script's turns in order, streaming words and tool-call JSON in pieces.

    ``start_at`` lets a caller position the script from persisted run state, so each run
    (and each resume) reads the turn it is at, never another run's position. ``user_turn`` picks
    the part of the script (``turns`` or one of ``follow_ups``) that ``start_at`` counts in.
    """

    script: Script
    source: str = "<inline script>"
    start_at: int = 0
    #: Which user message of the thread this call answers (0: the first), choosing the script's part.
    user_turn: int = Field(default=0, ge=0)
    _position: int = PrivateAttr(default=0)
    _stats: list[StreamStats] = PrivateAttr(default_factory=list)
    _prompts: list[list[BaseMessage]] = PrivateAttr(default_factory=list)

    def model_post_init(self, context: Any, /) -> None:
        """Place the script at ``start_at``."""
        self._position = self.start_at

    @property
    def _llm_type(self) -> str:
        return "phasegraph-scripted"

    def __repr_args__(self) -> list[tuple[str | None, Any]]:
        """Name the script, not its whole content: LangChain puts this repr into every call's trace."""
        return [("source", self.source), ("start_at", self.start_at), ("user_turn", self.user_turn)]

    def _get_ls_params(self, stop: list[str] | None = None, **kwargs: Any) -> LangSmithParams:
        """Name the model in traces (LangSmith and other tracers): ``scripted`` and the script's file.

        A per-call ``model`` override (``bind(model=...)``) is reported as the model, as providers do.
        """
        params = super()._get_ls_params(stop=stop, **kwargs)
        params["ls_provider"] = "scripted"
        model = kwargs.get("model")
        params["ls_model_name"] = model if isinstance(model, str) else self.source
        return params

    @property
    def position(self) -> int:
        """Index of the turn the next call returns."""
        return self._position

    @property
    def stats(self) -> list[StreamStats]:
        """One entry per streamed call, oldest first."""
        return list(self._stats)

    @property
    def prompts(self) -> list[list[BaseMessage]]:
        """The messages each call received, oldest first (to check what a protocol sends)."""
        return [list(p) for p in self._prompts]

    @property
    def turns(self) -> list[ScriptTurn]:
        """The script's part this model reads: ``turns``, or the follow-up of its user message."""
        follow_ups = self.script.follow_ups
        if self.user_turn == 0 or not follow_ups:
            return self.script.turns
        return follow_ups[(self.user_turn - 1) % len(follow_ups)]

    @property
    def exhausted(self) -> bool:
        """True once every turn of its part of the script has been returned at least once."""
        return self._position >= len(self.turns)

    def bind_tools(
        self,
        tools: Sequence[dict[str, Any] | type | Callable[..., Any] | BaseTool],
        *,
        tool_choice: str | None = None,
        **kwargs: Any,
    ) -> Runnable[LanguageModelInput, AIMessage]:
        """Accept tools like a real provider does; the script decides what is called."""
        formatted = [convert_to_openai_tool(t) for t in tools]
        return self.bind(tools=formatted, tool_choice=tool_choice, **kwargs)

    def _next_turn(self, messages: list[BaseMessage]) -> tuple[int, ScriptTurn]:
        index, turns = self._position, self.turns
        if index >= len(turns) and not self.script.repeat_last:
            part = "" if turns is self.script.turns else f" for user message {self.user_turn + 1}"
            raise ScriptError(
                f"script {self.source} has no turn {index + 1}{part}: it holds {len(turns)} turn(s) "
                "and repeat_last is false"
            )
        self._position += 1
        self._prompts.append(list(messages))
        return index, turns[min(index, len(turns) - 1)]

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        if self.script.call_delay_ms:  # (LangChain runs this off the event loop for ainvoke)
            time.sleep(self.script.call_delay_ms / 1000)
        index, turn = self._next_turn(messages)
        turn, _ = _stopped(turn, stop)
        message = AIMessage(
            content=turn.content,
            tool_calls=[
                {
                    "name": c.name,
                    "args": c.args,
                    "id": _call_id(index, i, self.user_turn),
                    "type": "tool_call",
                }
                for i, c in enumerate(turn.tool_calls)
            ],
            usage_metadata=scripted_usage(messages, turn),
        )
        return ChatResult(generations=[ChatGeneration(message=message)])

    def _stream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> Iterator[ChatGenerationChunk]:
        stats, chunks = self._open_stream(messages, stop)
        for chunk in chunks:
            if self.script.chunk_delay_ms:
                time.sleep(self.script.chunk_delay_ms / 1000)
            stats.chunks_read += 1
            yield ChatGenerationChunk(message=chunk)

    async def _astream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> AsyncIterator[ChatGenerationChunk]:
        stats, chunks = self._open_stream(messages, stop)
        for chunk in chunks:
            # Like a network read, each chunk gives the event loop a turn (other requests go on).
            await asyncio.sleep(self.script.chunk_delay_ms / 1000)
            stats.chunks_read += 1
            yield ChatGenerationChunk(message=chunk)

    def _open_stream(
        self, messages: list[BaseMessage], stop: list[str] | None = None
    ) -> tuple[StreamStats, Iterator[AIMessageChunk]]:
        index, turn = self._next_turn(messages)
        turn, stopped_by = _stopped(turn, stop)
        usage = scripted_usage(messages, turn)
        plan = _TurnPlan(index, turn, self.script.tool_call_delivery, usage, self.user_turn)
        stats = StreamStats(
            call_index=index,
            chunks_total=plan.total,
            first_tool_call_complete_at=plan.first_complete,
            stopped_by=stopped_by,
        )
        self._stats.append(stats)
        return stats, plan.chunks()


def _stopped(turn: ScriptTurn, stop: list[str] | None) -> tuple[ScriptTurn, str | None]:
    """The turn as a provider honouring ``stop`` sends it: cut before the first stop sequence.

    The stop sequence itself is not sent, and nothing after it is (tool calls included).
    """
    found = [(turn.content.find(s), s) for s in stop or [] if s and s in turn.content]
    if not found:
        return turn, None
    at, sequence = min(found)
    return ScriptTurn(content=turn.content[:at]), sequence


def scripted_usage(messages: Sequence[BaseMessage], turn: ScriptTurn) -> UsageMetadata:
    """The usage a provider would report, counted deterministically: a token per 4 characters.

    Input counts every message's text and the arguments of the tool calls it carries; output counts
    the turn's text and its calls' argument JSON. Offline runs thereby have real token counts.
    """
    sent = sum(
        len(m.text) + sum(len(json.dumps(c["args"])) for c in getattr(m, "tool_calls", [])) for m in messages
    )
    answered = len(turn.content) + sum(len(c.name) + len(json.dumps(c.args)) for c in turn.tool_calls)
    input_tokens, output_tokens = _tokens(sent), _tokens(answered)
    return UsageMetadata(
        input_tokens=input_tokens, output_tokens=output_tokens, total_tokens=input_tokens + output_tokens
    )


def _tokens(chars: int) -> int:
    return max(1, -(-chars // CHARS_PER_TOKEN))


def _call_id(turn_index: int, call_index: int, user_turn: int = 0) -> str:
    """A call id unique in its thread, as a provider's are (later user messages add their number)."""
    prefix = f"call_m{user_turn + 1}_" if user_turn else "call_"
    return f"{prefix}{turn_index + 1}_{call_index + 1}"


class _TurnPlan:
    """How a turn streams: word chunks, then its tool calls, split or batched.

    Chunks are made one at a time as the consumer reads, so a huge scripted argument costs
    only what is actually read; the counts are worked out without building them.
    """

    def __init__(
        self, turn_index: int, turn: ScriptTurn, delivery: str, usage: UsageMetadata, user_turn: int
    ) -> None:
        self.turn_index, self.turn, self.batched = turn_index, turn, delivery == "batched"
        self.usage, self.user_turn = usage, user_turn
        self.words = re.findall(r"\S+\s*|\s+", turn.content)
        self.raw_args = [json.dumps(c.args) for c in turn.tool_calls]
        self.first_complete: int | None = None
        if self.batched:
            calls_chunks = 1 if turn.tool_calls else 0
            self.first_complete = len(self.words) if turn.tool_calls else None
        else:
            sizes = [1 + -(-len(raw) // ARGS_PIECE_CHARS) for raw in self.raw_args]
            calls_chunks = sum(sizes)
            self.first_complete = len(self.words) + sizes[0] - 1 if sizes else None
        self.total = len(self.words) + calls_chunks + 1  # the closing chunk

    def chunks(self) -> Iterator[AIMessageChunk]:
        """The turn's chunks, made as they are read."""
        for word in self.words:
            yield AIMessageChunk(content=word)
        calls = self.turn.tool_calls
        if self.batched and calls:
            yield AIMessageChunk(
                content="",
                tool_call_chunks=[
                    tool_call_chunk(
                        name=c.name, args=raw, id=_call_id(self.turn_index, i, self.user_turn), index=i
                    )
                    for i, (c, raw) in enumerate(zip(calls, self.raw_args, strict=True))
                ],
            )
        elif not self.batched:
            for i, (call, raw) in enumerate(zip(calls, self.raw_args, strict=True)):
                header = tool_call_chunk(
                    name=call.name, args="", id=_call_id(self.turn_index, i, self.user_turn), index=i
                )
                yield AIMessageChunk(content="", tool_call_chunks=[header])
                for start in range(0, len(raw), ARGS_PIECE_CHARS):
                    piece = tool_call_chunk(name=None, args=raw[start : start + ARGS_PIECE_CHARS], index=i)
                    yield AIMessageChunk(content="", tool_call_chunks=[piece])
        yield AIMessageChunk(content="", chunk_position="last", usage_metadata=self.usage)
