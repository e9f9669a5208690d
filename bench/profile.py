"""Row 1's workload in a loop, to run under a profiler (docs/performance.md).

``py-spy record -o profile.svg -- .venv/bin/python -m bench.profile`` or
``.venv/bin/pyinstrument -m bench.profile --protocol unified``. ``--protocol goal_pursuit`` loops row 6's
workload instead, the bundled demo pursuit.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
from pathlib import Path

from bench.goal_pursuit import Pursuits
from bench.overhead import CYCLES, Turns, write_script
from phasegraph.graphs.registry import PROTOCOLS
from phasegraph.server.storage.persistence import open_checkpointer


async def loop(protocol: str, turns: int, checkpointer: str, workdir: Path) -> None:
    """Run ``turns`` user turns of the five-cycle script (goal_pursuit: the demo pursuit) on one graph."""
    spec = write_script(workdir)
    extra = {"max_phase_cycles_per_turn": CYCLES} if protocol == "triggered_phase" else {}
    saver_spec = f"sqlite:{workdir / 'profile.db'}" if checkpointer == "sqlite" else "memory"
    async with open_checkpointer(saver_spec) as saver:
        chosen = saver if checkpointer != "none" else None
        if protocol == "goal_pursuit":
            pursuits = Pursuits(chosen)
            pursuits.prepare(turns)  # the worlds load before the loop, as in the bench
            for _ in range(turns):
                await pursuits.run()
            return
        runner = Turns(protocol, chosen, model=spec, **extra)
        for _ in range(turns):
            await runner.run(CYCLES)


def main() -> None:
    """Parse the options and run the loop."""
    parser = argparse.ArgumentParser(prog="python -m bench.profile", description=__doc__)
    parser.add_argument("--protocol", choices=sorted(PROTOCOLS), default="triggered_phase")
    parser.add_argument("--turns", type=int, default=300)
    parser.add_argument("--checkpointer", choices=["none", "memory", "sqlite"], default="none")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="phasegraph-profile-") as workdir:
        asyncio.run(loop(args.protocol, args.turns, args.checkpointer, Path(workdir)))


if __name__ == "__main__":
    main()
