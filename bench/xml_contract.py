"""Row 6, xml_contract: 8 x 200 ms calls as one <parallel> block against <sequential>; the demo's overhead.

A scripted turn proposes one block of eight ``slow_echo`` calls of 200 ms each on the bundled demo MCP
server (a real stdio subprocess), then answers. The figure is the block's wall time read from its
events, from the ``xml_block`` event to the last of its ``tool_result`` events; the ``<sequential>``
block is the anchor, so the parallel side's ratio is parallel / sequential (ideally 1/8, plus what
running calls concurrently costs). The second row times the bundled demo turn (two blocks, four calls,
three model calls) and takes the time spent inside its blocks out: what is left per iteration is the
orchestration, next to the demo's answers streamed from the scripted model alone.

Every turn of both rows uses one compiled graph and one open demo server (``mcp_services``), so the
server's start (about half a second) is paid once, not per turn, and never timed.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Awaitable, Callable
from pathlib import Path

from langchain_core.messages import HumanMessage, SystemMessage
from langchain_core.runnables import RunnableConfig

from bench.harness import Figure, Row, Side, interleaved
from phasegraph.graphs.registry import get_protocol
from phasegraph.graphs.run import stream_graph
from phasegraph.nodes.events import Event, ToolResultEvent, XmlBlock
from phasegraph.nodes.models import DEMO_WORKSPACE, make_model
from phasegraph.nodes.scripted import load_script
from phasegraph.nodes.trace import MemoryTraceStore
from phasegraph.nodes.xml_contract.action_phase import STOP_SEQUENCES
from phasegraph.nodes.xml_contract.context import DEMO_SCRIPT
from phasegraph.nodes.xml_contract.prompts import XML_CONTRACT_PROMPT
from phasegraph.tools.mcp import McpServices, default_services

KEY = "6"
CALLS, CALL_MS = 8, 200
SEQUENTIAL = f"<sequential> ({CALLS} x {CALL_MS} ms)"
PARALLEL = f"<parallel> ({CALLS} x {CALL_MS} ms)"
BLOCK_TIME = "block wall time"
MESSAGE = "Echo eight words back, slowly."
#: The task the bundled demo script answers.
DEMO_TASK = "Summarise the roadmap and say who is on the team."
DEMO_TURN = "xml_contract demo turn, outside its blocks"
MODEL_ALONE = "scripted model alone, the demo's answers"
PER_ITERATION = "per iteration"
#: The demo's blocks and calls: a parallel read of two files, then a sequential calculate + slow_echo.
DEMO_BLOCKS, DEMO_CALLS = 2, 4


def block(kind: str) -> str:
    """The scripted proposal: ``CALLS`` slow echoes (distinct texts: no call repeats another) in one block."""
    calls = "".join(
        f"<demo><slow_echo><text>echo {i}</text><ms>{CALL_MS}</ms></slow_echo></demo>"
        for i in range(1, CALLS + 1)
    )
    return f"<{kind}>\n{calls}\n</{kind}>\n<execute_tools />"


def write_script(workdir: Path, kind: str) -> str:
    """The two-turn script (the block, then the answer) for ``kind``; returns its model spec."""
    path = workdir / f"xml-contract-{kind}.json"
    turns = [{"content": block(kind)}, {"content": f"Final Answer: {CALLS} echoes."}]
    path.write_text(json.dumps({"turns": turns}), encoding="utf-8")
    return f"scripted:{path}"


def block_times(events: list[Event]) -> list[tuple[str, int, float]]:
    """(kind, calls, seconds) of each block run: its ``xml_block`` event to its last ``tool_result``."""
    found: list[tuple[str, int, float]] = []
    for started in (e for e in events if isinstance(e, XmlBlock)):
        results = [e for e in events if isinstance(e, ToolResultEvent) and e.group == started.group]
        if len(results) != len(started.steps) or any(r.status != "ok" for r in results):
            raise RuntimeError(f"block {started.group} did not run every call: {[r.status for r in results]}")
        seconds = (max(r.ts for r in results) - started.ts).total_seconds()
        found.append((started.kind, len(results), seconds))
    return found


class Turns:
    """Scripted xml_contract turns on one compiled graph and one open demo server."""

    def __init__(self, services: McpServices, dataset_dir: Path) -> None:
        self.spec = get_protocol("xml_contract")
        self.graph = self.spec.compile()
        self.services = services
        self.dataset_dir = dataset_dir

    async def run(self, model: str, message: str) -> list[Event]:
        """One turn to its final answer; raises unless it ended with one."""
        context = self.spec.make_context(
            model=model,
            workspace=str(DEMO_WORKSPACE),
            mcp_services=self.services,
            dataset_dir=str(self.dataset_dir),  # the default writes its training data: so does the bench
        )
        config: RunnableConfig = {"configurable": {"thread_id": f"bench-{context.request_id}"}}
        inputs = {"messages": [HumanMessage(message)]}
        try:
            events = [
                e
                async for e in stream_graph(
                    self.spec, self.graph, inputs, context, config, traces=MemoryTraceStore()
                )
            ]
        finally:
            await context.aclose()  # a given mcp_services stays open
        if not events or events[-1].type != "final":
            raise RuntimeError(f"the xml_contract turn did not answer: {[e.type for e in events]}")
        return events


async def parallel_row(turns: Turns, workdir: Path, repeats: int) -> Row:
    """The same eight calls as one <sequential> block (anchor) and one <parallel> block, interleaved."""
    blocks: dict[str, list[float]] = {SEQUENTIAL: [], PARALLEL: []}
    work: dict[str, list[float]] = {SEQUENTIAL: [], PARALLEL: []}  # the calls' own durations, summed

    def side(name: str, kind: str) -> Callable[[], Awaitable[None]]:
        model = write_script(workdir, kind)

        async def one_turn() -> None:
            events = await turns.run(model, MESSAGE)
            ran = block_times(events)
            if [(k, n) for k, n, _ in ran] != [(kind, CALLS)]:
                raise RuntimeError(f"the {kind} turn ran {ran}, not one {kind} block of {CALLS} calls")
            blocks[name].append(ran[0][2])
            work[name].append(sum(e.duration_ms for e in events if isinstance(e, ToolResultEvent)) / 1000)

        return one_turn

    samples = await interleaved(
        {SEQUENTIAL: side(SEQUENTIAL, "sequential"), PARALLEL: side(PARALLEL, "parallel")}, repeats
    )
    for name in blocks:  # the warm-up round's blocks are not kept
        blocks[name], work[name] = blocks[name][-repeats:], work[name][-repeats:]
    ratio = statistics.median(blocks[PARALLEL]) / statistics.median(blocks[SEQUENTIAL])
    above = statistics.median(blocks[PARALLEL]) * 1000 - CALL_MS
    row = Row(
        key=KEY,
        title=f"xml_contract: {CALLS} x {CALL_MS} ms calls, <parallel> vs <sequential>",
        workload=f"a scripted xml_contract turn whose one block is {CALLS} slow_echo calls of {CALL_MS} ms "
        "on the bundled demo MCP server (a stdio subprocess, opened once for every turn), as <sequential> "
        "(anchor) and as <parallel>, then a final answer; scripted model at zero delay, graph compiled "
        f"once, no checkpointer; figure: the block's wall time from its events (xml_block to the last "
        f"tool_result), {repeats} turns per side, interleaved",
        anchor=SEQUENTIAL,
        headline=BLOCK_TIME,
        note=f"parallel / sequential = {ratio:.3f} (ideal 1/{CALLS} = {1 / CALLS:.3f}); the parallel block "
        f"took {above:.0f} ms more than one {CALL_MS} ms call",
    )
    for name, values in blocks.items():
        figures = {
            BLOCK_TIME: Figure.of_samples(values),
            "calls' own time, summed": Figure.of_samples(work[name]),
            "turn": Figure.of_samples(samples[name]),
            "calls": Figure(CALLS),
        }
        row.sides.append(Side(name, figures))
    return row


def model_alone(calls: int) -> Callable[[], Awaitable[None]]:
    """The anchor: the demo's answers streamed to their ends from the scripted model, stop sequences bound."""
    prompt = [SystemMessage(XML_CONTRACT_PROMPT), HumanMessage(DEMO_TASK)]

    async def stream_answers() -> None:
        for index in range(calls):
            model = make_model("scripted:demo", call_index=index, demo_script=DEMO_SCRIPT)
            async for _chunk in model.bind(stop=STOP_SEQUENCES).astream(prompt):
                pass

    return stream_answers


async def overhead_row(turns: Turns, repeats: int) -> Row:
    """Milliseconds per iteration of the demo turn, the time inside its blocks taken out."""
    iterations = len(load_script(DEMO_SCRIPT).turns)  # one model call each; the last one answers
    in_blocks: list[float] = []

    async def demo_turn() -> None:
        ran = block_times(await turns.run("scripted:demo", DEMO_TASK))
        if len(ran) != DEMO_BLOCKS or sum(n for _, n, _ in ran) != DEMO_CALLS:
            raise RuntimeError(f"the demo turn ran {ran}, not {DEMO_BLOCKS} blocks of {DEMO_CALLS} calls")
        in_blocks.append(sum(seconds for _, _, seconds in ran))

    samples = await interleaved({MODEL_ALONE: model_alone(iterations), DEMO_TURN: demo_turn}, repeats)
    blocks = in_blocks[-repeats:]  # the warm-up round's are not kept
    outside = [turn - inside for turn, inside in zip(samples[DEMO_TURN], blocks, strict=True)]
    row = Row(
        key=KEY,
        title="xml_contract: overhead per iteration, demo turn",
        workload=f"the bundled xml_contract demo turn ({iterations} model calls: a <parallel> read of two "
        "files, a <sequential> calculate + 50 ms slow_echo with $result_of_step_1, then the answer) on the "
        "bundled demo MCP server opened once, scripted model at zero delay, graph compiled once, no "
        "checkpointer, training data written; figure: (turn time - time inside its blocks, from their "
        f"events) / {iterations} iterations, against the demo's answers streamed from the scripted model "
        "alone (stop sequences bound), per answer",
        anchor=MODEL_ALONE,
        headline=PER_ITERATION,
    )
    row.sides = [
        Side(
            MODEL_ALONE,
            {
                PER_ITERATION: Figure.of_samples([s / iterations for s in samples[MODEL_ALONE]]),
                "model calls": Figure(iterations),
            },
        ),
        Side(
            DEMO_TURN,
            {
                PER_ITERATION: Figure.of_samples([s / iterations for s in outside]),
                "turn": Figure.of_samples(samples[DEMO_TURN]),
                "inside blocks": Figure.of_samples(blocks),
                "model calls": Figure(iterations),
            },
        ),
    ]
    return row


async def xml_contract_rows(workdir: Path, quick: bool) -> list[Row]:
    """Row 6's xml_contract rows on one demo MCP server; quick runs fewer turns of the same workloads."""
    services = await McpServices.open(default_services(DEMO_WORKSPACE))
    try:
        if services.unavailable:
            raise RuntimeError(f"the demo MCP server did not start: {services.unavailable}")
        turns = Turns(services, workdir / "xml-contract-dataset")
        return [
            await parallel_row(turns, workdir, 3 if quick else 10),
            await overhead_row(turns, 5 if quick else 30),
        ]
    finally:
        await services.close()
