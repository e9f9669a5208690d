"""`make bench QUICK=1` runs once in the suite, so the harness cannot rot (no timing is asserted)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).parents[1]
#: QUICK is meant to finish in under two minutes; this only bounds a hang.
LIMIT_SECONDS = 600


def test_quick_bench_measures_every_row_and_writes_its_results(tmp_path: Path):
    from bench.planner import MEASURED

    done = subprocess.run(
        [sys.executable, "-m", "bench", "--quick", "--out", str(tmp_path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=LIMIT_SECONDS,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    results = json.loads((tmp_path / "latest.json").read_text(encoding="utf-8"))
    rows = results["rows"]
    assert {r["key"] for r in rows} >= {
        "1",
        "2",
        "3a",
        "3b",
        "3c",
        "3d",
        "3e",
        "4",
        "5",
        "6",
        "7",
        "7b",
        "8",
        "9",
    }
    for row in rows:
        if row["note"] == "not landed yet" or not row["sides"]:
            continue
        # every measured row names its workload and has a ratio for each side against its anchor
        assert row["workload"], row["title"]
        assert row["anchor"] in [s["name"] for s in row["sides"]], row["title"]
        assert all(r is not None for r in row["ratios"].values()), row
    landed = [r for r in rows if r["title"].startswith("goal_pursuit")]  # row 6: measured, not reserved
    assert len(landed) == 3 and all(r["sides"] for r in landed), [r["title"] for r in landed]
    assert any(r["note"].endswith((": met", ", met", ", missed")) for r in landed)
    assert not [r["title"] for r in rows if r["note"] == "not landed yet"]  # every protocol has its rows
    (planner,) = [r for r in rows if r["title"].startswith("planner")]
    # model calls, counted from the usage rows: a plan (3 calls) against one call per step plus the answer (4)
    assert planner["ratios"] == {planner["anchor"]: 1.0, MEASURED: 0.75}, planner
    assert results["machine"]["versions"]["langgraph"]
    assert (tmp_path / "chart.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "| row | side | headline | x anchor |" in done.stdout


def test_the_500_run_goal_needs_every_run_to_complete_not_only_no_seq_gaps():
    from bench.harness import Figure, Row, Side
    from bench.server_load import PHASEGRAPH_SIDE, _goal

    def row(completed: int) -> Row:
        figures = {"completed": Figure(completed), "events lost": Figure(0), "events repeated": Figure(0),
                   "failed": Figure(0), "peak RSS": Figure(200.0, "MiB")}  # fmt: skip
        return Row("4", "N=500", "", PHASEGRAPH_SIDE, "p50 latency", [Side(PHASEGRAPH_SIDE, figures)])

    assert _goal(row(500), 500).endswith(": met")
    assert _goal(row(400), 500).endswith(": missed")  # runs cut at the cap lose their tail unseen


def test_the_workers_goal_compares_each_worker_side_with_langgraph_dev_and_needs_every_event():
    from bench.harness import Figure, Row, Side
    from bench.server_load import POSTGRES_SIDE, STUDIO, WORKERS_SIDE, _lead

    def side(name: str, p99: float, rate: float, lost: int = 0) -> Side:
        figures = {"p99 latency": Figure(p99, "s"), "runs/s": Figure(rate), "events lost": Figure(lost),
                   "completed": Figure(200)}  # fmt: skip
        return Side(name, figures)

    sides = [side(STUDIO, 10.0, 20.0), side(WORKERS_SIDE, 4.0, 41.0), side(POSTGRES_SIDE, 6.0, 41.0)]
    row = Row("4", "N=200", "", STUDIO, "p50 latency", sides)
    sqlite, postgres = _lead(row, 200)
    assert sqlite.startswith(f"goal: {WORKERS_SIDE}") and "p99 0.40x, runs/s 2.05x, 0 lost, met" in sqlite
    assert "p99 0.60x, runs/s 2.05x, 0 lost, missed" in postgres  # p99 over half the anchor's
    row.sides[1] = side(WORKERS_SIDE, 4.0, 41.0, lost=3)
    assert _lead(row, 200)[0].endswith("3 lost, missed")
    assert _lead(row, 50) == []  # the goal is set at N = 200 and 500 only
