"""``approval_answered`` is emitted once per answer, however often the node re-runs to reach the next one.

LangGraph re-runs a node from its start at every resume, and each ``interrupt`` it passed again returns its
earlier answer: a node asking about two calls must not announce the first answer twice.
"""

from pathlib import Path

import pytest
from langchain_core.messages import HumanMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from phasegraph.graphs.registry import get_protocol
from phasegraph.graphs.run import stream_graph
from tests.tool_projects import write_project, write_script

CALLS = [
    {"id": "call_a", "name": "shout", "args": {"text": "one"}},
    {"id": "call_b", "name": "shout", "args": {"text": "two"}},
]


@pytest.fixture
def project(tmp_path: Path) -> str:
    script = write_script(tmp_path, [{"content": "", "tool_calls": CALLS}, {"content": "Done."}])
    return str(
        write_project(
            tmp_path,
            {
                "model": f"scripted:{script}",
                "python_tools": {"mine": "tests.user_tools:TOOLS"},
                "tools": {"shout": {"confirm": True}},
            },
        )
    )


@pytest.mark.parametrize("by_id", [False, True], ids=["plain resume", "resume by interrupt id"])
async def test_each_answer_is_announced_once(project: str, by_id: bool) -> None:
    spec = get_protocol("unified")
    graph = spec.compile(InMemorySaver())
    thread = {"configurable": {"thread_id": "t"}}
    graph_input: object = {"messages": [HumanMessage("Shout twice.")]}
    answered: list[str] = []
    for _ in range(3):  # the turn, then one resume per question
        context = spec.make_context(project_file=project)
        async for event in stream_graph(spec, graph, graph_input, context, thread):
            if event.type == "approval_answered":
                answered.append(event.call_id)
        waiting = (await graph.aget_state(thread)).interrupts
        if not waiting:
            break
        graph_input = Command(resume={waiting[0].id: "approve"} if by_id else "approve")
    assert len(answered) == 2 and len(set(answered)) == 2, answered  # each call once
    state = await graph.aget_state(thread)
    assert state.values["messages"][-1].content == "Done."


async def test_the_question_is_also_langchains_human_in_the_loop_request(project: str) -> None:
    """Agent Chat UI draws approve / edit / reject from ``action_requests`` and ``review_configs``."""
    spec = get_protocol("unified")
    graph = spec.compile(InMemorySaver())
    thread = {"configurable": {"thread_id": "hitl"}}
    context = spec.make_context(project_file=project)
    [_ async for _ in stream_graph(spec, graph, {"messages": [HumanMessage("Shout.")]}, context, thread)]
    value = (await graph.aget_state(thread)).interrupts[0].value
    assert value["action_requests"] == [
        {"name": "shout", "args": {"text": "one"}, "description": value["reason"]}
    ]
    assert value["review_configs"] == [
        {"action_name": "shout", "allowed_decisions": ["approve", "edit", "reject"]}
    ]
