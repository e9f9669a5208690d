"""Processes the suite (and ``make bench``) starts: a free loopback port, start, wait until ready, stop.

Every server a test starts goes through ``Process``: its output goes to a log file, ``start`` waits
until ``ready`` says it is up (failing with the log when it exits or takes too long), and ``stop``
asks it to end (SIGTERM) before it is killed. Nothing waits without a bound.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import httpx

#: How long a starting server may take to be ready (its imports take seconds on a busy machine).
START_SECONDS = 90
#: How long a server may take to stop after SIGTERM before it is killed.
STOP_SECONDS = 15


def free_port() -> int:
    """A loopback port nobody listens on now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def answers(url: str) -> Callable[[], bool]:
    """Ready when ``url`` answers 200."""

    def ready() -> bool:
        try:
            return httpx.get(url, timeout=1).status_code == 200
        except httpx.HTTPError:
            return False

    return ready


def listens(port: int) -> Callable[[], bool]:
    """Ready when something accepts connections on the loopback ``port``."""

    def ready() -> bool:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return True
        except OSError:
            return False

    return ready


@dataclass
class Process:
    """One process of the suite's, its standard output and error in ``log`` (or ``stderr`` apart)."""

    command: Sequence[str]
    log: Path
    env: Mapping[str, str] | None = None  # added to this process's environment (or all of it: ``inherit``)
    cwd: Path | None = None
    inherit: bool = True  # False: ``env`` is the whole environment
    stderr: Path | None = None  # standard error to a file of its own instead of ``log``
    popen: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    @property
    def pid(self) -> int:
        """The process id (once started)."""
        assert self.popen is not None, "not started"
        return self.popen.pid

    def start(self, ready: Callable[[], bool] | None = None, seconds: float = START_SECONDS) -> Process:
        """Start the process and wait until ``ready()`` (if given); it is killed when it never gets there."""
        with self.log.open("ab") as out, _opened(self.stderr) as err:
            self.popen = subprocess.Popen(
                list(self.command),
                env={**(os.environ if self.inherit else {}), **(self.env or {})},
                cwd=self.cwd,
                stdout=out,
                stderr=err if err is not None else subprocess.STDOUT,
            )
        if ready is not None:
            try:
                self.wait_until(ready, seconds)
            except BaseException:
                self.kill()  # never left running behind a failed start
                raise
        return self

    def wait_until(
        self, ready: Callable[[], bool], seconds: float = START_SECONDS, what: str = "ready"
    ) -> None:
        """Poll ``ready()`` until it holds; RuntimeError (with the log) if the process exits or time is up."""
        assert self.popen is not None, "not started"
        deadline = time.monotonic() + seconds
        while True:
            if self.popen.poll() is not None:
                raise RuntimeError(f"{self.command[0]} exited ({self.popen.returncode}):\n{self.output()}")
            if ready():
                return
            if time.monotonic() > deadline:
                raise RuntimeError(f"{self.command[0]} was not {what} in {seconds} s:\n{self.output()}")
            time.sleep(0.05)

    def running(self) -> bool:
        """Whether the process is still alive."""
        return self.popen is not None and self.popen.poll() is None

    def signal(self, number: int) -> None:
        """Send ``number`` (SIGINT, SIGTERM, ...) to the process."""
        assert self.popen is not None, "not started"
        self.popen.send_signal(number)

    def kill(self) -> None:
        """SIGKILL: no shutdown hook runs."""
        if self.running():
            assert self.popen is not None
            self.popen.send_signal(signal.SIGKILL)
            self.popen.wait(STOP_SECONDS)

    def stop(self, seconds: float = STOP_SECONDS) -> None:
        """SIGTERM, then SIGKILL after ``seconds``."""
        if not self.running():
            return
        assert self.popen is not None
        self.popen.terminate()
        try:
            self.popen.wait(seconds)
        except subprocess.TimeoutExpired:
            self.kill()

    def output(self, last: int = 4000) -> str:
        """The end of what the process wrote (its log, and its standard error when kept apart)."""
        text = self.log.read_text(errors="replace") if self.log.exists() else ""
        if self.stderr is not None and self.stderr.exists():
            text += self.stderr.read_text(errors="replace")
        return text[-last:]


@contextmanager
def running(process: Process, ready: Callable[[], bool] | None = None) -> Iterator[Process]:
    """``process`` started (and ready); always stopped at the end."""
    try:
        yield process.start(ready)
    finally:
        process.stop()


@contextmanager
def _opened(path: Path | None) -> Iterator[IO[Any] | None]:
    if path is None:
        yield None
        return
    with path.open("ab") as handle:
        yield handle
