"""Row 7, your tools: one triggered_phase tool cycle on a built-in tool, the same tool on MCP, a Python tool.

Three sides read the same small files, one per tool cycle: the built-in ``read_file`` (the anchor), the
bundled demo MCP server's ``read_file`` over stdio (``demo.read_file``, a real subprocess, named in a
project file) and a Python tool named by import path (``bench.user_tools:read_note``). Each side runs
whole scripted turns of ``CYCLES + 1`` tool cycles, interleaved; one cycle's cost is read from the
turn's own events, the time from its first ``tool_result`` to its last over ``CYCLES``, so what a turn
pays once (the graph, the model's answer, the MCP server's start, whose spread is larger than a
cycle) is out of it. The second row is that start: opening the project's tools for a run (the demo
server started and its tools listed) and closing them, which every MCP run pays once.
Goal: an MCP cycle costs at most 1.3x a built-in one.
"""

from __future__ import annotations

import json
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

from langchain_core.tools import tool

from bench.harness import Figure, Row, Side, interleaved
from phasegraph.graphs.registry import get_protocol
from phasegraph.graphs.run import run
from phasegraph.nodes.trace import MemoryTraceStore

KEY = "7"
CYCLES = 8
BUILTIN, MCP, PYTHON = "built-in read_file", "demo MCP server (stdio)", "Python tool"
PER_CYCLE = "per tool cycle"
STARTUP = "tools opened and closed, per run"
GOAL = 1.3
#: The folder ``read_note`` reads (set by the row before it runs).
_NOTES: list[Path] = []


@tool
def read_note(path: str) -> str:
    """Read one of the bench's notes (a Python tool, named by import path in the bench's project file)."""
    return (_NOTES[0] / path).read_text(encoding="utf-8")


def _workspace(workdir: Path) -> Path:
    folder = workdir / "user-tools"
    for i in range(CYCLES + 1):
        (folder / "notes").mkdir(parents=True, exist_ok=True)
        (folder / "notes" / f"n{i}.md").write_text(f"note {i}\n" * 20, encoding="utf-8")
    _NOTES[:] = [folder]
    return folder


def _project(folder: Path, name: str, body: str) -> str:
    path = folder / f"{name}.toml"
    path.write_text(body, encoding="utf-8")
    return str(path)


def _script(folder: Path, side: str, tool_name: str, cycles: int) -> str:
    turns = [
        {"content": "", "tool_calls": [{"name": tool_name, "args": {"path": f"notes/n{i}.md"}}]}
        for i in range(cycles)
    ]
    path = folder / f"{side}-{cycles}.json"
    path.write_text(json.dumps({"turns": [*turns, {"content": "Read."}]}), encoding="utf-8")
    return f"scripted:{path}"


def _sides(folder: Path) -> dict[str, tuple[str, str]]:
    """Side -> (tool name, project file)."""
    mcp = _project(
        folder,
        "mcp",
        '[mcp_servers.demo]\ntransport = "stdio"\ncommand = "${python}"\n'
        'args = ["-m", "phasegraph.tools.mcp.demo_server", "--root", "${workspace}"]\n',
    )
    python = _project(folder, "python", '[python_tools]\nnotes = "bench.user_tools:read_note"\n')
    builtin = _project(folder, "builtin", "")
    return {BUILTIN: ("read_file", builtin), MCP: ("demo.read_file", mcp), PYTHON: ("read_note", python)}


def _turn(
    folder: Path, side: str, tool_name: str, project: str, cycles: int, per_cycle: list[float]
) -> Callable[[], Awaitable[None]]:
    """A turn of ``cycles`` calls; each adds its seconds per cycle (first to last result) to ``per_cycle``."""
    model = _script(folder, side.split()[0], tool_name, cycles)

    async def one_turn() -> None:
        result = await run(
            "triggered_phase", "Read the notes.", model=model, workspace=str(folder), project_file=project,
            max_phase_cycles_per_turn=cycles + 1, traces=MemoryTraceStore(),
        )  # fmt: skip
        results = [e for e in result.events if e.type == "tool_result"]
        if result.final is None or len(results) != cycles or any(r.status != "ok" for r in results):
            raise RuntimeError(
                f"{side}: the turn did not run {cycles} calls: {[e.type for e in result.events]}"
            )
        per_cycle.append((results[-1].ts - results[0].ts).total_seconds() / (cycles - 1))

    return one_turn


async def cycle_row(folder: Path, repeats: int) -> Row:
    """The cost of one tool cycle on each side, read from each turn's events (``CYCLES`` cycles apart)."""
    sides = _sides(folder)
    per_cycle: dict[str, list[float]] = {side: [] for side in sides}
    timed: dict[str, Callable[[], Awaitable[object]]] = {
        side: _turn(folder, side, name, project, CYCLES + 1, per_cycle[side])
        for side, (name, project) in sides.items()
    }
    samples = await interleaved(timed, repeats)
    row = Row(
        KEY, "your tools", f"triggered_phase, one tool cycle reading a file (a turn of {CYCLES + 1} cycles)",
        anchor=BUILTIN, headline=PER_CYCLE,
        note=f"goal: MCP <= {GOAL}x built-in per cycle",
    )  # fmt: skip
    for side in sides:
        kept = per_cycle[side][-repeats:]  # the warm-up round's is not kept
        row.sides.append(
            Side(side, {PER_CYCLE: Figure.of_samples(kept), "turn": Figure.of_samples(samples[side])})
        )
    ratio = row.ratio(row.side(MCP))
    if ratio is not None:
        row.side(MCP).figures["goal met"] = Figure(ratio <= GOAL)
    return row


async def startup_row(folder: Path, repeats: int) -> Row:
    """Opening a run's tools: the built-in ones (anchor) against the demo MCP server's start and listing."""
    sides = _sides(folder)
    spec = get_protocol("triggered_phase")

    def opening(project: str) -> Callable[[], Awaitable[None]]:
        async def open_and_close() -> None:
            context = spec.make_context(workspace=str(folder), project_file=project)
            await context.open_tools()
            await context.aclose()

        return open_and_close

    timed: dict[str, Callable[[], Awaitable[object]]] = {
        BUILTIN: opening(sides[BUILTIN][1]),
        MCP: opening(sides[MCP][1]),
    }
    samples = await interleaved(timed, repeats)
    row = Row(KEY + "b", "your tools", "a run's tools opened and closed", anchor=BUILTIN, headline=STARTUP)
    for side in (BUILTIN, MCP):
        row.sides.append(Side(side, {STARTUP: Figure.of_samples(samples[side])}))
    return row


async def user_tools_rows(workdir: Path, quick: bool) -> list[Row]:
    """Rows 7 and 7b."""
    folder = _workspace(workdir)
    started = time.perf_counter()
    repeats = 2 if quick else 12
    rows = [await cycle_row(folder, repeats), await startup_row(folder, repeats)]
    rows[0].sides[0].figures["row seconds"] = Figure(round(time.perf_counter() - started, 1), "s")
    return rows
