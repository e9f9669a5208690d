"""Drive any registered protocol and turn its streams into the typed event union.

The CLI, the notebooks and the HTTP server all run protocols through this module, so a new
protocol needs no new code here.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any, TypeVar, cast

from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.messages import HumanMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tracers.langchain import LangChainTracer
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import Checkpointer, Command, Durability

from phasegraph.graphs.registry import ProtocolSpec, get_protocol
from phasegraph.nodes.approval import AwaitingAnswer
from phasegraph.nodes.context import RunContext
from phasegraph.nodes.emit import EVENT_KEY, TRACE_KEY
from phasegraph.nodes.errors import ConflictError, PhasegraphError, describe
from phasegraph.nodes.events import ErrorEvent, Event, EventBase, Final, parse_event
from phasegraph.nodes.logs import bind_run, run_fields, unbind_run
from phasegraph.nodes.redact import redactor
from phasegraph.nodes.telemetry.langsmith import langsmith_tracer
from phasegraph.nodes.trace import DEFAULT_TRACES, TraceEntry, TraceStore

E = TypeVar("E", bound=EventBase)
logger = logging.getLogger(__name__)
#: ``stream_graph``'s marker: the run's log ids are not bound at the moment.
_NOTHING_BOUND: Any = object()


@dataclass
class RunResult:
    """Everything one run produced."""

    events: list[Event] = field(default_factory=list)
    trace: list[TraceEntry] = field(default_factory=list)

    @property
    def final(self) -> Final | None:
        """The ``final`` event, when the run produced one."""
        return next((e for e in self.events if isinstance(e, Final)), None)

    @property
    def error(self) -> ErrorEvent | None:
        """The ``error`` event, when the run failed."""
        return next((e for e in self.events if isinstance(e, ErrorEvent)), None)


class _Stamper:
    """Gives events their envelope: ids, protocol and a per-request monotonic ``seq``."""

    def __init__(self, context: RunContext, protocol: str, seq_start: int) -> None:
        self.context, self.protocol, self.seq = context, protocol, seq_start

    def _envelope(self) -> dict[str, Any]:
        """The next ``seq`` and the run's ids, under their wire names."""
        self.seq += 1
        return {
            "seq": self.seq,
            "requestId": self.context.request_id,
            "projectId": self.context.project_id,
            "protocol": self.protocol,
        }

    def parse(self, payload: dict[str, Any]) -> Event:
        """The event a node wrote (wire names), validated once with the envelope in place."""
        event = parse_event({**payload, **self._envelope()})
        return redactor().model(event)  # no configured secret leaves a run

    def make(self, event_type: type[E], **fields: Any) -> E:
        return redactor().model(event_type.model_validate({**fields, **self._envelope()}))


async def stream_graph(
    spec: ProtocolSpec,
    graph: CompiledStateGraph[Any, Any, Any, Any],
    graph_input: Any,
    context: RunContext,
    config: RunnableConfig | None = None,
    *,
    traces: TraceStore | None = None,
    seq_start: int = 0,
    durability: Durability | None = None,
    interrupts: dict[str, Any] | None = None,
) -> AsyncIterator[Event]:
    """Run ``graph`` and yield the typed events its nodes emit; a failure ends with an ``error`` event.

    Every protocol emits its own events (``text`` and ``final`` included), so this layer only
    stamps them; Studio and ``langgraph-sdk`` clients read the same events from the custom stream.

    Args:
        spec: The protocol being run.
        graph: A compiled graph of that protocol (with or without checkpointer).
        graph_input: The graph input, or a ``Command`` / ``None`` to resume from a checkpoint.
        context: The run's Context.
        config: LangGraph config (``thread_id`` when checkpointing).
        traces: Where trace entries go (the process default when omitted).
        seq_start: Last ``seq`` already sent for this request, so a resumed run continues it.
        durability: When checkpoints are saved (LangGraph's ``durability``; its default when omitted).
        interrupts: ``interrupt_before``/``interrupt_after`` for this run (the compiled ones when omitted).
    """
    store = traces or DEFAULT_TRACES
    stamper = _Stamper(context, spec.id, seq_start)
    reported = False  # the graph already emitted the error event of the failure it raises
    config = _traced(config, context)
    run_trace = context.run_trace()
    fields = run_fields(context, spec.id, config, run_trace)
    bound = bind_run(fields)  # what is logged during the run carries its ids
    try:
        # subgraphs: a protocol's subgraph (planner's plan executor) emits through its own writer
        async for _, chunk in graph.astream(
            graph_input,
            config,
            context=context,
            stream_mode="custom",
            durability=durability,
            subgraphs=True,
            **(interrupts or {}),
        ):
            custom = cast(dict[str, Any], chunk)
            if TRACE_KEY in custom:
                store.append(redactor().model(TraceEntry.model_validate(custom[TRACE_KEY])))
            elif EVENT_KEY in custom:
                event = stamper.parse(custom[EVENT_KEY])
                reported = isinstance(event, ErrorEvent)
                run_trace.observe(event)
                unbind_run(bound)  # the caller's own lines between events are not the run's
                try:
                    yield event
                finally:
                    bound = bind_run(fields)
    except Exception as exc:  # every failure reaches the client as one error event
        if not isinstance(exc, PhasegraphError):
            logger.exception("request %s (%s) failed", context.request_id, spec.id)
        if not reported:
            kind, message = describe(exc)
            event = stamper.make(ErrorEvent, kind=kind, message=message)
            run_trace.observe(event)
            unbind_run(bound)
            bound = _NOTHING_BOUND
            yield event
    finally:
        if bound is not _NOTHING_BOUND:
            unbind_run(bound)


def _traced(config: RunnableConfig | None, context: RunContext) -> RunnableConfig:
    """``config`` with the run's span handler among its callbacks (the thread is the conversation).

    With LangSmith tracing on, the run's LangSmith tracer is one that masks secrets (LangChain adds
    its own, which does not, only to callbacks that have none).
    """
    config = config or {}
    thread = str(config.get("configurable", {}).get("thread_id", ""))
    handlers: list[BaseCallbackHandler] = [context.run_trace(thread).handler]
    callbacks = config.get("callbacks")
    if (tracer := langsmith_tracer()) is not None and not _has_langsmith(callbacks):
        handlers.append(tracer)
    if callbacks is None:
        return {**config, "callbacks": handlers}
    if isinstance(callbacks, list):
        return {**config, "callbacks": [*callbacks, *(h for h in handlers if h not in callbacks)]}
    copied = callbacks.copy()  # a callback manager
    for handler in handlers:
        copied.add_handler(handler, inherit=True)
    return {**config, "callbacks": copied}


def _has_langsmith(callbacks: Any) -> bool:
    handlers = callbacks if isinstance(callbacks, list) else getattr(callbacks, "handlers", None) or []
    return any(isinstance(h, LangChainTracer) for h in handlers)


async def stream_run(
    protocol: str,
    message: str,
    *,
    context: RunContext | None = None,
    checkpointer: Checkpointer = None,
    thread_id: str | None = None,
    traces: TraceStore | None = None,
    resume: Any = None,
    **context_fields: Any,
) -> AsyncIterator[Event]:
    """Run one user turn of ``protocol`` and yield its events.

    Either pass a ready ``context`` or the Context fields (``model=``, ``workspace=``, ...);
    ``config=`` names a project file (``phasegraph.toml``) in place of the one in force. On a thread that
    waits for an approval, ``resume`` is the answer (``"approve"``, ...) and ``message`` goes unread; a
    message alone is refused there (:class:`AwaitingAnswer`), never read as the answer.
    """
    if "config" in context_fields:
        context_fields["project_file"] = str(context_fields.pop("config") or "")
    spec = get_protocol(protocol)
    if resume is None:
        spec.check_message(message)
    run_context = context or spec.make_context(**context_fields)
    config: RunnableConfig = {"configurable": {"thread_id": thread_id or run_context.request_id}}
    graph = spec.compile(checkpointer)
    try:
        if resume is None:
            inputs: Any = await turn_input(graph, config, message, config["configurable"]["thread_id"])
        else:
            inputs = await answer_input(graph, config, resume, config["configurable"]["thread_id"])
        async for event in stream_graph(spec, graph, inputs, run_context, config, traces=traces):
            yield event
    finally:
        await run_context.aclose()


async def turn_input(
    graph: CompiledStateGraph[Any, Any, Any, Any], config: RunnableConfig, message: str, thread_id: str
) -> dict[str, Any]:
    """The graph input of a user's turn on a thread: the message.

    A thread waiting in an ``interrupt`` (an approval its last turn asked) takes no new message:
    :class:`AwaitingAnswer` (409). Its answer is explicit, a resume, never a message read as one.
    """
    if graph.checkpointer is not None and (waiting := (await graph.aget_state(config)).interrupts):
        raise AwaitingAnswer(thread_id, waiting[0].value)
    return {"messages": [HumanMessage(message)]}


async def answer_input(
    graph: CompiledStateGraph[Any, Any, Any, Any], config: RunnableConfig, answer: Any, thread_id: str
) -> Command[Any]:
    """The graph input answering the question (an approval) a thread waits on; 409 when it waits on none."""
    if graph.checkpointer is None or not (await graph.aget_state(config)).interrupts:
        raise ConflictError(f"thread {thread_id!r} waits for no answer: send a message instead")
    return Command(resume=answer)


async def run(protocol: str, message: str, **kwargs: Any) -> RunResult:
    """Run one turn to the end and return its events and full trace (see ``stream_run``)."""
    traces: TraceStore = kwargs.setdefault("traces", DEFAULT_TRACES)
    result = RunResult()
    async for event in stream_run(protocol, message, **kwargs):
        result.events.append(event)
    if result.events:
        result.trace = traces.get(result.events[0].request_id)
    return result
