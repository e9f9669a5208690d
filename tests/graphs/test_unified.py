"""unified: create_agent with per-turn budgets, on the same scripts and tools."""

from pathlib import Path

from langchain_core.messages import HumanMessage
from langgraph.checkpoint.memory import InMemorySaver

from phasegraph.graphs.registry import get_protocol
from phasegraph.graphs.run import stream_graph
from phasegraph.nodes.trace import MemoryTraceStore
from tests.helpers import kinds, of_type, turn, write_script


async def test_demo_script_runs_every_call_including_the_duplicate(collect):
    result = await collect("unified")
    assert [e.args for e in of_type(result, "tool_call")] == [
        {"path": "docs"},
        {"path": "docs/roadmap.md"},
        {"path": "./docs/../docs/roadmap.md"},
    ]
    assert of_type(result, "duplicate_tool_call") == []
    assert result.final.answer.startswith("The roadmap has two milestones.")
    assert kinds(result)[-1] == "final"
    assert all(e.protocol == "unified" and e.phase is None for e in result.events)
    assert [e.seq for e in result.events] == list(range(1, len(result.events) + 1))
    assert "".join(e.text for e in of_type(result, "text")).startswith(
        "Let me see what is in the docs folder."
    )
    trace_types = [t.type for t in result.trace]
    assert trace_types[0] == "tool_registration" and trace_types.count("tool_result") == 3


async def test_a_looping_script_is_stopped_by_the_tool_call_budget(collect, tmp_path: Path):
    spec = write_script(tmp_path, turn("", ("list_files", {"path": "docs"})), repeat_last=True)
    result = await collect("unified", model=spec)
    assert kinds(result) == [
        *["tool_call", "tool_result"] * 8,
        "budget_exhausted",
        "ignored_tool_call",  # the forced answer still called a tool: dropped, the turn ends
        "final",
    ]
    budget = of_type(result, "budget_exhausted")[0]
    assert (budget.budget, budget.limit, budget.used) == ("tool_calls", 8, 8)
    assert of_type(result, "ignored_tool_call")[0].reason == "tools_unbound"
    assert result.final.fallback and "list_files(path='docs') [ok]" in result.final.answer


async def test_the_model_call_budget_forces_an_answer_with_tools_unbound(collect, tmp_path: Path):
    spec = write_script(
        tmp_path,
        turn("", ("list_files", {"path": "docs"})),
        turn("", ("read_file", {"path": "docs/roadmap.md"})),
        turn("Two milestones."),
    )
    result = await collect("unified", model=spec, max_model_calls=2)
    assert kinds(result) == ["tool_call", "tool_result"] * 2 + ["budget_exhausted", "text", "final"]
    budget = of_type(result, "budget_exhausted")[0]
    assert (budget.budget, budget.limit, budget.used) == ("model_calls", 2, 2)
    assert result.final.answer == "Two milestones." and not result.final.fallback


async def test_parallel_calls_past_the_tool_budget_are_refused_unrun(collect, tmp_path: Path):
    calls = [("read_file", {"path": "docs/roadmap.md"}), ("read_file", {"path": "docs/team.md"})]
    spec = write_script(tmp_path, turn("", *calls), turn("Done."), tool_call_delivery="batched")
    result = await collect("unified", model=spec, max_tool_calls=1)
    by_path = {c.call_id: c.args["path"] for c in of_type(result, "tool_call")}
    results = {by_path[r.call_id]: r for r in of_type(result, "tool_result")}  # they finish in any order
    assert results["docs/roadmap.md"].status == "ok"
    assert "budget of 1 tool calls is spent" in results["docs/team.md"].error
    assert sorted(t.details["status"] for t in result.trace if t.type == "tool_result") == ["error", "ok"]
    assert result.final.answer == "Done."


async def test_a_turn_whose_every_tool_failed_says_so(collect, tmp_path: Path):
    spec = write_script(tmp_path, turn("", ("read_file", {"path": "missing.md"})), turn("All good."))
    result = await collect("unified", model=spec)
    assert result.final.all_tools_failed and result.final.answer == "All good."


async def test_tool_errors_reach_the_model_as_tool_messages(collect, tmp_path: Path):
    spec = write_script(tmp_path, turn("", ("read_file", {"path": "/etc/passwd"})), turn("Not allowed."))
    result = await collect("unified", model=spec)
    assert of_type(result, "tool_result")[0].status == "error"
    assert result.final.answer == "Not allowed."


async def test_call_limits_hold_when_the_driver_reinvokes_the_graph_at_every_pause(workspace, tmp_path: Path):
    """The server re-invokes the graph with ``None`` after each tool pause; budgets count per user turn."""
    protocol = get_protocol("unified")
    graph = protocol.compile(InMemorySaver(), pausable=True)
    script = write_script(tmp_path, turn("", ("list_files", {"path": "docs"})), repeat_last=True)
    context = protocol.make_context(model=script, workspace=str(workspace))
    config = {"configurable": {"thread_id": "loop"}}
    events: list = []
    graph_input: object = {"messages": [HumanMessage("List the docs forever")]}
    for _segment in range(30):  # far more segments than the budget allows tool calls
        async for event in stream_graph(
            protocol, graph, graph_input, context, config, traces=MemoryTraceStore(), seq_start=len(events)
        ):
            events.append(event)
        if events and events[-1].type in ("final", "error"):
            break
        graph_input = None
    assert [e.type for e in events].count("tool_result") == 8
    assert events[-1].type == "final"


async def test_an_exhausted_script_ends_with_exactly_one_error_event(collect, tmp_path: Path):
    spec = write_script(tmp_path, turn("", ("list_files", {"path": "docs"})))
    result = await collect("unified", model=spec)
    assert result.final is None
    assert kinds(result) == ["tool_call", "tool_result", "error"]
    assert result.error.kind == "script" and "script.json has no turn 2" in result.error.message
