"""Emit typed events and trace entries through LangGraph's custom stream."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from functools import wraps
from typing import Any, ParamSpec, TypeVar

from langgraph.config import get_config, get_stream_writer
from langgraph.errors import GraphBubbleUp
from langgraph.runtime import get_runtime
from langgraph.types import StreamWriter

from phasegraph.nodes.context import RunContext
from phasegraph.nodes.errors import describe
from phasegraph.nodes.events import ErrorEvent, EventBase
from phasegraph.nodes.telemetry import note
from phasegraph.nodes.trace import TraceEntry, TraceType

E = TypeVar("E", bound=EventBase)
P = ParamSpec("P")
R = TypeVar("R")

#: Keys of the custom-stream payloads; the run layer splits the stream on them.
EVENT_KEY = "phasegraph_event"
TRACE_KEY = "phasegraph_trace"


class Emitter:
    """Stamps events with the run's ids and writes them, and trace entries, to the stream."""

    def __init__(self, context: RunContext, writer: StreamWriter | None = None) -> None:
        self.context = context
        self.writer = writer or get_stream_writer()

    def emit(self, event_type: type[E], **fields: Any) -> E:
        """Build an event of ``event_type`` for this run and write it."""
        event = event_type(
            request_id=self.context.request_id,
            project_id=self.context.project_id,
            protocol=self.context.PROTOCOL,
            graph_step=current_step(),
            **fields,
        )
        self.writer({EVENT_KEY: event.to_dict()})
        note(event)  # on the span of the node emitting it
        return event

    def trace(self, kind: TraceType, **details: Any) -> None:
        """Write one trace entry (kept in full, raw tool outputs included)."""
        entry = TraceEntry(type=kind, request_id=self.context.request_id, details=details)
        self.writer({TRACE_KEY: entry.model_dump(mode="json")})


@contextmanager
def errors_reported(emitter: Emitter) -> Iterator[None]:
    """Emit an ``error`` event for a failure, then let it propagate unchanged.

    The graph itself then tells every client (Studio and langgraph-sdk read only the graph's
    streams) why the turn failed; the run layer does not repeat it. Interrupts and other
    LangGraph control flow (``GraphBubbleUp``) are not failures and pass untouched.
    """
    try:
        yield
    except GraphBubbleUp:
        raise
    except Exception as exc:
        kind, message = describe(exc)
        emitter.emit(ErrorEvent, kind=kind, message=message)
        raise


def reports_errors(node: Callable[P, Awaitable[R]]) -> Callable[P, Awaitable[R]]:
    """Decorate an async node so its failures reach clients as ``error`` events.

    A failure ends the run, so what the run's Context holds open (MCP sessions, spans) is released
    here too: a client such as ``langgraph dev`` drives the graph without closing the Context.
    """

    @wraps(node)  # LangGraph reads the node's own signature through ``__wrapped__``
    async def reporting(*args: P.args, **kwargs: P.kwargs) -> R:
        runtime = get_runtime(RunContext)
        try:
            with errors_reported(Emitter(runtime.context, runtime.stream_writer)):
                return await node(*args, **kwargs)
        except GraphBubbleUp:
            raise
        except Exception:
            await runtime.context.aclose()
            raise

    return reporting


def current_step() -> int | None:
    """The LangGraph superstep running now (``None`` outside a graph run, or inside a subgraph).

    A subgraph counts its own supersteps, which say nothing about the run's checkpoints, so its
    events carry none (a crash re-run does not mark them as replaced).
    """
    try:
        metadata = get_config().get("metadata", {})
    except RuntimeError:  # called outside a runnable context
        return None
    step = metadata.get("langgraph_step")
    nested = "|" in str(metadata.get("langgraph_checkpoint_ns", ""))
    return step if isinstance(step, int) and not nested else None
