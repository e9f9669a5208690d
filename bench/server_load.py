"""Row 4: many concurrent streamed runs against ``phasegraph serve`` and against ``langgraph dev``.

Both servers run the same ``triggered_phase`` graph on the same scripted model (10 text chunks 20 ms
apart, no tool call), on loopback. Each load level starts a fresh server per side (a fresh sqlite file
for phasegraph, a fresh in-memory ``langgraph dev``), so a level's peak RSS is its own, and warms it with
one run that is not kept. Every level has a wall-clock cap per side: runs without a ``final`` event by then
count as not completed and are cancelled (their connections closed), and the server is stopped whatever
happened. Clients read each stream to its end, as a real client would (closing it at ``final`` makes
``phasegraph serve`` pause the run mid-checkpoint), so an ``error`` after ``final`` fails the run.
"""

from __future__ import annotations

import asyncio
import json
import math
import sys
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import httpx
from langgraph_sdk.client import LangGraphClient

from bench.harness import Figure, Row, Side
from bench.overhead import postgres_reachable, postgres_url
from bench.processes import errors_in, fresh_database, peak_rss_mib, server
from phasegraph.graphs.run import run
from phasegraph.nodes.emit import EVENT_KEY
from phasegraph.nodes.events import Event, parse_event
from phasegraph.nodes.models import DEMO_WORKSPACE
from phasegraph.server.cli.serving import usable_cpus
from tests.processes import free_port

ROOT = Path(__file__).parents[1]
PHASEGRAPH = Path(sys.executable).parent / "phasegraph"
#: `make bench` builds this venv: langgraph-cli[inmem] cannot share one with the dev tools.
LANGGRAPH = ROOT / ".venv-studio" / "bin" / "langgraph"
JOBS_PER_WORKER = 500
STUDIO = f"langgraph dev (inmem, --n-jobs-per-worker {JOBS_PER_WORKER})"
#: What ``phasegraph serve`` runs by default: a worker per CPU.
WORKERS = usable_cpus()
PHASEGRAPH_SIDE = "phasegraph serve (sqlite, 1 worker)"
PHASEGRAPH_EXIT = "phasegraph serve (sqlite, 1 worker, durability=exit)"
WORKERS_SIDE = f"phasegraph serve (sqlite, {WORKERS} workers)"
POSTGRES_SIDE = f"phasegraph serve (Postgres, {WORKERS} workers)"
#: Issue 28's goal, at these levels, for the sides with a worker per CPU.
LEAD_LEVELS = (200, 500)
#: Ten words: the scripted model streams each (with its space) as one chunk, then a closing chunk.
ANSWER = "The roadmap has two milestones, in March and in June."
MESSAGE = "Summarise the roadmap."
OFFLINE = {
    "LANGGRAPH_CLI_NO_ANALYTICS": "1",
    "LANGSMITH_TRACING": "false",
    "LANGCHAIN_TRACING_V2": "false",
    "LANGSMITH_API_KEY": "",
}


@dataclass
class Record:
    """What one client saw of its run (times in seconds from its request)."""

    started: float = 0.0  # perf_counter at the request
    first: float | None = None
    latency: float | None = None  # until the ``final`` event
    closed: float | None = None  # until the server closed the stream
    seqs: list[int] = field(default_factory=list)  # of every event received (0 where the stream has none)
    error: str = ""  # why the run failed, when it did

    def saw(self, event: Event) -> None:
        """Note one event; an ``error`` event fails the run, even after its ``final`` one."""
        self.first = self.first or time.perf_counter() - self.started
        self.seqs.append(event.seq)
        if event.type == "final":
            self.latency = time.perf_counter() - self.started
        elif event.type == "error":
            after = " after its final event" if self.latency is not None else ""
            raise RuntimeError(f"error event{after}: {event.kind}: {event.message}")

    @property
    def completed(self) -> bool:
        """A ``final`` event came, and no error."""
        return self.latency is not None and not self.error


#: One run streamed to its end; built per server from the client that talks to it.
OneRun = Callable[[Record], Coroutine[Any, Any, None]]


@dataclass
class Load:
    """One level on one side: the runs, how long the level took, the server's peak memory."""

    records: list[Record]
    seconds: float
    rss_mib: float
    log_errors: int  # lines of the server's log that report an error


async def server_rows(quick: bool, workdir: Path) -> list[Row]:
    """Row 4, one row per load level: both servers under ``N`` concurrent streamed runs.

    Args:
        quick: 10 runs with a 15 s cap per side, instead of 1, 10, 50, 200 and 500 with 60 s.
        workdir: where the script, databases, configs and server logs go.

    Returns:
        One row per level, ``langgraph dev`` the anchor (when installed).
    """
    levels, cap = ((10,), 15.0) if quick else ((1, 10, 50, 200, 500), 60.0)
    script = workdir / "server-load.json"
    turns = [{"content": ANSWER}]
    script.write_text(json.dumps({"turns": turns, "repeat_last": True, "chunk_delay_ms": 20}), "utf-8")
    spec = f"scripted:{script}"
    expected = len((await run("triggered_phase", MESSAGE, model=spec, workspace=str(DEMO_WORKSPACE))).events)
    postgres = not quick and await postgres_reachable(postgres_url())
    rows = []
    for n in levels:
        loads = {PHASEGRAPH_SIDE: await _phasegraph_load(n, cap, workdir, spec)}
        if WORKERS > 1:
            loads[WORKERS_SIDE] = await _phasegraph_load(n, cap, workdir, spec, workers=WORKERS)
        if postgres:
            async with fresh_database(postgres_url()) as database:
                loads[POSTGRES_SIDE] = await _phasegraph_load(n, cap, workdir, spec, workers=WORKERS,
                                                              database=database)  # fmt: skip
        if not quick:  # the same server saving checkpoints only at pause points (PHASEGRAPH_DURABILITY)
            loads[PHASEGRAPH_EXIT] = await _phasegraph_load(n, cap, workdir, spec, durability="exit")
        if LANGGRAPH.exists():
            loads[STUDIO] = await _studio_load(n, cap, workdir, spec)
        rows.append(_row(n, cap, expected, loads))
    return rows


def _row(n: int, cap: float, expected: int, loads: dict[str, Load]) -> Row:
    row = Row(
        key="4",
        title=f"Server under load, N={n}",
        workload=f"{n} concurrent triggered_phase runs, each streamed to its own client; scripted model: "
        f"10 text chunks and a closing one, each 20 ms after the last, no tool call (an ideal run takes "
        f"0.22 s, {expected} events); phasegraph in one process and with its default of a worker per CPU "
        f"({WORKERS}, on sqlite and on a fresh Postgres database), with its default durability (async) "
        "and with PHASEGRAPH_DURABILITY=exit (checkpoints at pause points only); "
        "phasegraph: httpx POST /api/runs/triggered_phase/stream (SSE); langgraph dev: langgraph-sdk "
        "runs.stream(stream_mode='custom'), stateless runs (its in-memory queue polls for runs every "
        "0.5-1 s); loopback, a fresh server per level and side, one warm-up run; each client reads its "
        f"stream to the end; completed: a final event within {cap:.0f} s and no error event",
        anchor=STUDIO if STUDIO in loads else PHASEGRAPH_SIDE,
        headline="p50 latency",
    )
    notes = [] if STUDIO in loads else [f"{LANGGRAPH} is missing (`make studio` builds it): no anchor"]
    for name, load in loads.items():
        by_seq = name != STUDIO
        row.sides.append(Side(name, _figures(load, n, cap, expected, lost_by_seq=by_seq)))
        if not any(r.completed for r in load.records):
            notes.append(f"{name}: no run completed within {cap:.0f} s (latency shown as the cap)")
        if load.log_errors:
            notes.append(f"{name}: log lines reporting an error: {load.log_errors}")
        if open_ := sum(r.completed and r.closed is None for r in load.records):
            notes.append(f"{name}: {open_} streams still open at the cap after their final event")
        if failed := [r.error for r in load.records if r.error]:
            notes.append(f"{name}: {len(failed)} runs failed, the first with {failed[0][:200]}")
    row.sides.sort(key=lambda side: side.name != row.anchor)
    notes += [_goal(row, n), *_lead(row, n)]
    row.note = "; ".join(note for note in notes if note)
    return row


def _goal(row: Row, n: int) -> str:
    """Issue 8's goal for this level, and whether the default phasegraph side met it."""
    mine = row.side(PHASEGRAPH_SIDE).figures
    if n == 1:
        p50 = _value(mine["p50 latency"])
        return f"goal: one run within 0.25 s: {p50:.3f} s, {'met' if p50 <= 0.25 else 'missed'}"
    if n == 500:  # a run cut at the cap loses its tail unseen by the seq gaps: every run must complete
        counts = [int(_value(mine[name])) for name in ("completed", "events lost", "events repeated")]
        clean = counts == [n, 0, 0] and _value(mine["failed"]) == 0
        rss = mine["peak RSS"].text()
        return (
            f"goal: every run completes, none lost or repeated, memory bounded: {counts[0]}/{n} completed, "
            f"{counts[1]} lost, {counts[2]} repeated, peak RSS {rss}: {'met' if clean else 'missed'}"
        )
    if n not in (50, 200):
        return ""
    if row.anchor != STUDIO:
        return "goal: p99 <= 0.5x and runs/s >= 2x langgraph dev: not checked, no anchor"
    anchor = row.side(STUDIO).figures
    p99 = _value(mine["p99 latency"]) / max(_value(anchor["p99 latency"]), 1e-9)  # lower is better
    rate = _value(mine["runs/s"]) / max(_value(anchor["runs/s"]), 1e-9)  # higher is better
    met = p99 <= 0.5 and rate >= 2
    verdict = "met" if met else "missed"
    return f"goal: p99 <= 0.5x and runs/s >= 2x langgraph dev: p99 {p99:.2f}x, runs/s {rate:.2f}x, {verdict}"


def _lead(row: Row, n: int) -> list[str]:
    """Issue 28's goal for the sides with a worker per CPU: p99 <= 0.5x and runs/s >= 2x langgraph dev."""
    if n not in LEAD_LEVELS:
        return []
    sides = [side for side in (WORKERS_SIDE, POSTGRES_SIDE) if side in {s.name for s in row.sides}]
    if row.anchor != STUDIO:
        return ["goal (workers): p99 <= 0.5x and runs/s >= 2x langgraph dev: not checked, no anchor"]
    anchor = row.side(STUDIO).figures
    verdicts = []
    for name in sides:
        mine = row.side(name).figures
        p99 = _value(mine["p99 latency"]) / max(_value(anchor["p99 latency"]), 1e-9)
        rate = _value(mine["runs/s"]) / max(_value(anchor["runs/s"]), 1e-9)
        clean = _value(mine["events lost"]) == 0 and _value(mine["completed"]) == n
        met = p99 <= 0.5 and rate >= 2 and clean
        verdicts.append(
            f"goal: {name} p99 <= 0.5x and runs/s >= 2x langgraph dev, none lost: p99 {p99:.2f}x, "
            f"runs/s {rate:.2f}x, {int(_value(mine['events lost']))} lost, {'met' if met else 'missed'}"
        )
    return verdicts


def _value(figure: Figure) -> float:
    return float(figure.value)


def _figures(load: Load, n: int, cap: float, expected: int, lost_by_seq: bool) -> dict[str, Figure]:
    latencies = sorted(r.latency for r in load.records if r.latency is not None and r.completed)
    firsts = [r.first for r in load.records if r.first is not None]
    closed = [r.closed for r in load.records if r.closed is not None and r.completed]
    if lost_by_seq:  # gaps in 1..last seq of every run, and seqs seen more than once
        lost = sum(max(r.seqs) - len(set(r.seqs)) for r in load.records if r.seqs)
        repeated = sum(len(r.seqs) - len(set(r.seqs)) for r in load.records)
    else:  # no seq on the custom stream: what a completed run missed of, or got beyond, its events
        lost = sum(max(0, expected - len(r.seqs)) for r in load.records if r.completed)
        repeated = sum(max(0, len(r.seqs) - expected) for r in load.records if r.completed)
    p99 = latencies[min(len(latencies) - 1, math.ceil(0.99 * len(latencies)) - 1)] if latencies else cap
    return {
        "p50 latency": Figure.of_samples(latencies, "s", 1.0) if latencies else Figure(cap, "s"),
        "p99 latency": Figure(round(p99, 3), "s"),  # nearest rank
        "first event p50": Figure.of_samples(firsts, "s", 1.0) if firsts else Figure(cap, "s"),
        "stream closed p50": Figure.of_samples(closed, "s", 1.0) if closed else Figure(cap, "s"),
        "completed": Figure(len(latencies)),
        "attempted": Figure(n),
        "failed": Figure(sum(bool(r.error) for r in load.records)),
        "events lost": Figure(lost),
        "events repeated": Figure(repeated),
        "runs/s": Figure(round(len(latencies) / load.seconds, 2)),  # until the last stream closed, or the cap
        "peak RSS": Figure(round(load.rss_mib, 1), "MiB"),
    }


async def _phasegraph_load(
    n: int, cap: float, workdir: Path, spec: str, durability: str = "async", workers: int = 1,
    database: str | None = None,
) -> Load:  # fmt: skip
    name = f"{n}-{durability}-{workers}{'-postgres' if database else ''}"
    env = {
        "PHASEGRAPH_CHECKPOINTER": database or f"sqlite:{workdir / f'server-load-{name}.db'}",
        "PHASEGRAPH_WORKERS": str(workers),
        "PHASEGRAPH_DURABILITY": durability,
        "PHASEGRAPH_MODEL": spec,
        "PHASEGRAPH_WORKSPACE": str(DEMO_WORKSPACE),
        "PHASEGRAPH_TWO_STAGE_ENABLED": "true",
    }
    command = [str(PHASEGRAPH), "serve", "--host", "127.0.0.1"]
    log = workdir / f"phasegraph-{name}.log"
    return await _load(n, cap, log, command, env, "/healthz", lambda client: partial(_phasegraph_run, client),
                       starts=workers)  # fmt: skip


async def _phasegraph_run(client: httpx.AsyncClient, record: Record) -> None:
    body = {"message": MESSAGE}
    async with client.stream("POST", "/api/runs/triggered_phase/stream", json=body) as response:
        response.raise_for_status()
        async for line in response.aiter_lines():
            if line.startswith("data:"):  # event: and id: repeat it; comment lines are keep-alives
                record.saw(parse_event(line.removeprefix("data:")))


async def _studio_load(n: int, cap: float, workdir: Path, spec: str) -> Load:
    command = [str(LANGGRAPH), "dev", "--no-browser", "--no-reload", "--host", "127.0.0.1"]
    command += ["--n-jobs-per-worker", str(JOBS_PER_WORKER), "--config", str(_studio_config(workdir))]
    context = {"model": spec, "workspace": str(DEMO_WORKSPACE)}
    log = workdir / f"langgraph-dev-{n}.log"

    def runs(client: httpx.AsyncClient) -> OneRun:
        return partial(_studio_run, LangGraphClient(client), context)

    return await _load(n, cap, log, command, OFFLINE, "/ok", runs)


async def _studio_run(sdk: LangGraphClient, context: dict[str, str], record: Record) -> None:
    graph_input: dict[str, Any] = {"messages": [{"role": "user", "content": MESSAGE}]}
    parts = sdk.runs.stream(None, "triggered_phase", input=graph_input, context=context, stream_mode="custom")
    async for part in parts:
        if part.event == "error":
            raise RuntimeError(f"langgraph dev: {part.data}")
        if part.event != "custom" or EVENT_KEY not in part.data:
            continue  # metadata, and trace entries (phasegraph_trace)
        record.saw(parse_event(part.data[EVENT_KEY]))


def _studio_config(workdir: Path) -> Path:
    """The project's langgraph.json (module targets) with an absolute dependency and no file persistence."""
    config = json.loads((ROOT / "langgraph.json").read_text(encoding="utf-8"))
    path = workdir / "langgraph.json"
    config |= {"dependencies": [str(ROOT)], "disable_persistence": True}
    path.write_text(json.dumps(config), encoding="utf-8")
    return path


async def _load(
    n: int,
    cap: float,
    log: Path,
    command: list[str],
    env: dict[str, str],
    health: str,
    runs: Callable[[httpx.AsyncClient], OneRun],
    starts: int = 0,
) -> Load:
    """Start the server (and its ``starts`` workers), put the load on it, read its peak memory, stop it."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    async with server([*command, "--port", str(port)], env, log, url + health, starts) as process:
        limits = httpx.Limits(max_connections=n + 8, max_keepalive_connections=n + 8)
        async with httpx.AsyncClient(base_url=url, limits=limits, timeout=httpx.Timeout(cap)) as client:
            records, seconds = await _drive(n, cap, runs(client))
        return Load(records, seconds, peak_rss_mib(process.pid), errors_in(log))


async def _drive(n: int, cap: float, one_run: OneRun, warm: bool = False) -> tuple[list[Record], float]:
    """Start ``n`` runs at once (after one warm-up run); cancel what is unfinished after ``cap`` seconds.

    Returns:
        Every run's record, and the seconds until the last run ended (or the cap).
    """
    if not warm:
        await _drive(1, cap, one_run, warm=True)  # warm-up, not kept: first imports, first connection
    records = [Record() for _ in range(n)]
    started = time.perf_counter()
    tasks = [asyncio.create_task(_to_end(one_run, record)) for record in records]
    done, pending = await asyncio.wait(tasks, timeout=cap)
    seconds = time.perf_counter() - started
    for task in pending:
        task.cancel()
    await asyncio.gather(*pending, return_exceptions=True)
    for task, record in zip(tasks, records, strict=True):
        if task in done and (exc := task.exception()) is not None:
            record.error = f"{type(exc).__name__}: {exc}"
    return records, seconds


async def _to_end(one_run: OneRun, record: Record) -> None:
    record.started = time.perf_counter()
    await one_run(record)
    record.closed = time.perf_counter() - record.started
    if record.latency is None:
        raise RuntimeError("the stream ended without a final event")
