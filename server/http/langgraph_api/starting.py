"""Start a LangGraph API run as an ordinary phasegraph request on the one run manager.

The thread must exist (or ``if_not_exists: "create"``); the body's ``input`` / ``command`` become
the graph input; ``context`` (and ``config.configurable``) the protocol's client settings; the
stops and where the run started are kept on the request for any replica that drives it.
"""

from __future__ import annotations

import asyncio
from typing import Any
from uuid import uuid4

from langgraph.graph.state import CompiledStateGraph
from langgraph.types import Command, StateSnapshot

from phasegraph.graphs.registry import ProtocolSpec
from phasegraph.nodes.approval import AwaitingAnswer
from phasegraph.nodes.errors import ConfigurationError, ConflictError, InvalidInputError, NotFoundError
from phasegraph.server.http.bodies import refuse_wide_integers
from phasegraph.server.http.langgraph_api.bodies import RunFields, ThreadRunBody
from phasegraph.server.http.langgraph_api.common import client_messages
from phasegraph.server.runs.manager import RunManager
from phasegraph.server.runs.protocols import Served
from phasegraph.server.runs.stops import checked_stops
from phasegraph.server.storage.checkpoints import require_next, snapshot_at, thread_config
from phasegraph.server.storage.records import RequestRecord, ThreadBusy
from phasegraph.server.storage.threads import ThreadExists, ThreadRecord, ThreadStore

Graph = CompiledStateGraph[Any, Any, Any, Any]
#: How often a run waiting its turn (``multitask_strategy: "enqueue"``) looks at its thread.
ENQUEUE_POLL_SECONDS = 0.1
BUSY = "the thread has a run in progress; wait for it or use multitask_strategy enqueue"


def protocol_of(manager: RunManager, assistant_id: str) -> Served:
    """The protocol an assistant id names, resolved once for the whole call (404 when none)."""
    try:
        return manager.protocol(assistant_id)
    except ConfigurationError:
        raise NotFoundError(f"assistant {assistant_id!r} not found") from None


async def thread_for(
    threads: ThreadStore, project_id: str, thread_id: str, if_not_exists: str
) -> ThreadRecord:
    """The thread a run goes on: an existing one, or a new one when the body allows it."""
    thread = await threads.get(project_id, thread_id)
    if thread is not None:
        return thread
    if if_not_exists != "create":
        raise NotFoundError(f"thread {thread_id!r} not found")
    try:
        return await threads.create(project_id, thread_id, {})
    except ThreadExists:  # a run starting at the same moment made it: go on it, as if it had been there
        return await thread_for(threads, project_id, thread_id, if_not_exists)


#: Input keys AG-UI's and CopilotKit's LangGraph agents add to every run (the client's own tools and
#: readable context): accepted and dropped while they are empty, as phasegraph's protocols run
#: their own tools.
CLIENT_KEYS = ("tools", "copilotkit")


def _no_client_tools(given: dict[str, Any]) -> None:
    """Refuse client-side tools or context (422) rather than drop them unseen."""
    kit = given.get("copilotkit")
    if kit is not None and not isinstance(kit, dict):
        raise InvalidInputError("input.copilotkit: an object with actions and context")
    found = {
        "input.tools": given.get("tools"),
        **{f"input.copilotkit.{k}": v for k, v in (kit or {}).items()},
    }
    for where, value in found.items():
        if value:
            raise InvalidInputError(
                f"{where}: client-side tools and context are not served (each protocol runs its own "
                "tools); send an empty list"
            )


def commanded(body: RunFields) -> bool:
    """Whether the body's ``command`` is what the run goes on with: a command with a field set wins.

    As the reference server does, ``input`` is then ignored, unread: Agent Chat UI answers an
    interrupt with ``submit({}, {command})`` (``input: {}``) and CopilotKit's LangGraph adapter
    sends its whole state as ``input`` beside the command. An empty ``command: {}`` counts as none.
    """
    return body.command is not None and bool(body.command.model_fields_set)


def graph_input(spec: ProtocolSpec, graph: Graph, body: RunFields) -> tuple[Any, str | None]:
    """The graph input and the user's message in it (size and content checks), from input or command."""
    if body.command is not None and commanded(body):
        refuse_wide_integers(body.command.resume, "command.resume")
        return Command(resume=body.command.resume), None
    refuse_wide_integers(body.input, "input")  # what a checkpoint cannot save fails here, not mid-run
    if body.input is None:
        return None, None  # go on from where the thread stopped
    allowed = set(graph.get_input_jsonschema().get("properties", {}))
    unknown = sorted(set(body.input) - allowed - set(CLIENT_KEYS))
    if unknown:
        raise InvalidInputError(
            f"input.{unknown[0]} is not an input of {spec.id!r} ({', '.join(sorted(allowed))})"
        )
    _no_client_tools(body.input)
    messages = client_messages(body.input.get("messages", []), "input.messages")
    human = [m for m in messages if m.type == "human"]
    message = human[-1].text if human else ""
    spec.check_message(message)
    taken = {key: value for key, value in body.input.items() if key in allowed}
    return {**taken, "messages": messages}, message


def run_settings(
    spec: ProtocolSpec, body: RunFields, project_id: str
) -> tuple[str | None, dict[str, Any], bool]:
    """(model, protocol settings, show_tool_outputs) from ``context`` and ``config.configurable``."""
    context = {**(body.config.configurable if body.config else {}), **body.context}
    model = context.pop("model", None)
    if model is not None and not isinstance(model, str):
        raise InvalidInputError("context.model: a model spec, as a string")
    show = context.pop("show_tool_outputs", False)
    if not isinstance(show, bool):
        raise InvalidInputError("context.show_tool_outputs: true or false")
    if context.pop("project_id", project_id) != project_id:
        raise InvalidInputError("context.project_id: the project is the request's (X-Phasegraph-Project)")
    return model, spec.client_settings(context), show


async def wait_for_turn(manager: RunManager, threads: ThreadStore, thread_key: str, strategy: str) -> None:
    """While another run of the thread runs: refuse (``reject``), wait (``enqueue``), or stop it.

    ``interrupt`` cancels it (its checkpoints stay: the new run goes on from its last one);
    ``rollback`` cancels it and removes it with its checkpoints. Either way the run stops wherever
    it is driven, and the new one starts only once the thread is free (one running run per thread).
    """
    while await manager.store.thread_busy(thread_key):
        if strategy == "reject":
            raise ConflictError(BUSY)
        if strategy in ("interrupt", "rollback"):
            for record in await threads.requests(thread_key):
                if record.status == "running":
                    await _supersede(manager, record, strategy)
            continue
        await asyncio.sleep(ENQUEUE_POLL_SECONDS)


async def _supersede(manager: RunManager, record: RequestRecord, strategy: str) -> None:
    """Stop a running run for a new one (``interrupt``: cancelled; ``rollback``: and removed)."""
    try:
        if strategy == "rollback":
            await manager.roll_back(record)
        else:
            await manager.cancel(record)
            async for _ in manager.follow(record, 0):  # until its stop is stored, wherever it runs
                pass
    except ConflictError:  # it ended meanwhile: nothing left to stop
        pass


async def _snapshot(graph: Graph, thread: ThreadRecord, checkpoint_id: str | None) -> StateSnapshot:
    """The thread's latest checkpoint, or ``checkpoint_id`` (404 when the thread has no such one)."""
    if checkpoint_id is None:
        return await graph.aget_state(thread_config(thread.thread_key))
    # a fork: from a checkpoint the thread has (404 otherwise, never silently from its latest)
    return await snapshot_at(graph, thread.thread_key, checkpoint_id, shown_as=thread.thread_id)


def _questions(snapshot: StateSnapshot) -> frozenset[str]:
    """The ids of the questions (interrupts) waiting at a checkpoint: what a ``command.resume`` answers."""
    return frozenset(interrupt.id for interrupt in snapshot.interrupts)


async def _base(
    graph: Graph, thread: ThreadRecord, graph_in: Any, checkpoint_id: str | None, options: dict[str, Any]
) -> frozenset[str]:
    """Check the run can go on from where it starts and note where; the questions waiting there."""
    base = await _snapshot(graph, thread, checkpoint_id)
    if not isinstance(graph_in, dict):  # no input or a command: the run goes on from ``base``
        require_next(base, graph_in)
    elif checkpoint_id is None and base.interrupts:  # a new message is never read as the answer
        raise AwaitingAnswer(thread.thread_id, base.interrupts[0].value)
    options["base_step"] = (base.metadata or {}).get("step", -2) if base.created_at else -2
    if base.created_at:  # the checkpoint the run starts from names the nodes of its first step
        options["base_checkpoint_id"] = base.config["configurable"]["checkpoint_id"]
    return _questions(base)


async def start_run(
    manager: RunManager, threads: ThreadStore, body: RunFields, project_id: str, thread: ThreadRecord
) -> RequestRecord:
    """Start the body's run on ``thread`` and return its request."""
    served = protocol_of(manager, body.assistant_id)
    spec, graph = served.spec, served.graph
    options: dict[str, Any] = {
        "interrupt_before": checked_stops(spec, "interrupt_before", body.interrupt_before),
        "interrupt_after": checked_stops(spec, "interrupt_after", body.interrupt_after),
        "metadata": body.metadata,
        "stream_mode": body.modes(),
    }
    if not commanded(body) and body.input is not None and isinstance(body.input.get("messages"), list):
        manager.starter.check_message_count(len(body.input["messages"]))  # before any is converted
    graph_in, message = graph_input(spec, graph, body)
    if message is not None:
        manager.check_message_size(message)
    model, settings, show = run_settings(spec, body, project_id)
    checkpoint_id, strategy = None, "reject"
    if isinstance(body, ThreadRunBody):
        checkpoint_id = body.checkpoint.checkpoint_id if body.checkpoint else body.checkpoint_id
        if body.checkpoint and body.checkpoint.thread_id not in (None, thread.thread_id):
            raise InvalidInputError("checkpoint.thread_id: a run forks a checkpoint of its own thread")
        strategy = options["multitask_strategy"] = body.multitask_strategy
    # An answer (command.resume) is for the questions waiting when it was sent: one that finds others once
    # the thread is free (its question answered by a run that went first, which then asked again) is refused.
    asked = None
    if isinstance(graph_in, Command):
        asked = _questions(await _snapshot(graph, thread, checkpoint_id))
    while True:
        await wait_for_turn(manager, threads, thread.thread_key, strategy)
        waiting = await _base(graph, thread, graph_in, checkpoint_id, options)  # read once the thread is free
        if asked is not None and waiting != asked:
            raise ConflictError(
                "the question this answer was sent for was answered meanwhile by another run"
                if asked
                else "the thread waited for no answer when this one was sent: send it once the thread asks"
            )
        try:
            record = await manager.start(
                served, message or "", project_id=project_id, request_id=str(uuid4()),
                thread_id=thread.thread_id, model=model, show_tool_outputs=show, settings=settings,
                graph_input=graph_in, options=options, checkpoint_id=checkpoint_id,
            )  # fmt: skip
            break
        except ThreadBusy:  # another run of the thread started between the look and the start
            if strategy == "reject":
                raise ConflictError(BUSY) from None
    await threads.touch(thread, {"graph_id": spec.id, "assistant_id": spec.id})
    return record
