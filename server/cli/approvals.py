"""Approvals on the command line: a run that stops before a call its tool's policy says to ``confirm``.

The run's graph waits in an ``interrupt`` whose value is ``{"type": "approval", "call": {id, name, args},
"reason": ..., "problem"?: ...}``. The command then either asks on the terminal (approve, edit the
arguments as JSON, or reject with a reason), approves every call itself (``--approve-all``), or writes
the interrupt as one JSON line and exits 3 (``--json``, or standard input that is no terminal), so a
script answers later with ``phasegraph run PROTOCOL --thread ID --resume '<answer>'``.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Annotated, Any, Literal

import typer
from rich.console import Console

from phasegraph.nodes.errors import ConfigurationError

#: The exit code of a run that stopped at an approval the command did not answer.
WAITING = 3

ApproveAllOption = Annotated[
    bool,
    typer.Option("--approve-all", help="Approve every tool call that waits for approval, without asking."),
]

#: Reads one line of the user's (``None`` at end of input).
LineReader = Callable[[], Awaitable[str | None]]


@dataclass(frozen=True)
class Approval:
    """The approval a run waits for: the interrupt's id and value."""

    interrupt_id: str
    value: dict[str, Any]

    @property
    def call(self) -> dict[str, Any]:
        """The call that waits: ``{"id", "name", "args"}``."""
        found: dict[str, Any] = self.value.get("call") or {}
        return found


def approval_of(interrupts: Sequence[Any]) -> Approval | None:
    """The approval among a thread's pending ``interrupts`` (``None`` when it waits for none)."""
    for item in interrupts:
        value = getattr(item, "value", None)
        if isinstance(value, dict) and value.get("type") == "approval":
            return Approval(str(getattr(item, "id", "")), value)
    return None


def parse_answer(text: str) -> Any:
    """A ``--resume`` answer: JSON (an object or a string), or a bare word such as approve or reject."""
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        if not text.strip():
            raise ConfigurationError("--resume takes an answer: approve, reject or a JSON object") from None
        return text.strip()


async def read_stdin_line() -> str | None:
    """The next line of standard input (``None`` at its end), read off the event loop."""
    line = await asyncio.to_thread(sys.stdin.readline)
    return line if line else None


class Approvals:
    """How one command answers approvals: ask on the terminal, approve all, or stop with exit code 3."""

    def __init__(
        self, mode: Literal["ask", "all", "emit"], console: Console, read_line: LineReader = read_stdin_line
    ) -> None:
        """``mode``: ``ask`` (read answers with ``read_line``), ``all`` (approve) or ``emit`` (stop)."""
        self.mode, self.console, self.read_line = mode, console, read_line

    @classmethod
    def for_run(cls, approve_all: bool, json_lines: bool, console: Console) -> Approvals:
        """``--approve-all`` approves; ``--json`` or a standard input that is no terminal stops; else ask."""
        if approve_all:
            return cls("all", console)
        return cls("emit" if json_lines or not sys.stdin.isatty() else "ask", console)

    async def answer(self, approval: Approval) -> Any | None:
        """The resume value for ``approval`` (``None``: it stays unanswered, the command exits 3)."""
        if self.mode == "all":  # the run's approval_answered event says so
            return {"decision": "approve"}
        if self.mode == "emit":
            return None
        return await self._ask(approval)

    async def _ask(self, approval: Approval) -> Any | None:
        call, console = approval.call, self.console
        console.print(f"[bold yellow]? {call.get('name')} waits for your approval[/]", highlight=False)
        console.print(f"  arguments: {json.dumps(call.get('args', {}))}", markup=False, highlight=False)
        console.print(f"  why: {approval.value.get('reason', '')}", markup=False, highlight=False)
        if approval.value.get("problem"):
            console.print(f"  [red]your last answer was not taken: {approval.value['problem']}[/]",
                          highlight=False)  # fmt: skip
        while True:
            choice = await self._prompt("approve, edit or reject? [a/e/r] ")
            if choice is None:
                return None
            word = choice.strip().lower()
            if word in ("a", "approve", "y", "yes"):
                return {"decision": "approve"}
            if word in ("r", "reject", "n", "no"):
                reason = await self._prompt("reason (the model reads it): ")
                return None if reason is None else {"decision": "reject", "reason": reason.strip()}
            if word in ("e", "edit"):
                args = await self._edited()
                return None if args is None else {"decision": "edit", "args": args}
            console.print("  answer a (approve), e (edit) or r (reject)")

    async def _edited(self) -> dict[str, Any] | None:
        while True:
            text = await self._prompt("arguments as a JSON object: ")
            if text is None:
                return None
            try:
                args = json.loads(text)
            except json.JSONDecodeError as exc:
                self.console.print(f"  [red]not JSON: {exc}[/]", highlight=False)
                continue
            if isinstance(args, dict):
                return args
            self.console.print("  [red]the arguments are one JSON object[/]", highlight=False)

    async def _prompt(self, text: str) -> str | None:
        self.console.print(text, end="", markup=False, highlight=False)
        line = await self.read_line()
        return None if line is None else line.rstrip("\n")

    def stop(self, approval: Approval, protocol: str, thread_id: str | None) -> int:
        """Write the unanswered approval as one JSON line on standard output; return the exit code (3)."""
        line = {"type": "interrupt", "protocol": protocol, "threadId": thread_id,
                "interruptId": approval.interrupt_id, "value": approval.value}  # fmt: skip
        print(json.dumps(line), flush=True)
        err = Console(stderr=True, soft_wrap=True)
        if thread_id is None:
            err.print("The run waits for an approval and keeps nothing: run it with --thread ID to answer "
                      "later, or with --approve-all.", highlight=False)  # fmt: skip
        else:
            err.print(f"The run waits for an approval; answer it with: phasegraph run {protocol} --thread "
                      f"{thread_id} --resume '\"approve\"' (or a JSON object with decision edit/reject)",
                      markup=False, highlight=False)  # fmt: skip
        return WAITING
