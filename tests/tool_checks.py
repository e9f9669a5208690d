"""Helpers for tests of tool sources: misbehaving MCP servers, and the server processes this process runs.

``HANGING_SERVER`` never answers MCP's ``initialize``; ``FRAGILE_SERVER`` answers its tool's first call
and exits on the second, while that call waits for its answer.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

import psutil

#: A stdio "server" that starts and never says a word.
HANGING_SERVER = "import time\ntime.sleep(120)\n"

#: A FastMCP stdio server whose ``ping`` answers once, then kills the server on the next call.
FRAGILE_SERVER = '''
import os

from mcp.server.fastmcp import FastMCP

server = FastMCP("fragile", log_level="WARNING")
calls = []


@server.tool(structured_output=False)
def ping(text: str) -> str:
    """Answer with pong and the text (the server exits on the second call)."""
    calls.append(text)
    if len(calls) > 1:
        os._exit(3)
    return f"pong {text}"


server.run()
'''


def script_server(folder: Path, name: str, code: str) -> dict[str, Any]:
    """A ``[mcp_servers.<name>]`` entry running ``code`` as a Python script written in ``folder``."""
    path = folder / f"{name}_server.py"
    path.write_text(code, encoding="utf-8")
    return {"transport": "stdio", "command": sys.executable, "args": [str(path)]}


def server_processes(marker: str) -> list[str]:
    """The command lines of this process's live descendants whose command line contains ``marker``."""
    found: list[str] = []
    for child in psutil.Process().children(recursive=True):
        try:
            if child.status() == psutil.STATUS_ZOMBIE:
                continue
            line = " ".join(child.cmdline())
        except psutil.NoSuchProcess:
            continue
        if marker in line:
            found.append(line)
    return found


def left_running(marker: str, wait: float = 5.0) -> list[str]:
    """The processes of ``server_processes(marker)`` still there after up to ``wait`` seconds."""
    deadline = time.monotonic() + wait
    while (found := server_processes(marker)) and time.monotonic() < deadline:
        time.sleep(0.05)
    return found
