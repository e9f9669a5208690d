"""Server processes for the load rows: started in a log's folder, awaited, measured, always stopped.

Started and stopped by the suite's own process helper (``tests/processes.py``).
"""

from __future__ import annotations

import asyncio
import subprocess
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from uuid import uuid4

from tests.processes import Process, answers

START_SECONDS = 60
#: What uvicorn logs when one worker (or the one process) has started.
STARTED = "Application startup complete."


@asynccontextmanager
async def server(
    command: list[str], env: dict[str, str], log: Path, health: str, starts: int = 0
) -> AsyncIterator[subprocess.Popen[bytes]]:
    """Start a server in ``log``'s folder, wait until it is up; always stop it.

    Up: ``health`` answers 200 and ``starts`` workers have started (the first answers before the
    others are ready).
    """
    process = Process(command, log, env=env, cwd=log.parent)
    try:
        process.start()
        await asyncio.to_thread(process.wait_until, _up(health, log, starts), START_SECONDS)
        assert process.popen is not None
        yield process.popen
    finally:
        process.stop()


def _up(health: str, log: Path, starts: int) -> Callable[[], bool]:
    answered = answers(health)
    return lambda: answered() and log.read_text(errors="replace").count(STARTED) >= starts


def peak_rss_mib(pid: int) -> float:
    """VmHWM of the process and of every descendant still alive, summed, in MiB."""
    total_kib, todo = 0, [pid]
    while todo:
        proc = Path(f"/proc/{todo.pop()}")
        for path in [proc / "status", *proc.glob("task/*/children")]:
            try:  # a thread or a child may end while we read
                text = path.read_text()
            except OSError:
                continue
            if path.name == "children":
                todo += [int(child) for child in text.split()]
            elif peak := [line for line in text.splitlines() if line.startswith("VmHWM:")]:
                total_kib += int(peak[0].split()[1])
    return total_kib / 1024


def errors_in(log: Path) -> int:
    """Lines of a server's log that report an error."""
    lines = log.read_text(errors="replace").splitlines()
    return sum(1 for line in lines if "ERROR" in line or "Traceback" in line)


@asynccontextmanager
async def fresh_database(url: str) -> AsyncIterator[str]:
    """A new, empty database on the Postgres server of ``url``, dropped after (however its users left)."""
    import psycopg

    name = f"phasegraph_bench_{uuid4().hex[:12]}"
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as admin:
        await admin.execute(f'CREATE DATABASE "{name}"')
    try:
        yield url.rsplit("/", 1)[0] + f"/{name}"
    finally:
        async with await psycopg.AsyncConnection.connect(url, autocommit=True) as admin:
            await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
