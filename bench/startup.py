"""Row 9: how long each entry point takes to start, against importing LangGraph in the same run.

Each side is a fresh process, timed on the wall clock from its start to its end (a command) or to its
first 200 from ``/healthz`` (the server, one worker, on a fresh sqlite file and on one it made before).
The anchor is ``python -c "import langgraph.graph"``: what any LangGraph program pays before it does
anything. Sides run interleaved, so a busy machine slows them alike. One more side imports only the
libraries serving needs (LangGraph, SQLAlchemy, FastAPI, uvicorn, AG-UI): the floor under the serve sides.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from bench.harness import Figure, Row, Side
from tests.processes import Process, answers, free_port

KEY = "9"
ANCHOR = 'python -c "import langgraph.graph"'
HELP = "phasegraph --help"
IMPORT = 'python -c "import phasegraph"'
DEMO = "phasegraph run triggered_phase (demo)"
SERVE_FRESH = "phasegraph serve to /healthz (fresh sqlite)"
SERVE_AGAIN = "phasegraph serve to /healthz (existing sqlite)"
#: What serving cannot do without: LangGraph, the store's SQLAlchemy, FastAPI, uvicorn and the AG-UI types,
#: imported and nothing else (no app built, no port opened): the floor under the two serve sides.
LIBRARIES = 'python -c "import <the server\'s libraries>"'
SERVER_LIBRARIES = "import langgraph.graph, sqlalchemy.ext.asyncio, fastapi, uvicorn, ag_ui.core"
HEADLINE = "wall time"
#: issue 36's goals, as a share of the anchor
GOALS = {HELP: 0.35, SERVE_FRESH: 1.8, SERVE_AGAIN: 1.8}

BIN = Path(sys.executable).parent
PHASEGRAPH = str(BIN / "phasegraph")


async def startup_rows(workdir: Path, quick: bool) -> list[Row]:
    """Row 9: each entry point's start against ``import langgraph.graph``."""
    return [await asyncio.to_thread(_measure, workdir / "startup", 1 if quick else 7, warmup=not quick)]


def _measure(folder: Path, repeats: int, *, warmup: bool) -> Row:
    folder.mkdir()
    env = {**os.environ, "PHASEGRAPH_WORKERS": "1"}
    again = folder / "again.db"
    fresh = iter(range(1_000_000))
    sides: dict[str, Callable[[], float]] = {
        ANCHOR: _command([sys.executable, "-c", "import langgraph.graph"], folder, env),
        HELP: _command([PHASEGRAPH, "--help"], folder, env),
        IMPORT: _command([sys.executable, "-c", "import phasegraph"], folder, env),
        DEMO: _command([PHASEGRAPH, "run", "triggered_phase", "Summarise the roadmap."], folder, env),
        SERVE_FRESH: lambda: _serve(folder, folder / f"fresh-{next(fresh)}.db", env),
        SERVE_AGAIN: lambda: _serve(folder, again, env),
        LIBRARIES: _command([sys.executable, "-c", SERVER_LIBRARIES], folder, env),
    }
    _serve(folder, again, env)  # the existing database: made and migrated once, before the timing
    samples: dict[str, list[float]] = {name: [] for name in sides}
    names = list(sides)
    skipped = 1 if warmup else 0  # a warm-up round first (file caches), then rounds in turn
    for round_ in range(skipped + repeats):
        shift = round_ % len(names)
        for name in names[shift:] + names[:shift]:
            seconds = sides[name]()
            if round_ >= skipped:
                samples[name].append(seconds)
    row = Row(
        KEY,
        "Start-up of each entry point",
        "a fresh process per sample, wall clock to its end (or to the server's first /healthz 200); "
        "one worker, sqlite",
        anchor=ANCHOR,
        headline=HEADLINE,
        sides=[Side(name, {HEADLINE: Figure.of_samples(times)}) for name, times in samples.items()],
    )
    floor = row.ratio(row.side(LIBRARIES))
    row.note = "; ".join(_goal(row, side, share) for side, share in GOALS.items()) + (
        f"; the server's libraries alone take {floor:.2f}x" if floor is not None else ""
    )
    return row


def _goal(row: Row, side: str, share: float) -> str:
    ratio = row.ratio(row.side(side))
    met = ratio is not None and ratio <= share
    return f"{side} <= {share}x the anchor: {'met' if met else 'missed'}"


def _command(command: list[str], folder: Path, env: dict[str, str]) -> Callable[[], float]:
    def once() -> float:
        started = time.perf_counter()
        subprocess.run(command, cwd=folder, env=env, capture_output=True, check=True, timeout=120)
        return time.perf_counter() - started

    return once


def _serve(folder: Path, database: Path, env: dict[str, str]) -> float:
    """Start ``phasegraph serve`` on ``database`` until its first /healthz 200, then stop it; the seconds."""
    port = free_port()
    server = Process(
        [PHASEGRAPH, "serve", "--port", str(port)],
        folder / "serve.log",
        env={**env, "PHASEGRAPH_CHECKPOINTER": f"sqlite:{database}"},
        cwd=folder,
    )
    started = time.perf_counter()
    try:
        server.start(answers(f"http://127.0.0.1:{port}/healthz"))
        return time.perf_counter() - started
    finally:
        server.stop()
