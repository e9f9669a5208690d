"""Under triggered_phase a judged call is a repeat from then on: the one proposed, and the one an edit ran."""

from pathlib import Path

from langchain_core.messages import HumanMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from phasegraph.graphs.registry import get_protocol
from phasegraph.graphs.run import stream_graph
from tests.tool_projects import write_project, write_script


async def test_the_edited_call_proposed_again_is_a_duplicate(tmp_path: Path) -> None:
    turns = [
        {"content": "", "tool_calls": [{"name": "shout", "args": {"text": "one"}}]},
        {"content": "", "tool_calls": [{"name": "shout", "args": {"text": "two"}}]},  # what the edit ran
        {"content": "Done."},
    ]
    project = write_project(tmp_path, {
        "model": f"scripted:{write_script(tmp_path, turns)}",
        "python_tools": {"mine": "tests.user_tools:TOOLS"},
        "tools": {"shout": {"confirm": True}},
    })  # fmt: skip
    spec = get_protocol("triggered_phase")
    graph = spec.compile(InMemorySaver())
    thread = {"configurable": {"thread_id": "t"}}
    kinds: list[str] = []
    answers = [
        {"messages": [HumanMessage("Shout.")]},
        Command(resume={"decision": "edit", "args": {"text": "two"}}),
    ]
    for graph_input in answers:
        context = spec.make_context(project_file=str(project), show_tool_outputs=True)
        kinds += [e.type async for e in stream_graph(spec, graph, graph_input, context, thread)]
    state = await graph.aget_state(thread)
    assert not state.interrupts, "the repeat of the edited call must not be asked about again"
    assert kinds.count("tool_result") == 1 and kinds.count("duplicate_tool_call") == 1, kinds
    assert state.values["answer"] == "Done."
