"""A stdio MCP service "rec" whose one tool writes each call's start and end to a file.

Run by path: ``python recording_service.py --log FILE``. ``record(name, ms)`` appends ``start NAME``,
waits ``ms`` milliseconds, appends ``end NAME`` and answers ``NAME``: the file tells how often each
call ran, and whether a call that was running when its server was killed ever finished (an
orphaned service stops reading once its input closes, but the blocking call in progress goes on).
"""

import argparse
import time
from pathlib import Path

import anyio
from mcp.server.fastmcp import FastMCP


def build_service(log: Path) -> FastMCP:
    """The service, writing to ``log``."""
    service = FastMCP("rec", log_level="WARNING")

    def write(line: str) -> None:
        with log.open("a", encoding="utf-8") as out:
            out.write(line + "\n")

    def work(name: str, ms: int) -> str:
        write(f"start {name}")
        time.sleep(ms / 1000)
        write(f"end {name}")
        return name

    @service.tool(structured_output=False)
    async def record(name: str, ms: int) -> str:
        """Write 'start NAME', work ms milliseconds, write 'end NAME'; answer NAME."""
        # blocking work in a thread, as many tools do: calls run side by side, and once started a
        # call runs to its end (closing the service's input cancels the call, not the thread)
        return await anyio.to_thread.run_sync(work, name, ms)

    return service


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--log", type=Path, required=True)
    build_service(parser.parse_args().log).run("stdio")
