"""Rows 1 and 5: what a tool cycle costs on each protocol, and what durability adds.

Both protocols run the same scripted turns with the same tools, each graph compiled once per
checkpointer; the anchor streams the same turns straight from the scripted model.
"""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

import psycopg
from langchain_core.messages import HumanMessage, SystemMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver

from bench.harness import Figure, Row, Side, interleaved
from phasegraph.graphs.registry import get_protocol
from phasegraph.graphs.run import stream_graph
from phasegraph.nodes.models import DEMO_WORKSPACE, make_model
from phasegraph.nodes.prompts import SYSTEM_PROMPT
from phasegraph.server.storage.persistence import open_checkpointer
from phasegraph.tools import default_registry

MESSAGE = "Summarise the roadmap in the docs folder."


def _call(name: str, **args: str) -> dict[str, Any]:
    return {"name": name, "args": args}


#: Five tool cycles (each turn a sentence and one call), then the answer: six model calls.
CYCLE_TURNS = [
    {"content": "Let me look at the docs folder.", "tool_calls": [_call("list_files", path="docs")]},
    {"content": "Now the roadmap itself.", "tool_calls": [_call("read_file", path="docs/roadmap.md")]},
    {"content": "And who is on the team.", "tool_calls": [_call("read_file", path="docs/team.md")]},
    {"content": "Where are milestones named?", "tool_calls": [_call("search_files", query="milestone")]},
    {"content": "Anything else in the top folder?", "tool_calls": [_call("list_files", path=".")]},
    {"content": "The roadmap has two milestones, in March and in June, and the team owns both."},
]
CYCLES = 5
MODEL_ALONE = "scripted model alone"
TRIGGERED, UNIFIED = "triggered_phase", "unified (create_agent)"


def write_script(workdir: Path) -> str:
    """Write the cycle script; returns its model spec."""
    path = workdir / "cycles.json"
    path.write_text(json.dumps({"turns": CYCLE_TURNS}), encoding="utf-8")
    return f"scripted:{path}"


def postgres_url() -> str:
    """The Postgres database the Postgres rows use (its checkpoint tables are created there)."""
    return os.environ.get("PHASEGRAPH_BENCH_POSTGRES_URL") or os.environ.get(
        "PHASEGRAPH_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test"
    )


async def postgres_reachable(url: str) -> bool:
    """Whether ``url`` answers within two seconds."""
    try:
        conn = await psycopg.AsyncConnection.connect(url, connect_timeout=2)
    except psycopg.Error:
        return False
    await conn.close()
    return True


@asynccontextmanager
async def checkpointers(workdir: Path) -> AsyncIterator[dict[str, BaseCheckpointSaver[Any] | None]]:
    """None, memory, sqlite and (when reachable) Postgres, opened the way the server opens them."""
    specs = {"memory": "memory", "sqlite": f"sqlite:{workdir / 'bench.db'}"}
    if await postgres_reachable(postgres_url()):
        specs["postgres"] = postgres_url()
    async with AsyncExitStack() as stack:
        opened: dict[str, BaseCheckpointSaver[Any] | None] = {"none": None}
        for name, spec in specs.items():
            opened[name] = await stack.enter_async_context(open_checkpointer(spec))
        yield opened


class Turns:
    """Runs one user turn of a protocol on a compiled graph, checking that it did the whole workload."""

    def __init__(self, protocol: str, saver: BaseCheckpointSaver[Any] | None, **context: Any) -> None:
        self.spec = get_protocol(protocol)
        self.graph = self.spec.compile(saver)
        self.context = context
        self.thread_ids: list[str] = []

    async def run(self, expected_tools: int) -> None:
        """One turn; raises unless it ended with a final answer after ``expected_tools`` tool results."""
        context = self.spec.make_context(workspace=str(DEMO_WORKSPACE), **self.context)
        self.thread_ids.append(f"bench-{context.request_id}")
        config: RunnableConfig = {"configurable": {"thread_id": self.thread_ids[-1]}}
        inputs = {"messages": [HumanMessage(MESSAGE)]}
        types = [e.type async for e in stream_graph(self.spec, self.graph, inputs, context, config)]
        if types.count("tool_result") != expected_tools or types[-1] != "final":
            raise RuntimeError(f"{self.spec.id} did not run the workload: {types}")


def _turn_of(turns: Turns, expected_tools: int) -> Callable[[], Awaitable[None]]:
    return lambda: turns.run(expected_tools)


def model_alone(spec: str, calls: int) -> Callable[[], Awaitable[None]]:
    """The anchor: one scripted model, tools bound, streaming each of the turns to its end."""
    schemas = default_registry().schemas()

    async def stream_turns() -> None:
        model = make_model(spec).bind_tools(schemas)
        prompt = [SystemMessage(SYSTEM_PROMPT), HumanMessage(MESSAGE)]
        for _ in range(calls):
            async for _chunk in model.astream(prompt):
                pass

    return stream_turns


async def overhead_rows(workdir: Path, repeats: int) -> list[Row]:
    """Row 1: milliseconds per cycle (one model call and the tool call it makes), per checkpointer."""
    spec = write_script(workdir)
    calls = CYCLES + 1
    rows = []
    async with checkpointers(workdir) as savers:
        for name, saver in savers.items():
            triggered = Turns("triggered_phase", saver, model=spec, max_phase_cycles_per_turn=CYCLES)
            unified = Turns("unified", saver, model=spec)
            samples = await interleaved(
                {
                    MODEL_ALONE: model_alone(spec, calls),
                    TRIGGERED: _turn_of(triggered, CYCLES),
                    UNIFIED: _turn_of(unified, CYCLES),
                },
                repeats,
            )
            rows.append(_overhead_row(name, samples, calls))
            await _forget(saver, triggered.thread_ids + unified.thread_ids)
    if "postgres" not in savers:
        rows.append(Row("1", "Overhead per tool cycle, checkpointer: postgres", "", "-", "-"))
        rows[-1].note = f"Postgres not reachable at {postgres_url()}"
    return rows


def _overhead_row(checkpointer: str, samples: dict[str, list[float]], calls: int) -> Row:
    per_cycle = {side: [s / calls for s in values] for side, values in samples.items()}
    row = Row(
        key="1",
        title=f"Overhead per tool cycle, checkpointer: {checkpointer}",
        workload=f"one user turn of {CYCLES} tool cycles and an answer ({calls} model calls, scripted model "
        "at zero delay, built-in workspace tools on the demo workspace), graph compiled once; "
        "figure: turn time / model calls",
        anchor=MODEL_ALONE,
        headline="per cycle",
    )
    for side, values in per_cycle.items():
        row.sides.append(Side(side, {"per cycle": Figure.of_samples(values)}))
    triggered, unified = row.side(TRIGGERED).figures, row.side(UNIFIED).figures
    ratio = float(triggered["per cycle"].value) / float(unified["per cycle"].value)
    triggered["x unified"] = Figure(round(ratio, 3))
    return row


async def durability_rows(workdir: Path, repeats: int) -> list[Row]:
    """Row 5: the demo turn of triggered_phase on memory (anchor), sqlite and Postgres checkpoints."""
    async with checkpointers(workdir) as savers:
        durable = {name: saver for name, saver in savers.items() if name != "none"}
        turns = {
            name: Turns("triggered_phase", saver, model="scripted:demo") for name, saver in durable.items()
        }
        samples = await interleaved({name: _turn_of(t, 2) for name, t in turns.items()}, repeats)
        for name, saver in durable.items():
            await _forget(saver, turns[name].thread_ids)
    row = Row(
        key="5",
        title="Durability cost",
        workload="one triggered_phase turn of the bundled demo script (two tool cycles, a refused duplicate, "
        "the answer: 3 cycles), each checkpointer opened as `phasegraph serve` opens it",
        anchor="memory",
        headline="turn",
        note="" if "postgres" in samples else f"Postgres not reachable at {postgres_url()}",
    )
    row.sides = [Side(name, {"turn": Figure.of_samples(values)}) for name, values in samples.items()]
    return [row]


async def _forget(saver: BaseCheckpointSaver[Any] | None, thread_ids: list[str]) -> None:
    """Delete the bench's threads, so repeated runs do not grow the database."""
    if saver is not None:
        for thread_id in thread_ids:
            await saver.adelete_thread(thread_id)
