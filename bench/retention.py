"""Row 7: the sqlite database after many runs, with and without checkpoint retention.

Every side runs the same conversations (threads of ``TURNS`` turns of the bundled triggered_phase demo,
two tool cycles each) on a fresh sqlite database opened as ``phasegraph serve`` opens it. The anchor
keeps every checkpoint. The measured side prunes to ``keep_latest=KEEP`` every tenth of the runs, as
the server's background rounds do (rows deleted, no VACUUM: sqlite reuses the free pages); the last
side is that database after ``phasegraph prune`` (one more pass, then VACUUM). Figures: the file's
size (main file and write-ahead log, after folding the log in), its checkpoint and write rows.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

import aiosqlite
from langchain_core.messages import HumanMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver

from bench.harness import Figure, Row, Side
from phasegraph.graphs.registry import get_protocol
from phasegraph.graphs.run import stream_graph
from phasegraph.nodes.models import DEMO_WORKSPACE
from phasegraph.server.storage.persistence import open_checkpointer
from phasegraph.server.storage.pruning.base import Pruner
from phasegraph.server.storage.retention import RetentionPolicy, prune, pruner_for

KEY = "7"
KEEP = 5
TURNS = 5
MESSAGE = "Summarise the roadmap in the docs folder."
ANCHOR = "no retention"
ROUNDS = f"keep_latest={KEEP}, a pass every tenth of the runs (the server's rounds, no VACUUM)"
VACUUMED = "the same, then phasegraph prune (one more pass and VACUUM)"
HEADLINE = "database size"


@dataclass
class Database:
    """One side's file once its runs are done."""

    size: int
    checkpoints: int
    writes: int
    pruning_seconds: float


async def _fill(path: Path, runs: int, policy: RetentionPolicy | None) -> Database:
    """``runs`` demo turns on ``runs / TURNS`` threads; pruned along the way when ``policy`` is set."""
    spec = get_protocol("triggered_phase")
    pruning = 0.0
    async with open_checkpointer(f"sqlite:{path}") as saver:
        graph, pruner = spec.compile(saver), pruner_for(saver, requests=False)
        for run in range(runs):
            context = spec.make_context(model="scripted:demo", workspace=str(DEMO_WORKSPACE))
            config: RunnableConfig = {"configurable": {"thread_id": f"bench-{run // TURNS}"}}
            inputs = {"messages": [HumanMessage(MESSAGE)]}
            try:
                types = [e.type async for e in stream_graph(spec, graph, inputs, context, config)]
            finally:
                await context.aclose()
            if types[-1] != "final":
                raise RuntimeError(f"run {run} did not answer: {types}")
            if policy is not None and (run + 1) % max(runs // 10, 1) == 0:
                pruning += await _timed_pass(pruner, policy)
        return await _measure(saver, pruner, pruning)


async def _vacuumed(path: Path, policy: RetentionPolicy) -> Database:
    """The database at ``path`` after what ``phasegraph prune`` does: one more pass, then VACUUM."""
    async with open_checkpointer(f"sqlite:{path}") as saver:
        pruner = pruner_for(saver, requests=False)
        return await _measure(saver, pruner, await _timed_pass(pruner, policy, compact=True))


async def _measure(saver: BaseCheckpointSaver[str], pruner: Pruner, pruning: float) -> Database:
    conn: aiosqlite.Connection = saver.conn  # type: ignore[attr-defined]
    await conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # the log folded in: the file alone
    rows = []
    for table in ("checkpoints", "writes"):
        cursor = await conn.execute(f"SELECT count(*) FROM {table}")
        rows.append(int((await cursor.fetchone() or (0,))[0]))
    return Database(await pruner.size() or 0, rows[0], rows[1], pruning)


async def _timed_pass(pruner: Pruner, policy: RetentionPolicy, compact: bool = False) -> float:
    started = time.perf_counter()
    report = await prune(pruner, policy)
    if compact:
        await pruner.compact()
    if report.busy or report.expired:
        raise RuntimeError(f"the bench's pass should only trim: {report.summary()}")
    return time.perf_counter() - started


async def retention_rows(workdir: Path, quick: bool) -> list[Row]:
    """Row 7: sizes after the same runs, each side on a database of its own."""
    runs = 60 if quick else 1000
    root = workdir / "retention"
    root.mkdir(parents=True, exist_ok=True)
    policy = RetentionPolicy(keep_latest=KEEP)
    sides = {
        ANCHOR: await _fill(root / "all.db", runs, None),
        ROUNDS: await _fill(root / "pruned.db", runs, policy),
        VACUUMED: await _vacuumed(root / "pruned.db", policy),
    }
    anchor = sides[ANCHOR]
    row = Row(
        key=KEY,
        title=f"checkpoint retention: sqlite size after {runs} runs",
        workload=f"{runs} turns of the bundled triggered_phase demo (two tool cycles and an answer each) on "
        f"{runs // TURNS} threads of {TURNS} turns, in process, each side on a fresh sqlite database opened "
        f"as `phasegraph serve` opens it. Anchor: every checkpoint kept. Measured: keep_latest={KEEP} "
        "applied every tenth of the runs (the server's background rounds: rows deleted, free pages reused, "
        "no VACUUM), then the same followed by `phasegraph prune` (one more pass and VACUUM). Size: main "
        "file plus write-ahead log once the log is folded in",
        anchor=ANCHOR,
        headline=HEADLINE,
        note=f"{runs} runs saved {anchor.checkpoints} checkpoints and {anchor.writes} writes; with "
        f"retention {sides[ROUNDS].checkpoints} checkpoints remain "
        f"({runs // TURNS} threads x {KEEP}), in a file {sides[ROUNDS].size / anchor.size:.2f}x the anchor's "
        f"before VACUUM and {sides[VACUUMED].size / anchor.size:.2f}x after",
    )
    for name, database in sides.items():
        figures = {
            HEADLINE: Figure(round(database.size / 1_048_576, 3), "MiB"),
            "checkpoints": Figure(database.checkpoints),
            "writes": Figure(database.writes),
            "pruning": Figure(round(database.pruning_seconds, 3), "s"),
        }
        row.sides.append(Side(name, figures))
    return [row]
