"""``phasegraph chat``: an interactive conversation with a protocol on a durable thread.

Each line read is one user turn, run like ``phasegraph run --thread`` (the server's run engine on
its database), so the thread can be continued later by either command, inspected, or opened
through the server. Lines come from a reader thread, so the event loop stays free to stream a
turn and to hear Ctrl-C; stdin may be a terminal or a pipe.
"""

from __future__ import annotations

import asyncio
import signal
import sys
import threading
from typing import Annotated, Any
from uuid import uuid4

import typer
from rich.console import Console

from phasegraph.nodes.errors import ConflictError, PhasegraphError
from phasegraph.nodes.events import Event, Final, PhaseEnd, PhaseStart
from phasegraph.server.cli.approvals import Approval, Approvals, ApproveAllOption
from phasegraph.server.cli.durable import DurableRuns
from phasegraph.server.cli.options import (
    ContextTypeOption,
    EntityIdOption,
    ModelOption,
    ProjectOption,
    ProtocolArg,
    SettingOption,
    ShowToolOutputsOption,
    WorkspaceOption,
    check_thread_id,
    refuse,
    run_fields,
    spec_or_exit,
)
from phasegraph.server.cli.project_file import ConfigOption, use_project
from phasegraph.server.cli.render import EventRenderer
from phasegraph.server.cli.turns import answer_approvals, answer_waiting

#: Lines that end the chat (as end of input and Ctrl-C at the prompt do).
EXIT_COMMANDS = frozenset({"/exit", "/quit"})


def chat_command(
    protocol: ProtocolArg,
    thread: Annotated[
        str | None, typer.Option(help="Continue this thread (default: a new thread, its id printed first).")
    ] = None,
    model: ModelOption = None,
    workspace: WorkspaceOption = None,
    project: ProjectOption = "default",
    show_tool_outputs: ShowToolOutputsOption = False,
    setting: SettingOption = None,
    context_type: ContextTypeOption = None,
    entity_id: EntityIdOption = None,
    config: ConfigOption = None,
    approve_all: ApproveAllOption = False,
) -> None:
    """Chat with a protocol on a durable thread: one turn per line; /exit, /quit or Ctrl-D ends it.

    A call whose tool's policy says confirm waits for your answer on the next lines: a (approve),
    e (edit: then the arguments as a JSON object) or r (reject: then a reason); --approve-all
    approves every call without asking.

    The thread lives in the server's database (PHASEGRAPH_CHECKPOINTER): continue it with
    --thread here or in `phasegraph run`, look at it with `phasegraph inspect`. Ctrl-C cancels the
    turn under way (the thread stays usable); at the prompt it ends the chat (exit 130).
    """
    spec_or_exit(protocol)
    use_project(config, protocols=[protocol])
    fields = run_fields(
        model, workspace, project, show_tool_outputs, setting, context_type, entity_id, protocol=protocol
    )
    try:
        thread_id = check_thread_id(thread) if thread is not None else str(uuid4())
        code = asyncio.run(_chat(protocol, thread_id, fields, Console(soft_wrap=True), approve_all))
    except PhasegraphError as exc:  # refused before the first turn: bad settings, another protocol's thread
        refuse(exc, json_lines=False)
    raise typer.Exit(code)


async def _chat(
    protocol: str, thread_id: str, fields: dict[str, Any], console: Console, approve_all: bool
) -> int:
    """Read lines and run each as a turn until the chat ends; return the exit code."""
    async with DurableRuns(fields) as runs:
        owner = await runs.thread_protocol(thread_id)
        if owner is not None and owner != protocol:
            raise ConflictError(f"thread {thread_id!r} belongs to protocol {owner!r}")
        state = "continued" if owner else "new"
        console.print(f"thread {thread_id} ({protocol}, {state}); /exit or Ctrl-D ends the chat",
                      highlight=False)  # fmt: skip
        lines = _Lines(asyncio.get_running_loop(), echo=not sys.stdin.isatty(), console=console)
        approvals = Approvals("all" if approve_all else "ask", console, lines.answer)
        if owner is not None and (waiting := await runs.approval(protocol, thread_id)) is not None:
            # a message is no answer (it would be refused): the approval the thread waits on comes first
            render = ChatRenderer(console)
            settled = await answer_waiting(runs, protocol, thread_id, waiting, render, approvals)
            if isinstance(settled, Approval):
                return _unanswered(console, settled, protocol, thread_id, lines)
        while True:
            line = await lines.next()
            if line is None:
                return 130 if lines.interrupted else 0
            text = line.strip()
            if not text:
                continue
            if text in EXIT_COMMANDS:
                return 0
            try:
                render = ChatRenderer(console)
                ended = await runs.turn(protocol, text, thread_id, render)
                settled = await answer_approvals(runs, protocol, thread_id, ended, render, approvals)
            except PhasegraphError as exc:  # refused before the turn ran (the thread is busy, ...)
                console.print(f"[red]error: {exc}[/]", highlight=False)
                continue
            if isinstance(settled, Approval):  # input ended (or Ctrl-C) before the answer
                return _unanswered(console, settled, protocol, thread_id, lines)


def _unanswered(console: Console, approval: Approval, protocol: str, thread_id: str, lines: _Lines) -> int:
    """Say how to answer the approval the chat left waiting; the exit code."""
    console.print(f"the thread waits for your approval of {approval.call.get('name')}: answer it with "
                  f"phasegraph chat {protocol} --thread {thread_id}, or phasegraph run {protocol} --thread "
                  f"{thread_id} --resume approve (or reject)", markup=False, highlight=False)  # fmt: skip
    return 130 if lines.interrupted else 0


class _Lines:
    """The user's lines, read by a daemon thread (a blocked read never holds the process at exit)."""

    def __init__(self, loop: asyncio.AbstractEventLoop, *, echo: bool, console: Console) -> None:
        self.loop, self.echo, self.console = loop, echo, console
        self.queue: asyncio.Queue[str | None] = asyncio.Queue()
        #: Ctrl-C at the prompt ended the chat.
        self.interrupted = False
        threading.Thread(target=self._read, name="chat-stdin", daemon=True).start()

    def _read(self) -> None:
        try:
            for line in sys.stdin:
                self.loop.call_soon_threadsafe(self.queue.put_nowait, line)
            self.loop.call_soon_threadsafe(self.queue.put_nowait, None)
        except RuntimeError:  # the chat ended and its loop closed while this thread still read
            return

    async def answer(self) -> str | None:
        """The next line, answering a question the chat printed (``None`` at end of input or Ctrl-C)."""
        line = await self._line()
        if line is not None and self.echo:
            self.console.print(line.rstrip(), markup=False, highlight=False)
        return line

    async def next(self) -> str | None:
        """The next line (``None`` at end of input or Ctrl-C), with a prompt."""
        if not self.echo:
            self.console.print("[bold]you>[/] ", end="")
        line = await self._line()
        if line is not None and line.strip() and self.echo:
            self.console.print("[bold]you>[/] ", end="")
            self.console.print(line.rstrip(), markup=False, highlight=False)
        return line

    async def _line(self) -> str | None:
        """The next line; ``None`` at end of input, or on Ctrl-C (which ends the chat)."""
        interrupt = asyncio.Event()
        self.loop.add_signal_handler(signal.SIGINT, interrupt.set)
        reading, stopping = asyncio.ensure_future(self.queue.get()), asyncio.ensure_future(interrupt.wait())
        try:
            await asyncio.wait((reading, stopping), return_when=asyncio.FIRST_COMPLETED)
        finally:
            self.loop.remove_signal_handler(signal.SIGINT)
            stopping.cancel()
        if not reading.done():
            reading.cancel()
            self.interrupted = True
            self.console.print()
            return None
        return reading.result()


class ChatRenderer(EventRenderer):
    """A turn as a chat shows it: the assistant's text, compact tool lines, the answer once."""

    def __call__(self, event: Event) -> None:
        """Render one event; phase boundaries are left out, and a streamed answer is not repeated."""
        if isinstance(event, PhaseStart | PhaseEnd):
            return
        if isinstance(event, Final):
            self._final(event)
            return
        super().__call__(event)

    def _final(self, event: Final) -> None:
        if self._in_text:
            self.console.print()
            self._in_text = False
        # an answer the turn did not end by streaming (a fallback, a question after a preamble) is news
        if not self.streamed(event.answer):
            self.console.print(event.answer, markup=False, highlight=False)
        if event.all_tools_failed:
            self.console.print("[yellow](every tool call failed; the answer rests on no tool output)[/]")
