"""A user's own Python tools, named by import path in the tests' project files (``tests.user_tools:...``)."""

import time
from typing import Annotated

from langchain_core.tools import InjectedToolArg, tool

from phasegraph.tools.context import ToolContext


def word_count(text: str) -> str:
    """Count the words of a text."""
    return f"{len(text.split())} words"


@tool
def shout(text: str) -> str:
    """Say a text in capitals."""
    return text.upper()


@tool
def archive_everything(reason: str) -> str:
    """Archive every file of the project (a destructive tool: projects make it wait for approval)."""
    ARCHIVED.append(reason)
    return f"archived ({reason})"


#: What ``archive_everything`` was asked to do, in this process: a rejected call never adds to it.
ARCHIVED: list[str] = []

#: A list of tools under one name.
TOOLS = [shout, archive_everything]

#: Not a tool: naming it is an error.
NOT_A_TOOL = 42


def touch_file(path: str) -> str:
    """Write a file at ``path`` (an effect seen from outside the process that runs the tool)."""
    with open(path, "w", encoding="utf-8") as out:
        out.write("touched\n")
    return f"wrote {path}"


def append_line(path: str) -> str:
    """Add a line to the file at ``path``: a call that ran twice shows twice (seen from any process)."""
    with open(path, "a", encoding="utf-8") as out:
        out.write("ran\n")
    return f"appended to {path}"


def nap(seconds: int) -> str:
    """Sleep ``seconds``: a tool that outlives the timeout its project gives it."""
    time.sleep(seconds)
    return f"slept {seconds} s"


def keyed_append(path: str, seconds: int, context: Annotated[ToolContext, InjectedToolArg]) -> str:
    """Append the call's idempotency key to ``path`` unless it is there already, then wait ``seconds``.

    A tool with an effect elsewhere, done the way docs/your-tools.md suggests: a call run again (its server
    died before its result was saved) finds its key and changes nothing.
    """
    key = context.idempotency_key
    with open(path, "a+", encoding="utf-8") as ledger:
        ledger.seek(0)
        done = key in ledger.read().splitlines()
        if not done:
            ledger.write(f"{key}\n")
    time.sleep(seconds)
    return f"{'already recorded' if done else 'recorded'} {key}"


def log_key(path: str, context: Annotated[ToolContext, InjectedToolArg]) -> str:
    """Append the call's idempotency key to ``path``, every time it runs: a call run twice shows twice."""
    with open(path, "a", encoding="utf-8") as ledger:
        ledger.write(f"{context.idempotency_key}\n")
    return "logged"
