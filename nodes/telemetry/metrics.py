"""phasegraph's metrics, through the OpenTelemetry metrics API.

Runs started and ended (by protocol and outcome), run and phase durations, tool calls that ran (by tool
and status; a call refused unrun, a person's rejection included, is none) and their durations, refused
duplicate calls, budget stops (by budget), model tokens (the GenAI ``gen_ai.client.token.usage``
histogram) and cost, model call durations, active event streams and the event log's write latency.
Counts of the run's own events are read from its typed events (``observe``), so every protocol is counted
the same way.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from opentelemetry.metrics import Counter, Histogram, Meter, MeterProvider, UpDownCounter

from phasegraph.nodes.events import BudgetExhaustedEvent, DuplicateToolCall, Event, ToolResultEvent
from phasegraph.nodes.telemetry import setup

if TYPE_CHECKING:
    from phasegraph.nodes.telemetry.shared import SharedMeter

#: Buckets (seconds) for runs, phases, model and tool calls: from 5 ms to 10 minutes.
SECONDS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600)
#: Buckets for token counts per call (the GenAI conventions' advice).
TOKENS = (1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576)


@dataclass(frozen=True)
class Instruments:
    """The instruments of one meter provider."""

    runs_started: Counter
    runs_ended: Counter
    run_duration: Histogram
    phase_duration: Histogram
    tool_calls: Counter
    tool_duration: Histogram
    duplicates: Counter
    budget_stops: Counter
    tokens: Histogram
    cost: Counter
    model_duration: Histogram
    streams: UpDownCounter
    log_writes: Histogram

    @classmethod
    def make(cls) -> Instruments:
        """Create every instrument on phasegraph's meter (writing the server's shared files too, if any)."""
        meter = setup.meter()
        m: Meter | SharedMeter = meter
        if setup.shared_folder():
            from phasegraph.nodes.telemetry import shared

            m = shared.SharedMeter(meter)

        def seconds(name: str, description: str) -> Histogram:
            return m.create_histogram(name, "s", description, explicit_bucket_boundaries_advisory=SECONDS)

        return cls(
            runs_started=m.create_counter(
                "phasegraph.runs.started", "{run}", "Runs started (resumed: again)."
            ),
            runs_ended=m.create_counter("phasegraph.runs.ended", "{run}", "Runs ended, paused or stopped."),
            run_duration=seconds("phasegraph.run.duration", "Time from a run's start to its end or pause."),
            phase_duration=seconds("phasegraph.phase.duration", "Time a node of a protocol's graph ran."),
            tool_calls=m.create_counter("phasegraph.tool.calls", "{call}", "Tool calls that ran."),
            tool_duration=seconds("phasegraph.tool.duration", "Time a tool call took."),
            duplicates=m.create_counter(
                "phasegraph.tool.duplicates_refused", "{call}", "Calls refused as repeats of one that ran."
            ),
            budget_stops=m.create_counter("phasegraph.budget.stops", "{run}", "Runs a hard budget ended."),
            tokens=m.create_histogram(
                "gen_ai.client.token.usage",
                "{token}",
                "Tokens per model call, by type.",
                explicit_bucket_boundaries_advisory=TOKENS,
            ),
            cost=m.create_counter("phasegraph.model.cost", "usd", "What model calls cost (the price table)."),
            model_duration=seconds("gen_ai.client.operation.duration", "Time a model call took."),
            streams=m.create_up_down_counter(
                "phasegraph.streams.active", "{stream}", "Event streams open to clients."
            ),
            log_writes=seconds(
                "phasegraph.eventlog.write.duration", "Time one batched event-log write took."
            ),
        )


_made: tuple[MeterProvider | None, Instruments] | None = None
#: Tool names a process labels its metrics with. A model may call tools that do not exist, under any
#: name: past this many names (or a name no tool could have), calls count under ``_other``, so a
#: long-lived server's series stay bounded.
MAX_TOOL_LABELS = 256
_TOOL_NAME = re.compile(r"[A-Za-z0-9_.:-]{1,128}")
_tool_labels: set[str] = set()


def tool_label(name: str) -> str:
    """The ``gen_ai.tool.name`` a call is counted under (its name, or ``_other``)."""
    if name in _tool_labels:
        return name
    if len(_tool_labels) >= MAX_TOOL_LABELS or not _TOOL_NAME.fullmatch(name):
        return "_other"
    _tool_labels.add(name)
    return name


def instruments() -> Instruments:
    """The instruments of the current meter provider (made again when a test installs another)."""
    global _made
    provider = setup.current_meter_provider()
    if _made is None or _made[0] is not provider:
        made = Instruments.make()
        _made = (setup.current_meter_provider(), made)
    return _made[1]


def observe(event: Event) -> None:
    """Count what a run's event says: a tool call's outcome, a refused duplicate, a budget stop."""
    protocol = {"phasegraph.protocol": event.protocol}
    if isinstance(event, ToolResultEvent) and event.not_run is None:  # only calls that ran are tool calls
        attributes = {
            **protocol,
            "gen_ai.tool.name": tool_label(event.name),
            "phasegraph.status": event.status,
        }
        instruments().tool_calls.add(1, attributes)
        instruments().tool_duration.record(event.duration_ms / 1000, attributes)
    elif isinstance(event, DuplicateToolCall):
        instruments().duplicates.add(1, {**protocol, "gen_ai.tool.name": tool_label(event.name)})
    elif isinstance(event, BudgetExhaustedEvent):
        instruments().budget_stops.add(1, {**protocol, "phasegraph.budget": event.budget})


def model_call(protocol: str, model: dict[str, Any], input_tokens: int, output_tokens: int, cost: float,
               seconds: float) -> None:  # fmt: skip
    """Record one model call: its tokens by type, its cost and its duration."""
    attributes = {"phasegraph.protocol": protocol, "gen_ai.operation.name": "chat", **model}
    tools = instruments()
    tools.model_duration.record(seconds, attributes)
    if input_tokens or output_tokens:
        tools.tokens.record(input_tokens, {**attributes, "gen_ai.token.type": "input"})
        tools.tokens.record(output_tokens, {**attributes, "gen_ai.token.type": "output"})
    if cost:
        tools.cost.add(cost, attributes)
