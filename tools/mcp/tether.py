"""Stdio MCP services that die with the process that started them.

A stdio service is a child process, started in a session of its own (MCP's stdio client does that),
so nothing stops it when its parent is killed: it read its parent's last requests, and it finishes
the calls in flight (their side effects included) before it notices that its input is closed. A
resumed run then makes those calls again. On Linux a service is therefore started through this
module, run by path as ``python -S tether.py PARENT_PID COMMAND [ARGS...]`` (so nothing else is
imported): it asks the kernel to SIGKILL it when its parent dies (``PR_SET_PDEATHSIG``, which is kept
across ``exec``), gives up if the parent has died already, and then becomes the service. Elsewhere
services are started as they are. The kernel sends the signal when the *thread* that started the
service ends, not only the process: services are opened from the event loop's thread, which lives as
long as the server; opening one from a short-lived worker thread would end it with that thread.
"""

from __future__ import annotations

import ctypes
import os
import shutil
import signal
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

#: This file, run by path for each stdio service.
TETHER = Path(__file__).resolve()
#: ``prctl`` option: the signal this process gets when its parent dies.
PR_SET_PDEATHSIG = 1


def tethered(connection: Mapping[str, Any]) -> dict[str, Any]:
    """``connection`` unchanged, or, for a stdio service on Linux, the same service tied to this process.

    A command that cannot be found is left as it is: starting it fails at once, naming the command.
    """
    if connection.get("transport") != "stdio" or not sys.platform.startswith("linux"):
        return dict(connection)
    command = connection["command"]
    environment = {**os.environ, **(connection.get("env") or {})}  # the PATH MCP's client starts it with
    path = environment.get("PATH", os.defpath)
    if ("/" not in command or os.path.isabs(command)) and shutil.which(command, path=path) is None:
        return dict(connection)
    args = ["-S", str(TETHER), str(os.getpid()), command, *connection.get("args", [])]
    return {**connection, "command": sys.executable, "args": args}


def main(argv: list[str]) -> None:
    """Die with the parent ``argv[1]``, then run the service ``argv[2:]`` in this process."""
    parent, command = int(argv[1]), argv[2:]
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_PDEATHSIG) failed")
    if os.getppid() != parent:  # the parent died before the request took effect
        sys.exit("the process that started this MCP service has exited")
    os.execvp(command[0], command)


if __name__ == "__main__":
    main(sys.argv)
