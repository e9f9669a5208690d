"""Starting runs: a new request on a new or existing thread, or a fork from one of a thread's checkpoints.

Everything a client can get wrong is checked before anything is stored: the protocol's client
settings, the message, the model, whether the request id is taken and whether the thread may take
another turn. The run's protocol comes in resolved (``Served``) and is carried down to its driver.
"""

from __future__ import annotations

import time
from typing import Any
from uuid import uuid4

from langchain_core.messages import HumanMessage

from phasegraph.graphs.run import turn_input
from phasegraph.nodes.context import RunContext
from phasegraph.nodes.errors import ConfigurationError, ConflictError, TooLargeError
from phasegraph.nodes.events import Resumed
from phasegraph.nodes.models import public_spec
from phasegraph.server.runs.driving import Driver
from phasegraph.server.runs.engine import Engine
from phasegraph.server.runs.protocols import Served
from phasegraph.server.runs.recovery import TURN_MESSAGE
from phasegraph.server.storage.checkpoints import require_next, snapshot_at, thread_config
from phasegraph.server.storage.records import RequestExists, RequestRecord, ThreadBusy, scoped_key
from phasegraph.server.storage.threads import ThreadRecord, ThreadStore

#: ``start``'s default input: the message is the user's turn.
TURN: Any = object()


class Starter:
    """Creates requests and launches their runs."""

    def __init__(self, engine: Engine, driver: Driver) -> None:
        self.engine, self.driver = engine, driver

    async def start(
        self, served: Served, message: str, *, project_id: str, request_id: str | None,
        thread_id: str | None, model: str | None, show_tool_outputs: bool,
        settings: dict[str, Any] | None = None, graph_input: Any = TURN,
        options: dict[str, Any] | None = None, checkpoint_id: str | None = None,
        operator: dict[str, Any] | None = None,
    ) -> RequestRecord:  # fmt: skip
        """Create a request and start its run in the background.

        ``settings`` are the Context fields the client chose (checked against what the protocol allows);
        ``operator`` are fields the operator chose (the ``phasegraph`` command's runs), any Context field.
        By default ``message`` is the user's turn; a LangGraph API run passes its own ``graph_input``
        instead (state, a ``Command`` or ``None`` to continue), may start from ``checkpoint_id`` (a
        fork) and keeps its ``options`` (``interrupt_before``/``interrupt_after``) on the record.
        """
        engine, spec = self.engine, served.spec
        engine.refuse_when_stopping()
        client = spec.client_settings(settings or {})
        if graph_input is TURN:
            spec.check_message(message)
        chosen = self._allowed_model(spec.id, model)
        request_id = request_id or uuid4().hex
        thread_id = thread_id or request_id
        taken, first = await engine.store.before_start(
            scoped_key(project_id, request_id), project_id, thread_id
        )
        if taken:  # refused before any work; the insert below decides a race (``store.create``)
            raise RequestExists(request_id)
        thread_key = await self._thread_key(first, thread_id, served, project_id)
        fields = {**(operator or {}), **client, "model": chosen, "project_id": project_id,
                  "show_tool_outputs": show_tool_outputs}  # fmt: skip
        record = self.new_record(request_id, project_id, spec.id, thread_id, thread_key, fields)
        record.options = options or {}
        turn = graph_input is TURN
        if turn:  # a later turn on a thread that waits for an answer (an approval) is refused: 409
            record.options[TURN_MESSAGE] = message  # kept: a run that saved nothing before a crash re-runs it
            graph_input = {"messages": [HumanMessage(message)]}
            if first is not None:
                graph_input = await turn_input(served.graph, thread_config(thread_key), message, thread_id)
        context = self._traced_context(
            served, record
        )  # a bad model spec fails here, before anything is stored
        try:
            await engine.store.create(record)  # the thread's one running request (ThreadBusy if another runs)
            if turn:
                await self._list_thread(record)
        except BaseException:
            await context.aclose("refused")
            raise
        # Subscribed before the run starts, so its stream needs no first read of the store.
        engine.fresh[record.request_key] = engine.hub.subscribe(record.request_key)
        self.driver.launch(
            served, record, graph_input, thread_config(record.thread_key, checkpoint_id), context
        )
        return record

    @staticmethod
    def _traced_context(served: Served, record: RequestRecord, *, resumed: bool = False) -> RunContext:
        """The request's Context, its run's root span begun (the run is accepted).

        The root's traceparent is kept with the request: a run that goes on later, anywhere, links to it.
        """
        context = served.context(record)
        record.settings["trace_parent"] = context.run_trace(record.thread_id, resumed=resumed).traceparent
        return context

    async def fork(self, origin: RequestRecord, checkpoint_id: str) -> RequestRecord:
        """Start a new request on ``origin``'s thread, continuing from ``checkpoint_id``."""
        self.engine.refuse_when_stopping()
        served = self.engine.protocols.get(origin.protocol)
        snapshot = await snapshot_at(served.graph, origin.thread_key, checkpoint_id)
        require_next(snapshot)
        # A fresh record: nothing of the origin's state (cancelled, pause flags) carries over.
        record = self.new_record(
            uuid4().hex,
            origin.project_id,
            origin.protocol,
            origin.thread_id,
            origin.thread_key,
            dict(origin.settings),
        )
        # The fork's root links to its origin's first run; the fork keeps its own for its later runs.
        context = self._traced_context(served, record, resumed=True)
        try:
            await self.engine.store.create(record)
            resumed = await self.engine.emit(
                served, record, Resumed, snapshot.values, seq=1, checkpoint_id=checkpoint_id, fork=True
            )
        except BaseException:
            await context.aclose("refused")
            raise
        config = thread_config(origin.thread_key, checkpoint_id)
        self.driver.launch(served, record.model_copy(update={"last_seq": resumed.seq}), None, config, context)
        return record

    def check_message_size(self, message: str) -> None:
        """Refuse a message longer than this server accepts (413), before anything else is looked up."""
        limit = self.engine.settings.max_message_chars
        if len(message) > limit:
            raise TooLargeError(
                f"the message has {len(message)} characters; this server accepts at most {limit}"
            )

    def check_message_count(self, count: int) -> None:
        """Refuse a request carrying more messages than this server accepts (413), before any is converted.

        Every message is converted, checkpointed at each step and sent to the model, so the count
        bounds what one request costs (and what one page of its thread's history holds).
        """
        limit = self.engine.settings.max_input_messages
        if count > limit:
            raise TooLargeError(
                f"the request carries {count} messages; this server accepts at most {limit} "
                "(PHASEGRAPH_MAX_INPUT_MESSAGES)"
            )

    def new_record(
        self, request_id: str, project_id: str, protocol: str, thread_id: str, thread_key: str,
        settings: dict[str, Any],
    ) -> RequestRecord:  # fmt: skip
        """A running request owned by this process."""
        return RequestRecord(
            request_key=scoped_key(project_id, request_id), request_id=request_id, project_id=project_id,
            protocol=protocol, thread_id=thread_id, thread_key=thread_key, status="running",
            settings=settings, owner=self.engine.owner, heartbeat_at=time.time(),
        )  # fmt: skip

    async def _list_thread(self, record: RequestRecord) -> None:
        """Make a turn's thread one every client lists (``/threads/search``, the page), last touched now.

        The LangGraph API records its threads itself; a turn of phasegraph's own routes or of the
        ``phasegraph`` command does it here, naming the protocol as the API's runs do.
        """
        thread = ThreadRecord(
            thread_key=record.thread_key, thread_id=record.thread_id, project_id=record.project_id
        )
        await ThreadStore(self.engine.store).merge_metadata(
            thread, {"graph_id": record.protocol, "assistant_id": record.protocol}
        )

    def _allowed_model(self, protocol: str, model: str | None) -> str:
        """The spec a request may run: the protocol's default, an allowed one, or one named as clients see it.

        The default is the operator's (PHASEGRAPH_MODEL), else the project file's for the protocol.
        """
        settings = self.engine.settings
        if model is None:
            return settings.default_model(protocol)
        allowed = settings.models(protocol)
        if model in allowed:
            return model
        by_public_name = {public_spec(spec): spec for spec in allowed}
        if model in by_public_name:
            return by_public_name[model]
        raise ConfigurationError(f"model {model!r} is not allowed here; allowed: {sorted(by_public_name)}")

    async def _thread_key(
        self, first: RequestRecord | None, thread_id: str, served: Served, project_id: str
    ) -> str:
        """The LangGraph thread of a project's thread id: a new one, or an existing thread it may join.

        A new turn may join a thread only of its own protocol, and not while it runs. Threads are
        per project: another project's thread of the same id is a different thread. A thread with
        checkpoints but no request yet (a copy, a state written through the API) is its ``graph_id``'s.
        """
        protocol = served.spec.id
        if first is None:
            key = scoped_key(project_id, thread_id)
            await self._check_unrun_thread(project_id, thread_id, served)
            return key
        if first.protocol != protocol:
            raise ConflictError(f"thread {thread_id!r} belongs to protocol {first.protocol!r}")
        if await self.engine.store.thread_busy(first.thread_key):  # a clear answer early; the insert decides
            raise ThreadBusy(thread_id)
        return first.thread_key

    async def _check_unrun_thread(self, project_id: str, thread_id: str, served: Served) -> None:
        """Refuse another protocol's turn on a thread no request ran whose checkpoints are its graph's."""
        thread = await ThreadStore(self.engine.store).get(project_id, thread_id)
        owner = thread.metadata.get("graph_id") if thread is not None else None
        if owner in (None, served.spec.id):
            return
        if (await served.graph.aget_state(thread_config(scoped_key(project_id, thread_id)))).values:
            raise ConflictError(f"thread {thread_id!r} belongs to protocol {owner!r}")
