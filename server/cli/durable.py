"""Turns on durable threads from the command line, through the server's own run engine.

``phasegraph run --thread`` and ``phasegraph chat`` open the database ``phasegraph serve`` uses
(``PHASEGRAPH_CHECKPOINTER``, or the run's ``-s database=...``) and drive each turn as one request
of a ``RunManager``, as a server replica would: the request, its events and traces are stored
there, so a later turn, ``phasegraph inspect`` and the server all see the thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import Callable
from contextlib import AsyncExitStack
from typing import Any, Self

from phasegraph.nodes.errors import ConflictError
from phasegraph.nodes.events import Cancelled, ErrorEvent, Event, Final, Paused
from phasegraph.nodes.settings import ServerSettings
from phasegraph.server.cli.approvals import Approval, approval_of
from phasegraph.server.cli.options import error_exit_code
from phasegraph.server.runs.manager import RunManager
from phasegraph.server.runs.starting import TURN
from phasegraph.server.storage.checkpoints import thread_config
from phasegraph.server.storage.persistence import open_checkpointer
from phasegraph.server.storage.records import RequestRecord
from phasegraph.server.storage.store import RequestStore

#: Context fields the engine sets from its own settings, not from a request's.
_ENGINE_FIELDS = ("model", "workspace", "project_id", "show_tool_outputs", "database")


class DurableRuns:
    """One process's turns on the server's database (an async context manager around a run manager)."""

    def __init__(self, fields: dict[str, Any]) -> None:
        """Take a run's Context fields as ``run_fields`` makes them."""
        self.project_id: str = fields["project_id"]
        self.show_tool_outputs: bool = fields["show_tool_outputs"]
        #: Every other field, kept on each request as the operator's settings.
        self.operator = {k: v for k, v in fields.items() if k not in _ENGINE_FIELDS}
        overrides: dict[str, Any] = {"model": fields["model"], "workspace": fields["workspace"]}
        if "database" in fields:  # the run's database is the server's: its threads live there too
            overrides["checkpointer"] = fields["database"]
        # A dead process's run found here is paused (resumable by anyone), never driven by this command.
        self.settings = ServerSettings(**overrides, on_orphan="pause")
        self._stack = AsyncExitStack()
        self._manager: RunManager | None = None

    async def __aenter__(self) -> Self:
        """Open the checkpointer, the request store and the run manager (as ``phasegraph serve`` does)."""
        stack = self._stack
        try:
            saver = await stack.enter_async_context(open_checkpointer(self.settings.checkpointer))
            store = RequestStore.for_checkpointer(self.settings.checkpointer)
            stack.push_async_callback(store.close)
            await store.setup()
            manager = RunManager(self.settings, store, saver)
            await manager.open()
            stack.push_async_callback(manager.close)
        except BaseException:
            await stack.aclose()
            raise
        self._manager = manager
        return self

    async def __aexit__(self, *exc: object) -> None:
        """Close everything, pausing a run still going (none is, between turns)."""
        await self._stack.aclose()

    @property
    def manager(self) -> RunManager:
        """The run manager (open inside the ``async with``)."""
        if self._manager is None:
            raise RuntimeError("DurableRuns is used outside its 'async with'")
        return self._manager

    async def thread_protocol(self, thread_id: str) -> str | None:
        """The protocol of the project's thread of that id (``None``: no such thread yet)."""
        found = await self.manager.store.threads(thread_id, frozenset({self.project_id}))
        return found[0].protocol if found else None

    async def approval(self, protocol: str, thread_id: str) -> Approval | None:
        """The approval the project's thread of that id waits for (``None``: none, or no such thread)."""
        found = await self.manager.store.threads(thread_id, frozenset({self.project_id}))
        if not found:
            return None
        graph = self.manager.protocol(protocol).graph
        return approval_of((await graph.aget_state(thread_config(found[0].thread_key))).interrupts)

    async def turn(
        self, protocol: str, message: str, thread_id: str, render: Callable[[Event], None],
        graph_input: Any = TURN,
    ) -> Event:  # fmt: skip
        """Run one user turn on the thread, rendering its events; return the event that ended it.

        Ctrl-C (SIGINT) during the turn cancels it: the request ends ``cancelled`` at its last
        checkpoint and the thread takes the next turn. A thread waiting for an approval refuses a
        message (the answer is ``graph_input``, a ``Command(resume=...)``, which replaces the message).
        Refusals (another protocol's thread, one that is running, a bad setting) raise before anything
        runs.
        """
        manager, loop = self.manager, asyncio.get_running_loop()
        interrupted = asyncio.Event()
        loop.add_signal_handler(signal.SIGINT, interrupted.set)
        last: Event | None = None
        try:
            record = await manager.start(
                manager.protocol(protocol), message, project_id=self.project_id, request_id=None,
                thread_id=thread_id, model=None, show_tool_outputs=self.show_tool_outputs,
                operator=self.operator, graph_input=graph_input,
            )  # fmt: skip
            canceller = loop.create_task(self._cancel_on(interrupted, record))
            try:
                async for event in manager.follow(record):
                    render(event)
                    last = event
            finally:
                if interrupted.is_set():
                    await canceller  # cancelling it mid-cancel would cancel the run's own ending
                else:
                    canceller.cancel()
        finally:
            loop.remove_signal_handler(signal.SIGINT)
        if last is None:  # follow ends after a stop event; a run always stores one
            raise RuntimeError(f"request {record.request_id} ended without an event")
        return last

    async def _cancel_on(self, interrupted: asyncio.Event, record: RequestRecord) -> None:
        """Cancel ``record``'s run once ``interrupted`` is set (its stream then ends ``cancelled``)."""
        await interrupted.wait()
        manager = self.manager
        with contextlib.suppress(ConflictError):  # it finished meanwhile: nothing left to cancel
            await manager.cancel(await manager.engine.current(record))


def turn_exit_code(ended: Event) -> int:
    """The command's exit code for a turn that ended with ``ended``.

    0: a final answer, or a question the thread now waits on (answer it with the next turn);
    130: cancelled (Ctrl-C, as a shell reports SIGINT); 2 or 1: an error (``error_exit_code``).
    """
    if isinstance(ended, Final) or (isinstance(ended, Paused) and ended.reason == "interrupt"):
        return 0
    if isinstance(ended, ErrorEvent):
        return error_exit_code(ended)
    return 130 if isinstance(ended, Cancelled) else 1
