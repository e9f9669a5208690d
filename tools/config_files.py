"""Reading a file that configuration names: a regular file of bounded size, never a device or a pipe.

A project file, an ``mcp_servers`` file, a scripted model's script and a network file are read whole.
Named ``/dev/zero`` one would grow the process until it is killed; named a FIFO, opening it would wait for
a writer forever. Both are refused with an ``OSError`` whose ``strerror`` says why, as a missing file is,
so each reader's own "cannot be read (...)" message names the problem.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

#: The largest file configuration may name: far above any hand-written file or recorded script.
MAX_CONFIG_BYTES = 8 * 1024 * 1024


class RefusedFile(OSError):
    """A named file is not read: it is no regular file, or it is larger than ``MAX_CONFIG_BYTES``."""


def read_config_bytes(path: str | Path, limit: int = MAX_CONFIG_BYTES) -> bytes:
    """The bytes of the regular file at ``path``, at most ``limit`` of them.

    Raises:
        RefusedFile: The path is a folder, a device, a pipe or a socket, or holds more than ``limit`` bytes.
        OSError: The file cannot be opened (missing, no permission, ...).
    """
    # O_NONBLOCK: opening a FIFO returns at once instead of waiting for a writer (then fstat refuses it)
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    try:
        mode = os.fstat(fd).st_mode  # of what was opened: nothing swaps it between the check and the read
        if not stat.S_ISREG(mode):
            raise RefusedFile(errno.EINVAL, f"{_kind(mode)}, not a regular file", str(path))
        with os.fdopen(fd, "rb", closefd=False) as file:
            data = file.read(limit + 1)  # a file growing as it is read stops here too
    finally:
        os.close(fd)
    if len(data) > limit:
        raise RefusedFile(errno.EFBIG, f"larger than {_size(limit)}", str(path))
    return data


def read_config_text(path: str | Path, limit: int = MAX_CONFIG_BYTES) -> str:
    """The UTF-8 text of the regular file at ``path``, read by ``read_config_bytes``'s rules.

    Raises:
        RefusedFile: As ``read_config_bytes``.
        OSError: As ``read_config_bytes``.
        UnicodeDecodeError: The file is not UTF-8.
    """
    return read_config_bytes(path, limit).decode("utf-8")


def _kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a folder"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISFIFO(mode):
        return "a pipe"
    return "a socket" if stat.S_ISSOCK(mode) else "a special file"


def _size(limit: int) -> str:
    return f"{limit // (1024 * 1024)} MiB" if limit >= 1024 * 1024 else f"{limit} bytes"
