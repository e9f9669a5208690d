"""Server processes for the load rows: started in a log's folder, awaited, measured, always stopped."""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from uuid import uuid4

import httpx

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
    with log.open("ab") as out:
        process = subprocess.Popen(command, cwd=log.parent, env={**os.environ, **env}, stdout=out, stderr=out)
    try:
        await _wait_until_up(process, health, log, starts)
        yield process
    finally:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(5)


async def _wait_until_up(process: subprocess.Popen[bytes], health: str, log: Path, starts: int) -> None:
    deadline = time.monotonic() + START_SECONDS
    async with httpx.AsyncClient(timeout=1) as client:
        while time.monotonic() < deadline:
            if process.poll() is not None:
                raise RuntimeError(f"server of {log.name} exited early:\n{log.read_text()[-2000:]}")
            try:
                up = (await client.get(health)).status_code == 200
                if up and log.read_text(errors="replace").count(STARTED) >= starts:
                    return
            except httpx.HTTPError:
                pass  # not listening yet
            await asyncio.sleep(0.1)
    raise RuntimeError(f"server of {log.name} not up in {START_SECONDS} s:\n{log.read_text()[-2000:]}")


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


def free_port() -> int:
    """A loopback port nobody listens on."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


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
