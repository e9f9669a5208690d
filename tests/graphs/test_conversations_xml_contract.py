"""xml_contract holds a conversation: the chat gets native calls, the model keeps its XML transcript."""

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage
from langgraph.checkpoint.memory import InMemorySaver

from phasegraph.graphs.registry import get_protocol
from phasegraph.graphs.run import stream_graph
from phasegraph.nodes.models import DEMO_WORKSPACE
from phasegraph.nodes.scripted import load_script
from phasegraph.nodes.xml_contract.context import DEMO_SCRIPT, XmlContractContext
from phasegraph.nodes.xml_contract.contract import answer_text
from phasegraph.tools.mcp import McpServices, load_services
from tests.conversations import calls, chat, chat_turns, hidden, tool_messages
from tests.helpers import of_type, scripted, turn, write_script

DEMO = load_script(DEMO_SCRIPT)
ANSWERS = [answer_text(part[-1].content) for part in (DEMO.turns, *DEMO.follow_ups)]
READ = "<demo><read_file>docs/team.md</read_file></demo><execute_tools />"
INTERNAL = ("<result", "<think", "<demo", "Final Answer:", "execute_tools")


#: Every test runs on the module's loop, where the demo services were opened once for all of them.
pytestmark = pytest.mark.asyncio(loop_scope="module")


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def demo() -> AsyncIterator[dict[str, Any]]:
    """The bundled demo services (on the bundled workspace: they only read it), opened once."""
    services = await McpServices.open(load_services(None, DEMO_WORKSPACE), timeout=60)
    try:
        yield {"mcp_services": services, "dataset_dir": ""}
    finally:
        await services.close()


async def test_the_demo_answers_ten_messages_on_one_thread(collect, demo):
    results, messages = await chat(collect, "xml_contract", [f"Question {n}" for n in range(1, 11)], **demo)
    assert [r.error for r in results] == [None] * 10
    assert [r.final.answer for r in results] == [ANSWERS[0], *(ANSWERS[1:] * 3)]
    turns = chat_turns(messages)
    assert calls(turns[0]) == [
        ("demo.read_file", {"path": "docs/roadmap.md"}),
        ("demo.read_file", {"path": "docs/team.md"}),
        ("demo.calculate", {"expression": "1 + 1 + 1"}),
        ("demo.slow_echo", {"text": "3 people work on the project", "ms": 50}),  # as it ran
    ]
    # one assistant message per iteration, holding all of its calls; ids unique in the thread
    assert [[c["id"] for c in m.tool_calls] for m in turns[0] if isinstance(m, AIMessage)] == [
        ["1.1.1", "1.1.2"], ["2.1.1", "2.1.2"], []
    ]  # fmt: skip
    assert [m.tool_call_id for m in tool_messages(turns[1])] == ["m2.1.1.1"]
    assert all(hidden(m) for t in turns[:3] for m in tool_messages(t))
    missing, listed = tool_messages(turns[3])  # the budget the demo looks for is not there
    assert missing.status == "error" and missing.text.startswith("demo.read_file ran: error (")
    assert "docs/budget.md" in missing.text and hidden(listed)
    # the XML, the results and the thinking are the model's, not the chat's
    assert not [m for m in messages if any(mark in m.text for mark in INTERNAL)]
    assert {m.type for m in messages} == {"human", "ai", "tool"}


async def test_tool_messages_hold_the_output_when_outputs_are_shown(collect, demo):
    _, messages = await chat(collect, "xml_contract", ["Roadmap?", "Team?"], show_tool_outputs=True, **demo)
    first, second = chat_turns(messages)
    assert "## Milestone 2 — June" in tool_messages(first)[0].text
    assert [m.text for m in tool_messages(first)[2:]] == ["3", "3 people work on the project"]
    assert "- Grace: tooling and CI" in tool_messages(second)[0].text


async def test_the_model_reads_its_xml_and_results_of_every_turn(collect, demo):
    model = scripted(turn(READ), turn("Final Answer: Three."), turn("Final Answer: Still three."))
    _, messages = await chat(collect, "xml_contract", ["Who?", "Sure?"], chat_model=model, **demo)
    second = model.prompts[2]
    assert [type(m) for m in second] == [
        SystemMessage, HumanMessage, AIMessage, HumanMessage, AIMessage, HumanMessage
    ]  # fmt: skip
    assert second[2].text.startswith("<demo><read_file>") and "Grace: tooling and CI" in second[3].text
    assert second[3].text.startswith('<result step="1" service="demo" tool="read_file" status="ok">')
    assert [second[4].text, second[5].text] == ["Final Answer: Three.", "Sure?"]
    assert [m.text for m in messages if isinstance(m, AIMessage) and not m.tool_calls] == [
        "Three.", "Still three."
    ]  # fmt: skip


async def test_the_step_budget_resets_at_every_message(collect, demo, tmp_path: Path):
    # two iterations per message against a budget of three: only their sum exceeds it
    both = [turn(READ), turn("<demo><list_files>docs</list_files></demo><execute_tools />")]
    spec = write_script(
        tmp_path, *both, turn("Final Answer: One."), follow_ups=[[*both, turn("Final Answer: Two.")]]
    )
    results, messages = await chat(collect, "xml_contract", ["1", "2", "3"], model=spec, max_steps=3, **demo)
    assert [r.final.answer for r in results] == ["One.", "Two.", "Two."]
    assert [of_type(r, "budget_exhausted") for r in results] == [[], [], []]
    assert [len(calls(t)) for t in chat_turns(messages)] == [2, 2, 2]


async def test_a_step_after_a_failed_one_says_it_never_ran(collect, demo):
    block = "<sequential><demo><always_fails/></demo><demo><calculate>1 + 1</calculate></demo></sequential>"
    model = scripted(turn(block + "<execute_tools />"), turn("Final Answer: It failed."))
    _, messages = await chat(collect, "xml_contract", ["Try"], chat_model=model, **demo)
    failed, skipped = tool_messages(chat_turns(messages)[0])
    assert failed.status == "error" and failed.text.startswith("demo.always_fails ran: error (")
    assert (skipped.status, skipped.text) == ("error", "not run: step 1 failed")


async def test_the_answer_forced_by_the_budget_ends_the_chat_turn(collect, demo):
    model = scripted(turn(READ), turn("Final Answer: Ada, Linus and Grace."))
    results, messages = await chat(collect, "xml_contract", ["Who?"], chat_model=model, max_steps=1, **demo)
    assert of_type(results[0], "budget_exhausted") and results[0].final.answer == "Ada, Linus and Grace."
    assert [m.type for m in messages] == ["human", "ai", "tool", "ai"]
    assert messages[-1].text == "Ada, Linus and Grace."
    assert "No more tools will run" in model.prompts[1][-1].text  # the ask is the model's only


async def test_a_history_sent_with_the_first_message_reaches_the_model(workspace: Path, demo):
    spec = get_protocol("xml_contract")
    graph = spec.compile(InMemorySaver())
    model = scripted(turn("Final Answer: Grace."))
    context = XmlContractContext(chat_model=model, workspace=str(workspace), **demo)
    history = [("user", "Who does CI?"), ("ai", "Grace."), ("user", "Again?")]
    config = {"configurable": {"thread_id": "with-history"}}
    try:
        events = [e async for e in stream_graph(spec, graph, {"messages": history}, context, config)]
    finally:
        await context.aclose()
    assert events[-1].type == "final" and events[-1].answer == "Grace."
    assert [m.text for m in model.prompts[0][1:]] == ["Who does CI?", "Grace.", "Again?"]
