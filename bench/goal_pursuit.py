"""Row 6, goal_pursuit: orchestration per LLM phase, collapsed tool schemas, and resource search.

The overhead row times the bundled demo pursuit (15 LLM phases, two executions) against the same anchor as
row 1, the scripted model streaming on its own, with row 1's ``triggered_phase`` turn timed alongside so the
two protocols compare within one run. The prompt row counts characters; the search row times loading a
generated world of 1,000 resources against reading the same files.
"""

from __future__ import annotations

import statistics
import tempfile
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from langchain_core.messages import HumanMessage, SystemMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver
from pydantic import BaseModel

from bench.harness import Figure, Row, Side, interleaved
from bench.overhead import CYCLES, MODEL_ALONE, TRIGGERED, Turns, model_alone, write_script
from bench.resources import generate_world, measure_fts
from phasegraph.graphs.registry import get_protocol
from phasegraph.graphs.run import run, stream_graph
from phasegraph.nodes.goal_pursuit.context import DEMO_SCRIPT, GoalPursuitContext
from phasegraph.nodes.goal_pursuit.schemas import (
    ActionDecision,
    DiscoveryPlan,
    RefinementDecision,
    RefinementPlan,
)
from phasegraph.nodes.models import DEMO_WORKSPACE, make_model
from phasegraph.nodes.scripted import Script, ScriptedChatModel, load_script
from phasegraph.nodes.trace import MemoryTraceStore
from phasegraph.tools.resources import ResourceRepository, load_bundled, resource_registry
from phasegraph.tools.resources.files import FORMATS, read_folder

KEY = "6"
GOAL = (
    "The Grey Fox found her compass at the lighthouse in chapter 3: "
    "give it back to her and note it in that chapter."
)
GOAL_PURSUIT = "goal_pursuit (demo pursuit)"
STRUCTURED_ALONE = "scripted model alone, the demo's structured answers"
SCHEMAS: dict[str, type[BaseModel]] = {
    s.__name__: s for s in (DiscoveryPlan, RefinementPlan, ActionDecision, RefinementDecision)
}
#: The demo's executions (move_item, add_chapter_note); every other phase is one model call.
DEMO_EXECUTIONS = 2
RESOURCES = 1000
QUERIES = 50
#: The goal the search row states: a world of 1,000 resources loaded and searched within a second.
FTS_GOAL_SECONDS = 1.0
#: What a profile of the demo pursuit showed (pyinstrument, 60 pursuits); the overhead row's note.
PROFILE_FINDING = (
    "roughly two thirds of a phase is the structured model call itself (compare the last side), and its "
    "largest part is LangChain turning the phase's pydantic schema into a tool schema twice per call "
    "(bind_tools in with_structured_output, then again for tracing metadata in agenerate): 36% of the "
    "profiled time, 1.4 ms of 10 ms per phase in an A/B run with it cached. LangGraph's steps take about "
    "10%, rendering the phase template and its variables 4%, events and trace entries 1.5%."
)
READ_ONLY, PARSE_ONLY, LOAD_INDEX = (
    "read the files (no parsing, no index)",
    "parse the files (no index)",
    "load + index (ResourceRepository.load)",
)


def demo_calls() -> int:
    """Model calls of the demo pursuit: one per LLM phase, no retries."""
    return len(load_script(DEMO_SCRIPT).turns)


class Pursuits:
    """Runs the demo pursuit on one compiled graph, each run on a fresh copy of the story world.

    The copies are loaded before the timing starts (``prepare``): the demo changes the world it runs on.
    """

    def __init__(self, saver: BaseCheckpointSaver[Any] | None = None) -> None:
        self.spec = get_protocol("goal_pursuit")
        self.graph = self.spec.compile(saver)
        self.worlds: list[ResourceRepository] = []
        self.thread_ids: list[str] = []

    def prepare(self, runs: int) -> None:
        """Load ``runs`` copies of the story world."""
        self.worlds += [load_bundled() for _ in range(runs)]

    async def run(self) -> None:
        """One pursuit; raises unless it ran every LLM phase and both executions, and gave a final answer."""
        world = self.worlds.pop() if self.worlds else load_bundled()
        context = self.spec.make_context(
            model="scripted:demo", workspace=str(DEMO_WORKSPACE), resource_repository=world
        )
        self.thread_ids.append(f"bench-{context.request_id}")
        config: RunnableConfig = {"configurable": {"thread_id": self.thread_ids[-1]}}
        inputs = {"messages": [HumanMessage(GOAL)]}
        events = [e async for e in stream_graph(self.spec, self.graph, inputs, context, config)]
        types = [e.type for e in events]
        phases = [getattr(e, "phase", None) for e in events if e.type == "phase_start"]
        llm_phases = len([p for p in phases if p != "execution"])
        executions = types.count("tool_result")
        if executions != DEMO_EXECUTIONS or types[-1] != "final" or llm_phases != demo_calls():
            raise RuntimeError(f"goal_pursuit did not run the demo pursuit: {types}")


def structured_alone() -> Callable[[], Awaitable[None]]:
    """The demo's answers straight from the scripted model, read the way a phase reads them."""
    turns = load_script(DEMO_SCRIPT).turns
    prompt = [SystemMessage("Answer with the requested plan."), HumanMessage(GOAL)]

    async def answer_all() -> None:
        for index, turn in enumerate(turns):
            schema = SCHEMAS[turn.tool_calls[0].name]
            model = make_model("scripted:demo", call_index=index, demo_script=DEMO_SCRIPT)
            runnable = model.with_structured_output(schema, method="function_calling", include_raw=True)
            result = await runnable.ainvoke(prompt)
            if not isinstance(result, dict) or not isinstance(result.get("parsed"), schema):
                raise RuntimeError(f"demo turn {index + 1} did not parse as {schema.__name__}")

    return answer_all


async def overhead_row(workdir: Path, repeats: int) -> Row:
    """Milliseconds per model call: the anchor, a triggered_phase cycle and a goal_pursuit LLM phase."""
    spec = write_script(workdir)
    cycle_calls, phase_calls = CYCLES + 1, demo_calls()
    triggered = Turns("triggered_phase", None, model=spec, max_phase_cycles_per_turn=CYCLES)
    pursuits = Pursuits()
    pursuits.prepare(repeats + 1)  # the warm-up round too
    samples = await interleaved(
        {
            MODEL_ALONE: model_alone(spec, cycle_calls),
            TRIGGERED: lambda: triggered.run(CYCLES),
            GOAL_PURSUIT: pursuits.run,
            STRUCTURED_ALONE: structured_alone(),
        },
        repeats,
    )
    calls = {MODEL_ALONE: cycle_calls, TRIGGERED: cycle_calls, GOAL_PURSUIT: phase_calls}
    calls[STRUCTURED_ALONE] = phase_calls
    row = Row(
        key=KEY,
        title="goal_pursuit: overhead per LLM phase, checkpointer: none",
        workload=f"the bundled goal_pursuit demo pursuit ({phase_calls} LLM phases, each one structured "
        f"answer, and {DEMO_EXECUTIONS} executions; scripted model at zero delay, a fresh copy of the story "
        "world per run, loaded before timing), graph compiled once, no checkpointer; figure: pursuit time / "
        f"LLM phases. Beside it row 1's triggered_phase turn ({CYCLES} tool cycles and an answer, per model "
        "call) and its anchor; the last side reads the demo's answers straight from the scripted model "
        "through with_structured_output",
        anchor=MODEL_ALONE,
        headline="per model call",
        note="Profile (pyinstrument, `python -m bench.profile --protocol goal_pursuit`): " + PROFILE_FINDING,
    )
    for side, values in samples.items():
        figures = {"per model call": Figure.of_samples([s / calls[side] for s in values])}
        if side in (TRIGGERED, GOAL_PURSUIT):
            figures["turn"] = Figure.of_samples(values)
        figures["model calls"] = Figure(calls[side])
        row.sides.append(Side(side, figures))
    mine, theirs = row.side(GOAL_PURSUIT).figures, row.side(TRIGGERED).figures
    ratio = float(mine["per model call"].value) / float(theirs["per model call"].value)
    mine["x triggered_phase"] = Figure(round(ratio, 3))
    return row


def _turn(name: str, args: dict[str, Any]) -> dict[str, Any]:
    return {"content": "", "tool_calls": [{"name": name, "args": args}]}


def _discover(**plan: Any) -> dict[str, Any]:
    return _turn("DiscoveryPlan", {"discovery_analysis": "looked", **plan})


FINALIZE = _turn(
    "ActionDecision",
    {"situation_analysis": "done", "decision_type": "finalize", "finalization": {"response": "ok"}},
)
APPROVE = _turn("RefinementDecision", {"analysis": "fine", "verdict": "approve"})


async def _decision_prompt(turns: list[dict[str, Any]]) -> int:
    """Characters of the action_decision prompt of a pursuit scripted with ``turns``."""
    model = ScriptedChatModel(script=Script.model_validate({"turns": turns}), source="bench:collapsed")
    context = GoalPursuitContext(chat_model=model, resource_repository=load_bundled())
    result = await run("goal_pursuit", GOAL, context=context, traces=MemoryTraceStore())
    ends = [e for e in result.events if e.type == "phase_end" and e.phase == "action_decision"]
    if not model.exhausted or result.final is None or not ends or ends[0].prompt_chars is None:
        raise RuntimeError(f"the prompt-size pursuit did not finish: {[e.type for e in result.events]}")
    return ends[0].prompt_chars


async def prompt_size_row() -> Row:
    """The action_decision prompt with every tool collapsed (one line each) and expanded (full schema)."""
    names = resource_registry().names()
    expanded = await _decision_prompt([_discover(expand_tools=names), _discover(), FINALIZE, APPROVE])
    collapsed = await _decision_prompt([_discover(), FINALIZE, APPROVE])
    return Row(
        key=KEY,
        title="goal_pursuit: collapsed vs expanded tool schemas",
        workload="the first action_decision prompt of a scripted pursuit of the demo goal on the story "
        f"world, nothing loaded, with all {len(names)} tools ({', '.join(names)}) collapsed to one line "
        "each, and expanded to their full JSON schema by a first discovery round (that side runs one more "
        "discovery round); figure: prompt characters (the system prompt and the goal)",
        anchor="all tools expanded",
        headline="action_decision prompt",
        sides=[
            Side("all tools expanded", {"action_decision prompt": Figure(expanded, "chars")}),
            Side(
                "all tools collapsed",
                {
                    "action_decision prompt": Figure(collapsed, "chars"),
                    "saved": Figure(expanded - collapsed, "chars"),
                },
            ),
        ],
    )


def read_only(folder: Path) -> None:
    """Every file the loader would read, read as text and nothing more."""
    for path in sorted(folder.rglob("*")):
        if path.is_file() and path.suffix.lower() in FORMATS:
            path.read_text(encoding="utf-8")


async def search_row(repeats: int) -> Row:
    """Loading (parsing, indexing) 1,000 generated resources and searching them, against reading the files."""
    loads: list[float] = []
    searches: list[float] = []
    slowest: list[float] = []
    counted: list[float] = []

    def fts(world: Path) -> Callable[[], Awaitable[None]]:
        async def load_and_search() -> None:
            figures = measure_fts(folder=world, queries=QUERIES)
            loads.append(figures["load_seconds"])
            searches.append(figures["search_mean_seconds"])
            slowest.append(figures["search_max_seconds"])
            counted.append(figures["resources"])

        return load_and_search

    def sync(job: Callable[[], object]) -> Callable[[], Awaitable[None]]:
        async def timed() -> None:
            job()

        return timed

    with tempfile.TemporaryDirectory(prefix="phasegraph-bench-world-") as temporary:
        world = Path(temporary)
        generate_world(world, RESOURCES)
        files = sum(1 for p in world.rglob("*") if p.is_file() and p.suffix.lower() in FORMATS)
        size = sum(p.stat().st_size for p in world.rglob("*") if p.is_file())
        samples = await interleaved(
            {
                READ_ONLY: sync(lambda: read_only(world)),
                PARSE_ONLY: sync(lambda: read_folder(world)),
                LOAD_INDEX: fts(world),
            },
            repeats,
        )
    warm = len(loads) - repeats  # the warm-up round's figures are not kept
    loads, searches, slowest = loads[warm:], searches[warm:], slowest[warm:]
    if any(n != RESOURCES for n in counted):
        raise RuntimeError(f"the generated world holds {counted[-1]:.0f} resources, not {RESOURCES}")
    load, search = statistics.median(loads), statistics.median(searches)
    total = load + search
    met = "met" if total < FTS_GOAL_SECONDS else "missed"
    row = Row(
        key=KEY,
        title=f"goal_pursuit: resource search, {RESOURCES:,} resources",
        workload=f"a generated world of {RESOURCES:,} resources (characters and places in YAML, chapters in "
        f"Markdown, items in JSON, some in list files: {files} files, {size / 1024:.0f} KiB) on a temporary "
        "folder: read every file as text (anchor), parse them into records, and load them into a "
        f"ResourceRepository (parse and build the in-memory FTS5 index), then {QUERIES} searches (names, "
        "common words and hostile text; bench/resources.py); figure: time to read / parse / load",
        anchor=READ_ONLY,
        headline="time",
        note=f"goal: load {RESOURCES:,} resources and search them in under {FTS_GOAL_SECONDS:.0f} s: "
        f"{load:.3f} s load + {search:.5f} s mean search = {total:.3f} s, {met}",
    )
    row.sides = [
        Side(READ_ONLY, {"time": Figure.of_samples(samples[READ_ONLY], "s", 1.0)}),
        Side(PARSE_ONLY, {"time": Figure.of_samples(samples[PARSE_ONLY], "s", 1.0)}),
        Side(
            LOAD_INDEX,
            {
                "time": Figure.of_samples(loads, "s", 1.0),
                "search (mean)": Figure.of_samples(searches, "s", 1.0),
                "search (slowest)": Figure(max(slowest), "s"),
                "load + one search": Figure(total, "s"),
                "goal met": Figure(total < FTS_GOAL_SECONDS),
                "resources": Figure(RESOURCES),
            },
        ),
    ]
    return row


async def goal_pursuit_rows(workdir: Path, quick: bool) -> list[Row]:
    """Row 6's goal_pursuit rows; quick runs fewer rounds of the same workloads."""
    return [
        await overhead_row(workdir, 5 if quick else 30),
        await prompt_size_row(),
        await search_row(2 if quick else 10),
    ]
