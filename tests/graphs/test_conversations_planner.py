"""The planner holds a conversation: later messages continue the thread, each turn with fresh budgets."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any, TypedDict

import pytest
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.types import interrupt

from phasegraph.graphs.registry import get_protocol
from phasegraph.graphs.run import RunResult, run
from phasegraph.nodes.approval import AwaitingAnswer
from phasegraph.nodes.trace import MemoryTraceStore
from phasegraph.tools.planning import LedgerFilter, open_planning
from tests.graphs.chat_shape import HIDDEN, calls_answered, check_shape, shape, thread_messages, turns
from tests.helpers import kinds, of_type, scripted, turn

MESSAGES = ["Set up the Spring Launch project", "What tasks does it have?", "Add a press kit task", "Health?"]


@pytest.fixture
def database(tmp_path: Path) -> str:
    return f"sqlite:{tmp_path / 'planner.db'}"


async def say(message: str, saver: InMemorySaver, database: str, **fields: Any) -> RunResult:
    fields.setdefault("model", "scripted:demo")
    return await run(
        "planner", message, checkpointer=saver, thread_id="t", database=database,
        traces=MemoryTraceStore(), **fields,
    )  # fmt: skip


async def test_the_demo_answers_four_messages_each_with_its_own_tool_budget(database):
    saver = InMemorySaver()
    # the first turn makes 2 tool calls (its plan's steps aside), each later one 1: 5 in all, 2 per turn
    results = [await say(m, saver, database, max_tool_calls=2) for m in MESSAGES]
    for result in results:
        assert result.error is None and result.final is not None and not result.final.fallback
        assert "budget_exhausted" not in kinds(result)
    assert "Spring Launch" in results[1].final.answer and "press kit" in results[2].final.answer
    messages = await thread_messages("planner", saver)
    check_shape(messages, shown=False)
    assert [shape(t) for t in turns(messages)] == [
        ["human", "ai[list_templates]", "tool:list_templates:success", "ai[agent_create_plan]",
         "tool:agent_create_plan:success",
         "ai[list_templates,create_project,publish_context_document]",
         "tool:list_templates:success", "tool:create_project:success",
         "tool:publish_context_document:success", "ai"],
        ["human", "ai[list_tasks]", "tool:list_tasks:success", "ai"],
        ["human", "ai[create_task]", "tool:create_task:success", "ai"],
        ["human", "ai[audit_project]", "tool:audit_project:success", "ai"],
    ]  # fmt: skip
    assert [m.text for m in messages if isinstance(m, HumanMessage)] == MESSAGES
    answers = [m.text for m in messages if isinstance(m, AIMessage) and not m.tool_calls]
    assert answers == [r.final.answer for r in results]
    # usage rows are counted across the thread: every model call of every turn has its own index
    store = open_planning(database)
    try:
        rows = (await store.ledger.usage(LedgerFilter())).rows
    finally:
        await store.close()
    assert sorted(r.call_index for r in rows) == list(range(4 + 2 + 2 + 2))


async def test_tool_outputs_are_in_the_thread_only_when_shown(database):
    saver = InMemorySaver()
    for message in MESSAGES[:2]:
        await say(message, saver, database, show_tool_outputs=True)
    answers = check_shape(await thread_messages("planner", saver), shown=True)
    listed = next(a for a in answers if a.name == "list_tasks")
    assert json.loads(listed.text)["tasks"][0]["title"] == "Write the positioning statement"
    plan = next(a for a in answers if a.name == "agent_create_plan")
    assert json.loads(plan.text)["status"] == "completed"  # the summary the planner read


async def test_the_model_reads_every_earlier_result_in_full_and_no_plan_step_twice(database):
    saver = InMemorySaver()
    steps = [
        {"id": "s1", "tool": "list_templates", "args": {}, "rationale": "", "depends_on": []},
        {"id": "s2", "tool": "create_project", "args": {"name": "Orbit", "template_id": "product-launch"},
         "rationale": "", "depends_on": []},
    ]  # fmt: skip
    model = scripted(
        turn("Looking. ", ("list_templates", {"query": "launch"})),
        turn("", ("agent_create_plan", {"objective": "Set up Orbit"})),
        turn("", ("PlanDraft", {"reasoning": "in order", "steps": steps})),
        turn("Orbit is set up."),
        turn("", ("list_tasks", {"project_id": "orbit"})),
        turn("Five tasks."),
    )
    await say("Set up Orbit", saver, database, model=None, chat_model=model)
    second = await say("Which tasks?", saver, database, model=None, chat_model=model)
    assert second.final.answer == "Five tasks."
    last = model.prompts[-1]
    assert calls_answered(last) and not any(m.name == "plan_executor" for m in last)
    results = {m.tool_call_id: m.text for m in last if isinstance(m, ToolMessage)}
    assert HIDDEN not in "".join(results.values())
    assert json.loads(results["call_1_1"])["templates"][0]["template_id"] == "product-launch"
    assert json.loads(results["call_2_1"])["status"] == "completed"
    assert json.loads(results["call_5_1"])["tasks"][0]["project_id"] == "orbit"
    assert [m.text for m in last if isinstance(m, HumanMessage)] == ["Set up Orbit", "Which tasks?"]
    # the thread shows the executor's calls; a step's call id is unique in the thread
    messages = await thread_messages("planner", saver)
    check_shape(messages, shown=False)
    [executed] = [m for m in messages if isinstance(m, AIMessage) and m.name == "plan_executor"]
    assert [c["name"] for c in executed.tool_calls] == ["list_templates", "create_project"]


async def test_a_follow_up_after_an_answered_approval_continues_the_thread(database, tmp_path):
    store = open_planning(database)
    await store.ensure_schema()
    await store.domain.create_project("default", "Orbit", "product-launch")
    await store.close()
    script = tmp_path / "script.json"
    script.write_text(json.dumps({
        "turns": [turn("Archiving waits for your approval. ", ("archive_project", {})), turn("Archived.")],
        "follow_ups": [[turn("", ("list_projects", {"status": "archived"})), turn("Orbit is archived.")]],
    }))  # fmt: skip
    saver = InMemorySaver()
    fields = {"model": f"scripted:{script}", "context_type": "project", "entity_id": "orbit"}
    first = await say("Archive Orbit", saver, database, **fields)
    assert first.final is None and kinds(first)[-1] == "approval_requested"
    with pytest.raises(AwaitingAnswer):  # a message is no answer
        await say("approve", saver, database, **fields)
    second = await say("", saver, database, resume="approve", **fields)  # the interrupt's answer
    assert second.final is not None and second.final.answer == "Archived." and second.error is None
    third = await say("Is it archived?", saver, database, **fields)
    assert third.final is not None and third.final.answer == "Orbit is archived."
    messages = await thread_messages("planner", saver)
    check_shape(messages, shown=False)
    assert [shape(t) for t in turns(messages)] == [
        ["human", "ai[archive_project]", "tool:archive_project:success", "ai"],
        ["human", "ai[list_projects]", "tool:list_projects:success", "ai"],
    ]
    assert [m.text for m in messages if isinstance(m, HumanMessage)] == ["Archive Orbit", "Is it archived?"]


class _OldPlannerState(TypedDict):
    """The keys a thread checkpointed before approvals held while it waited for the user's yes."""

    messages: Annotated[list[AnyMessage], add_messages]
    turn: int
    answer: str
    pending_confirmation: dict[str, Any] | None
    confirmed: list[str]


async def test_a_thread_that_waited_for_a_yes_before_approvals_goes_on(database):
    store = open_planning(database)
    await store.ensure_schema()
    await store.domain.create_project("default", "Orbit", "product-launch")
    saver, config = InMemorySaver(), {"configurable": {"thread_id": "t"}}
    old = StateGraph(_OldPlannerState)
    question = "archive_project is destructive. Shall I go ahead? Answer yes or no."
    waiting = {"id": "c1", "name": "archive_project", "args": {}, "signature": "s"}
    asked = {"messages": [AIMessage(question)], "answer": question, "turn": 1,
             "pending_confirmation": waiting, "confirmed": []}  # fmt: skip
    old.add_node("ask_confirmation", lambda _: asked)
    old.add_node(
        "await_confirmation", lambda s: {"messages": [HumanMessage(interrupt({"question": s["answer"]}))]}
    )
    old.add_edge(START, "ask_confirmation")
    old.add_edge("ask_confirmation", "await_confirmation")
    old.add_edge("await_confirmation", END)
    await old.compile(checkpointer=saver).ainvoke({"messages": [HumanMessage("Archive Orbit")]}, config)

    graph = get_protocol("planner").compile(saver)
    snapshot = await graph.aget_state(config)  # read by today's planner: the old question is not pending
    assert snapshot.interrupts == () and snapshot.values["answer"] == question
    model = scripted(turn("", ("archive_project", {})))
    fields = {"context_type": "project", "entity_id": "orbit", "chat_model": model, "model": "scripted:demo"}
    result = await say("yes", saver, database, **fields)

    # the yes is an ordinary message now: the model's call waits for an explicit approval
    [waiting_now] = (await graph.aget_state(config)).interrupts
    assert waiting_now.value["type"] == "approval" and waiting_now.value["call"]["name"] == "archive_project"
    assert kinds(result)[-1] == "approval_requested" and result.error is None
    [carried] = of_type(result, "last_turn_context")
    assert carried.turn == 2 and carried.pending_confirmation is None
    assert (await store.domain.get_project("default", "orbit")).status == "active"
    await store.close()
