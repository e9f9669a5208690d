"""Processes on one sqlite file wake each other with datagrams on Unix sockets.

SQLite has no LISTEN/NOTIFY. Every process serving a sqlite file (the workers of one
``phasegraph serve --workers N``, or several servers started on the same file) binds a datagram
socket in a folder named after that file; after each commit of the event log and each pause or
cancel request it sends the same message Postgres would carry to every other socket there. A send
never waits: when a receiver's buffer is full the datagram is dropped, so followers on sqlite keep
their slow poll (``listening`` stays false) and a dropped wake-up costs at most that poll's delay.
A socket nobody reads any more (its process died) is removed by the first sender that finds it so.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import os
import socket
import stat
import tempfile
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any
from uuid import uuid4

from phasegraph.server.runs.wakeups import Dispatcher

logger = logging.getLogger(__name__)

#: Largest datagram read; the store cuts its messages well below (``MAX_PAYLOAD``).
MAX_DATAGRAM = 65_536


def wake_folder(database: Path) -> Path:
    """The folder where the processes serving ``database`` bind their sockets.

    It lives in the temporary folder, named after the file's absolute path: a socket's path may not
    exceed 107 bytes, which a folder beside the database could.
    """
    digest = hashlib.sha256(str(database.resolve()).encode()).hexdigest()[:16]
    return Path(tempfile.gettempdir()) / f"phasegraph-{os.getuid()}-{digest}"


def _check_private(folder: Path) -> None:
    """Refuse a folder that is not this user's own private one (another user could read our messages)."""
    found = folder.lstat()
    if not stat.S_ISDIR(found.st_mode) or found.st_uid != os.getuid() or stat.S_IMODE(found.st_mode) & 0o077:
        raise PermissionError(f"{folder} is not a private folder of this user")


class SocketWakeups(Dispatcher):
    """Wakes the other processes on a sqlite file, and is woken by them."""

    def __init__(
        self,
        database: Path,
        owner: str,
        on_events: Callable[[str], None],
        on_control: Callable[[str], Coroutine[Any, Any, None]],
    ) -> None:
        super().__init__(owner, on_events, on_control)
        self.folder = wake_folder(database)
        self.path = self.folder / f"{os.getpid()}-{uuid4().hex[:8]}.sock"
        self._socket: socket.socket | None = None

    def start(self) -> None:
        """Bind this process's socket and read it on the event loop; without one, followers poll."""
        try:
            sock = self._bind()
        except OSError as exc:  # a read-only or foreign temporary folder, a path too long: poll instead
            logger.warning("cannot wake other processes on this database (%s); they poll it instead", exc)
            return
        self._socket = sock
        asyncio.get_running_loop().add_reader(sock.fileno(), self._read)

    def _bind(self) -> socket.socket:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        try:
            for attempt in range(3):
                self.folder.mkdir(mode=0o700, exist_ok=True)
                _check_private(self.folder)
                try:
                    sock.bind(str(self.path))
                    break
                except FileNotFoundError:  # the last other process removed the folder meanwhile
                    if attempt == 2:
                        raise
        except OSError:
            sock.close()
            raise
        sock.setblocking(False)
        return sock

    async def close(self) -> None:
        """Stop reading and remove this process's socket."""
        if self._socket is not None:
            asyncio.get_running_loop().remove_reader(self._socket.fileno())
            self._socket.close()
            self._socket = None
            self.path.unlink(missing_ok=True)
            with contextlib.suppress(OSError):  # others still bound: it stays
                self.folder.rmdir()
        await super().close()

    def announce(self, channel: str, payload: str) -> None:
        """Send ``payload`` on ``channel`` to every other process on this file (never waits)."""
        sock = self._socket
        if sock is None:
            return
        data = f"{channel}\n{payload}".encode()
        try:
            peers = [entry.path for entry in os.scandir(self.folder) if entry.name.endswith(".sock")]
        except FileNotFoundError:  # removed under us (a temp cleaner): nobody else can be reached
            return
        for peer in peers:
            if peer == str(self.path):
                continue
            try:
                sock.sendto(data, peer)
            except BlockingIOError:  # its buffer is full: its followers' poll finds the events
                pass
            except (ConnectionRefusedError, FileNotFoundError):  # its process is gone
                Path(peer).unlink(missing_ok=True)
            except OSError as exc:
                logger.warning("could not wake %s: %s", peer, exc)

    def _read(self) -> None:
        sock = self._socket
        while sock is not None:
            try:
                data = sock.recv(MAX_DATAGRAM)
            except (BlockingIOError, InterruptedError):
                return
            channel, _, payload = data.decode(errors="replace").partition("\n")
            self._dispatch(channel, payload)
