"""Row 8, observability: what tracing and metrics cost a run, off against on.

The same scripted runs (the ``triggered_phase`` demo turn, and the ``goal_pursuit`` demo pursuit, a graph
of many nodes) with phasegraph's telemetry in five states, switched through its public functions
(``use_exporter``, ``use_metric_reader``) before each timed run:

- **off** (the anchor): no tracer provider, so every span is non-recording, and ``OTEL_SDK_DISABLED=true``
  when the meter provider is made, so every instrument is a no-op. The span handler is still among the
  run's callbacks (``stream_graph`` always adds it); it opens non-recording spans.
- **default** (``PHASEGRAPH_OTEL_EXPORTER=none``, what a process runs unless told otherwise): spans not
  recorded, metrics recorded for ``GET /metrics`` (the Prometheus reader, read only at a scrape).
- **on** (what ``PHASEGRAPH_OTEL_EXPORTER=otlp`` installs): spans recorded and sent by a
  ``BatchSpanProcessor`` through the OTLP/HTTP exporter, metrics through the Prometheus reader and an
  OTLP/HTTP periodic reader, to a loopback collector in a process of its own (``bench.otlp_sink``).
- **on, with content**: the same with ``PHASEGRAPH_OTEL_CAPTURE_CONTENT=true`` (prompts, answers, tool
  arguments and results on the spans, masked of secrets).
- **spans only**: spans as in *on*, metrics off as in *off*, so *on* splits into what spans and metrics cost.

Each switch makes new providers (the old ones are shut down, which exports what they held), then runs one
untimed run, so the metric series exist, as in a process that has served runs before; then the timed run,
and the timed export of its spans (``force_flush`` of the tracer provider: the batch encoded and posted,
one loopback round trip). The headline is the run plus that export, all the work a run's telemetry costs,
with one POST per run: an upper bound, since a ``BatchSpanProcessor`` posts every 5 s, or as soon as 512
spans wait, so a busy process shares each POST among many runs. The run alone is shown beside it. One
metrics export (a collection of every series and its POST, which an operator's process does once per export
interval, 60 s by default, however many runs it served) and one Prometheus scrape are timed after the run.
The exporters are kept across switches, so their connection to the collector stays open as in a
long-running process. ``python -m bench.observability`` loops one state's runs for a profiler.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from langchain_core.messages import HumanMessage
from langchain_core.runnables import RunnableConfig
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader
from opentelemetry.sdk.trace import TracerProvider
from prometheus_client import generate_latest

from bench.goal_pursuit import DEMO_EXECUTIONS, GOAL, demo_calls
from bench.harness import Figure, Row, Side
from bench.otlp_sink import KeptMetrics, KeptSpans, Sink
from phasegraph.graphs.registry import get_protocol
from phasegraph.graphs.run import stream_graph
from phasegraph.nodes import telemetry
from phasegraph.nodes.events import Event
from phasegraph.nodes.models import DEMO_WORKSPACE
from phasegraph.nodes.settings import run_settings
from phasegraph.nodes.telemetry import metrics
from phasegraph.nodes.trace import MemoryTraceStore
from phasegraph.tools.resources import ResourceRepository, load_bundled

KEY = "8"
GOAL_RATIO = 1.1
OFF, DEFAULT = "off (no tracer provider, OTEL_SDK_DISABLED metrics)", "default (metrics for /metrics only)"
ON, CONTENT = "on (spans + metrics by OTLP/HTTP)", "on, PHASEGRAPH_OTEL_CAPTURE_CONTENT=true"
SPANS_ONLY = "spans only (OTLP/HTTP; OTEL_SDK_DISABLED metrics)"
HEADLINE, RUN_ALONE = "run + span export", "run alone"
CAPTURE = "PHASEGRAPH_OTEL_CAPTURE_CONTENT"
#: The periodic reader's interval: longer than a switch, so metrics leave only when the bench flushes them.
METRIC_INTERVAL_MS = 60_000
#: ``python -m bench.observability --state``: the states by a short name.
STATES = {"off": OFF, "default": DEFAULT, "spans": SPANS_ONLY, "on": ON, "content": CONTENT}
TRIGGERED_MESSAGE = "Summarise the roadmap in the docs folder."


@dataclass
class Mode:
    """One state of telemetry: what ``enter`` installs, and the providers it made."""

    name: str
    spans: bool
    metrics: str  # "off", "prometheus" or "otlp"
    content: bool = False
    tracing: TracerProvider | None = None
    meters: MeterProvider | None = None

    def enter(self, sink: Sink) -> None:
        """Install this state's providers (the previous ones are shut down, exporting what they held)."""
        kept = os.environ.pop("OTEL_SDK_DISABLED", None)
        self.tracing = telemetry.use_exporter(KeptSpans(sink.spans) if self.spans else None, batch=True)
        if self.metrics == "off":
            os.environ["OTEL_SDK_DISABLED"] = "true"  # read when the meter provider is made (only it)
        try:
            reader = None
            if self.metrics == "otlp":
                reader = PeriodicExportingMetricReader(KeptMetrics(sink.metrics), METRIC_INTERVAL_MS)
            self.meters = telemetry.use_metric_reader(reader)
        finally:
            os.environ.pop("OTEL_SDK_DISABLED", None)
            if kept is not None:
                os.environ["OTEL_SDK_DISABLED"] = kept
        metrics.instruments()  # made now, not in the timed run
        if self.content:
            os.environ[CAPTURE] = "true"
        else:
            os.environ.pop(CAPTURE, None)
        run_settings.cache_clear()

    def flush_spans(self) -> None:
        """Export every span ended so far (nothing to do when spans are not recorded)."""
        if self.tracing is not None:
            self.tracing.force_flush()


@dataclass
class Workload:
    """One protocol's scripted run, checked to have done its whole work, its root span ended."""

    protocol: str
    message: str
    fields: Callable[[], dict[str, Any]]
    check: Callable[[list[Event]], bool]
    traces: MemoryTraceStore = field(default_factory=MemoryTraceStore)

    def __post_init__(self) -> None:
        self.spec = get_protocol(self.protocol)
        self.graph = self.spec.compile(None)

    async def run(self, recorded: bool) -> None:
        """One run, closed as the server closes it (the root span ends, the run's metrics are recorded)."""
        context = self.spec.make_context(workspace=str(DEMO_WORKSPACE), **self.fields())
        config: RunnableConfig = {"configurable": {"thread_id": f"bench-{context.request_id}"}}
        inputs = {"messages": [HumanMessage(self.message)]}
        try:
            events = [
                e
                async for e in stream_graph(
                    self.spec, self.graph, inputs, context, config, traces=self.traces
                )
            ]
        finally:
            await context.aclose()
        if not self.check(events):
            raise RuntimeError(f"{self.protocol} did not run its workload: {[e.type for e in events]}")
        if bool(context.run_trace().trace_id) != recorded:
            raise RuntimeError(f"{self.protocol}: spans {'not ' if recorded else ''}recorded, unexpectedly")


def triggered_demo() -> Workload:
    """The bundled triggered_phase demo turn: two tool cycles, a refused duplicate, the answer."""

    def check(events: list[Event]) -> bool:
        types = [e.type for e in events]
        return types.count("tool_result") == 2 and types[-1] == "final"

    return Workload("triggered_phase", TRIGGERED_MESSAGE, lambda: {"model": "scripted:demo"}, check)


def pursuit_demo(runs: int) -> Workload:
    """The bundled goal_pursuit demo pursuit, each run on a fresh copy of the story world loaded now."""
    worlds: list[ResourceRepository] = [load_bundled() for _ in range(runs)]

    def fields() -> dict[str, Any]:
        return {"model": "scripted:demo", "resource_repository": worlds.pop() if worlds else load_bundled()}

    def check(events: list[Event]) -> bool:
        types = [e.type for e in events]
        phases = [getattr(e, "phase", None) for e in events if e.type == "phase_start"]
        llm_phases = len([p for p in phases if p != "execution"])
        return (
            types.count("tool_result") == DEMO_EXECUTIONS
            and types[-1] == "final"
            and (llm_phases == demo_calls())
        )

    return Workload("goal_pursuit", GOAL, fields, check)


def modes() -> list[Mode]:
    """The states, the anchor first."""
    return [
        Mode(OFF, spans=False, metrics="off"),
        Mode(DEFAULT, spans=False, metrics="prometheus"),
        Mode(SPANS_ONLY, spans=True, metrics="off"),
        Mode(ON, spans=True, metrics="otlp"),
        Mode(CONTENT, spans=True, metrics="otlp", content=True),
    ]


async def measure(
    workload: Workload, sink: Sink, repeats: int, warmup: int = 1
) -> dict[str, dict[str, list[float]]]:
    """Each mode ``repeats`` times, the order rotating each round; seconds per figure."""
    chosen = modes()
    samples: dict[str, dict[str, list[float]]] = {m.name: {} for m in chosen}
    for round_ in range(warmup + repeats):
        shift = round_ % len(chosen)
        for mode in chosen[shift:] + chosen[:shift]:
            mode.enter(sink)
            await workload.run(mode.spans)  # untimed: first recordings, series made
            mode.flush_spans()
            started = time.perf_counter()
            await workload.run(mode.spans)
            ran = time.perf_counter()
            mode.flush_spans()
            exported = time.perf_counter()
            timed = {RUN_ALONE: ran - started, HEADLINE: exported - started, "span export": exported - ran}
            timed.update(_side_costs(mode))
            if round_ >= warmup:
                for name, seconds in timed.items():
                    samples[mode.name].setdefault(name, []).append(seconds)
    return samples


def _side_costs(mode: Mode) -> dict[str, float]:
    """One metrics export and one Prometheus scrape, where the mode has them."""
    costs: dict[str, float] = {}
    if mode.metrics == "otlp" and mode.meters is not None:
        started = time.perf_counter()
        mode.meters.force_flush()
        costs["metrics export"] = time.perf_counter() - started
    if mode.metrics != "off":
        started = time.perf_counter()
        generate_latest(telemetry.prometheus_registry())
        costs["Prometheus scrape"] = time.perf_counter() - started
    return costs


async def observability_rows(quick: bool) -> list[Row]:
    """Row 8: the triggered_phase demo turn and the goal_pursuit demo pursuit, telemetry off and on."""
    repeats = {"triggered_phase": 2 if quick else 80, "goal_pursuit": 1 if quick else 40}
    # every round, every mode: an untimed run and a timed one
    runs = {protocol: (count + 1) * len(modes()) * 2 for protocol, count in repeats.items()}
    kept = os.environ.get(CAPTURE)
    sink = Sink()
    rows = []
    try:
        for workload in (triggered_demo(), pursuit_demo(runs["goal_pursuit"])):
            before = sink.stats()
            samples = await measure(workload, sink, repeats[workload.protocol])
            _settle()  # the last providers shut down: everything they held is exported
            after = sink.stats()
            received = Received(
                after["batches"][len(before["batches"]) :], after["data_points"] - before["data_points"]
            )
            rows.append(_row(workload, samples, received, runs[workload.protocol]))
    finally:
        _settle()
        if kept is not None:
            os.environ[CAPTURE] = kept
        run_settings.cache_clear()
        sink.close()
    return rows


def _settle() -> None:
    """Back to the default state: no tracer provider, metrics for ``/metrics`` only."""
    os.environ.pop(CAPTURE, None)
    run_settings.cache_clear()
    telemetry.use_exporter(None)
    telemetry.use_metric_reader()


WORKLOADS = {
    "triggered_phase": "the bundled triggered_phase demo turn (two tool cycles, a refused "
    "duplicate, the answer)",
    "goal_pursuit": "the bundled goal_pursuit demo pursuit (15 LLM phases, each one structured answer, two "
    "executions; a fresh copy of the story world per run, loaded before timing)",
}


@dataclass
class Received:
    """What the collector got during one workload: spans per traces request, and metric data points."""

    batches: list[int]
    data_points: int

    def spans_per_run(self, runs: int) -> int:
        """The spans of each of ``runs`` runs; raises unless every run's spans and some metrics arrived.

        Each run's spans leave in one request (the bench flushes after every run), unless the processor's
        own 5 s timer splits one: the most common size is a run's, and the total must be ``runs`` of it.
        """
        per_run = Counter(self.batches).most_common(1)[0][0] if self.batches else 0
        if not per_run or sum(self.batches) != per_run * runs or not self.data_points:
            raise RuntimeError(
                f"the collector did not get every run's spans and metrics: {self} ({runs} runs)"
            )
        return per_run


def _row(workload: Workload, samples: dict[str, dict[str, list[float]]], received: Received,
         runs: int) -> Row:  # fmt: skip
    protocol = workload.protocol
    row = Row(
        KEY,
        f"observability: {protocol}, telemetry off vs on",
        f"{WORKLOADS[protocol]}; scripted model at zero delay, graph compiled once, no checkpointer, the run "
        "closed as the server closes it. Telemetry switched before each timed run (new providers, then one "
        "untimed run); figure: the run and the export of its spans (the tracer provider flushed: encoded and "
        "posted to a loopback OTLP/HTTP collector in its own process)",
        anchor=OFF,
        headline=HEADLINE,
    )
    for name, figures in samples.items():
        side = Side(name, {k: Figure.of_samples(v) for k, v in figures.items()})
        row.sides.append(side)
    anchor_alone = float(row.side(OFF).figures[RUN_ALONE].value)
    for side in row.sides[1:]:
        side.figures["x anchor, run alone"] = Figure(
            round(float(side.figures[RUN_ALONE].value) / anchor_alone, 3)
        )
    on = row.side(ON)
    on.figures["spans per run"] = Figure(
        received.spans_per_run(runs * sum(m.spans for m in modes()) // len(modes()))
    )
    ratio = row.ratio(on)
    assert ratio is not None
    on.figures["goal met"] = Figure(ratio <= GOAL_RATIO)
    alone = float(on.figures["x anchor, run alone"].value)
    row.note = (
        f"goal: on <= {GOAL_RATIO}x off per run: {ratio:.2f}x with its span export, {alone:.2f}x the run "
        f"alone, {'met' if ratio <= GOAL_RATIO else 'missed'}"
    )
    return row


async def loop(state: str, protocol: str, runs: int) -> None:
    """``runs`` runs of one workload in one telemetry state, each run's spans exported after it."""
    mode = next(m for m in modes() if m.name == STATES[state])
    sink = Sink()
    try:
        mode.enter(sink)
        workload = triggered_demo() if protocol == "triggered_phase" else pursuit_demo(runs)
        for _ in range(runs):
            await workload.run(mode.spans)
            mode.flush_spans()
    finally:
        _settle()
        sink.close()


def main() -> None:
    """``python -m bench.observability``: the row's runs in a loop, for a profiler to watch."""
    parser = argparse.ArgumentParser(prog="python -m bench.observability", description=main.__doc__)
    parser.add_argument("--state", choices=sorted(STATES), default="on")
    parser.add_argument("--protocol", choices=["triggered_phase", "goal_pursuit"], default="triggered_phase")
    parser.add_argument("--runs", type=int, default=300)
    args = parser.parse_args()
    asyncio.run(loop(args.state, args.protocol, args.runs))


if __name__ == "__main__":
    main()
