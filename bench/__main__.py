"""``python -m bench [--quick]``: run every row, print the table, write latest.json and the chart."""

from __future__ import annotations

import argparse
import asyncio
import logging
import tempfile
import time
from pathlib import Path

from bench.agent_network import agent_network_rows
from bench.chart import draw
from bench.containment import containment_rows, stream_cut_row
from bench.goal_pursuit import goal_pursuit_rows
from bench.harness import Row, not_landed
from bench.observability import observability_rows
from bench.overhead import durability_rows, overhead_rows
from bench.planner import planner_rows
from bench.report import markdown, workloads, write_json
from bench.retention import retention_rows
from bench.server_load import server_rows
from bench.startup import startup_rows
from bench.user_tools import user_tools_rows
from bench.xml_contract import xml_contract_rows

RESULTS = Path(__file__).parent / "results"
#: Protocols whose issues add their own rows here once they land (row 6); every seed so far has landed.
LATER_PROTOCOLS: dict[str, str] = {}


async def measure(quick: bool, workdir: Path) -> list[Row]:
    """Every row, in-process rows first, then the servers."""
    repeats = 4 if quick else 40
    rows = await overhead_rows(workdir, repeats)
    rows.append(await stream_cut_row())
    rows += await containment_rows()
    rows += await durability_rows(workdir, repeats)
    rows += await goal_pursuit_rows(workdir, quick)
    rows += await agent_network_rows(workdir, quick)
    rows += await xml_contract_rows(workdir, quick)
    rows += await planner_rows(workdir, quick)
    rows += await retention_rows(workdir, quick)
    rows += await user_tools_rows(workdir, quick)
    rows += await observability_rows(quick)
    rows += await startup_rows(workdir, quick)
    rows += await server_rows(quick, workdir)
    rows += [not_landed("6", protocol, seed) for protocol, seed in LATER_PROTOCOLS.items()]
    return sorted(rows, key=lambda r: r.key)


def main() -> None:
    """Run the bench and write its results (to ``--out``, ``bench/results`` by default)."""
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="a small version, under two minutes")
    parser.add_argument("--out", type=Path, default=RESULTS, help="folder for latest.json and chart.png")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    args.out.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="phasegraph-bench-") as workdir:
        rows = asyncio.run(measure(args.quick, Path(workdir)))
    seconds = time.perf_counter() - started
    write_json(rows, args.out / "latest.json", args.quick, seconds)
    draw(rows, args.out / "chart.png")
    print(markdown(rows))
    print()
    print(workloads(rows))
    print(f"\n{len(rows)} rows in {seconds:.0f} s; results in {args.out}")


if __name__ == "__main__":
    main()
