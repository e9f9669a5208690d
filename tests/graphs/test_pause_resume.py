"""Pause at the natural pause point (after a tool phase) with a checkpointer, then resume."""

import asyncio
from pathlib import Path

from langchain_core.messages import HumanMessage
from langgraph.checkpoint.memory import InMemorySaver

from phasegraph.graphs.registry import get_protocol
from phasegraph.graphs.run import stream_graph, stream_run
from phasegraph.graphs.triggered_phase import build_graph
from phasegraph.nodes.trace import MemoryTraceStore
from phasegraph.nodes.triggered_phase.context import TriggeredPhaseContext
from tests.helpers import turn, write_script


async def _drain(*args, **kwargs):
    return [e async for e in stream_graph(*args, **kwargs)]


async def test_pause_after_each_tool_phase_and_resume_to_the_same_answer(workspace: Path, tmp_path: Path):
    spec = get_protocol("triggered_phase")
    graph = build_graph().compile(checkpointer=InMemorySaver(), interrupt_after=["tool_phase"])
    context = TriggeredPhaseContext(workspace=str(workspace))
    config = {"configurable": {"thread_id": "t-1"}}
    traces = MemoryTraceStore()
    inputs = {"messages": [HumanMessage("Summarise the roadmap")]}

    segments = [await _drain(spec, graph, inputs, context, config, traces=traces)]
    while segments[-1][-1].type != "final":
        assert graph.get_state(config).next == ("action_phase",)
        assert segments[-1][-1].type == "phase_end" and segments[-1][-1].phase == "tool_phase"
        last_seq = segments[-1][-1].seq
        segments.append(await _drain(spec, graph, None, context, config, traces=traces, seq_start=last_seq))
        assert len(segments) < 5

    assert len(segments) == 3  # the demo has two tool phases
    events = [e for seg in segments for e in seg]
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    assert [e.name for e in events if e.type == "tool_call"] == ["list_files", "read_file"]
    assert events[-1].answer.startswith("The roadmap has two milestones.")
    trace_calls = [t for t in traces.get(context.request_id) if t.type == "tool_call"]
    assert len(trace_calls) == 2  # resuming never re-ran a finished tool


async def test_a_new_turn_on_the_same_thread_resets_budgets(workspace: Path, tmp_path: Path):
    spec = write_script(
        tmp_path, turn("", ("list_files", {"path": "docs"})), turn("Two docs."), repeat_last=False
    )
    saver = InMemorySaver()
    kwargs = {"checkpointer": saver, "thread_id": "conversation", "workspace": str(workspace), "model": spec}
    first = [e async for e in stream_run("triggered_phase", "What is there?", **kwargs)]
    second = [e async for e in stream_run("triggered_phase", "And again?", **kwargs)]
    for events in (first, second):
        assert [e.type for e in events if e.type in ("tool_call", "duplicate_tool_call")] == ["tool_call"]
        assert events[-1].type == "final" and events[-1].answer == "Two docs."
    state = (
        get_protocol("triggered_phase")
        .compile(saver)
        .get_state({"configurable": {"thread_id": "conversation"}})
    )
    turn_types = ["human", "ai", "tool", "ai"]  # the question, the call, how it ended, the answer
    assert [m.type for m in state.values["messages"]] == turn_types * 2


async def test_concurrent_runs_never_share_a_script_position(workspace: Path, tmp_path: Path):
    spec = write_script(
        tmp_path,
        turn("Listing.", ("list_files", {"path": "docs"})),
        turn("Reading.", ("read_file", {"path": "docs/team.md"})),
        turn("Three people."),
        chunk_delay_ms=2,
    )

    async def one() -> list:
        return [e async for e in stream_run("triggered_phase", "Who?", workspace=str(workspace), model=spec)]

    runs = await asyncio.gather(*(one() for _ in range(3)))
    for events in runs:
        assert [e.name for e in events if e.type == "tool_call"] == ["list_files", "read_file"]
        assert events[-1].type == "final" and events[-1].answer == "Three people."
    assert len({events[0].request_id for events in runs}) == 3
