"""triggered_phase holds a conversation: every message of a thread gets its turn, budgets and all."""

from pathlib import Path

from langchain_core.messages import AIMessage, HumanMessage, SystemMessage

from phasegraph.nodes.models import DEMO_SCRIPT
from phasegraph.nodes.scripted import load_script
from tests.conversations import calls, chat, chat_turns, hidden, tool_messages
from tests.helpers import of_type, scripted, turn, write_script

DEMO = load_script(DEMO_SCRIPT)
#: The demo's answer to each user message: its turns, then its follow-ups over and over.
ANSWERS = [DEMO.turns[-1].content, *(f[-1].content for f in DEMO.follow_ups)]


async def test_the_demo_answers_ten_messages_on_one_thread(collect):
    results, messages = await chat(collect, "triggered_phase", [f"Question {n}" for n in range(1, 11)])
    assert [r.error for r in results] == [None] * 10
    expected = [ANSWERS[0], *(ANSWERS[1:] * 3)]
    assert [r.final.answer for r in results] == expected
    assert not any(r.final.fallback for r in results)
    turns = chat_turns(messages)
    assert [t[0].text for t in turns] == [f"Question {n}" for n in range(1, 11)]
    assert calls(turns[0]) == [
        ("list_files", {"path": "docs"}),
        ("read_file", {"path": "docs/roadmap.md"}),
        ("read_file", {"path": "./docs/../docs/roadmap.md"}),  # refused as a duplicate
    ]
    assert calls(turns[1]) == [("read_file", {"path": "docs/team.md"})]
    assert calls(turns[2]) == [
        ("search_files", {"query": "pause", "path": "docs"}),
        ("read_file", {"path": "docs/roadmap.md"}),  # read in turn 1 too: a new turn may read it again
    ]
    listed, read, duplicate = tool_messages(turns[0])
    assert hidden(listed) and hidden(read)
    assert duplicate.status == "error" and duplicate.text.startswith("Refused: the tool call read_file(")
    assert all(hidden(m) for t in turns[1:] for m in tool_messages(t))
    # the model's own words of a step that called a tool go with the call
    assert turns[0][1].text == "Let me see what is in the docs folder."
    # nothing internal reaches the conversation: no notes, no raw output
    assert not [m for m in messages if isinstance(m, SystemMessage)]
    assert not [m for m in messages if "Result of tool call" in m.text or "Ada: orchestration" in m.text]


async def test_tool_messages_hold_the_output_when_outputs_are_shown(collect):
    _, messages = await chat(collect, "triggered_phase", ["Roadmap?", "Team?"], show_tool_outputs=True)
    first, second = chat_turns(messages)
    listed, read, duplicate = tool_messages(first)
    assert listed.text == "docs/roadmap.md\ndocs/team.md" and "## Milestone 2 — June" in read.text
    assert duplicate.status == "error" and duplicate.text.startswith("Refused")
    assert "- Grace: tooling and CI" in tool_messages(second)[0].text


async def test_budgets_and_duplicates_reset_at_every_message(collect, tmp_path: Path):
    # two tool cycles per message against a budget of three: only the sum over messages exceeds it,
    # and every message asks for the same two calls, duplicates only of the turns before
    both = [turn("", ("list_files", {"path": "docs"})), turn("", ("read_file", {"path": "docs/team.md"}))]
    spec = write_script(tmp_path, *both, turn("First."), follow_ups=[[*both, turn("Again.")]])
    results, messages = await chat(
        collect, "triggered_phase", ["One", "Two", "Three"], model=spec, max_phase_cycles_per_turn=3
    )
    assert [r.final.answer for r in results] == ["First.", "Again.", "Again."]
    for result in results:
        assert [e.name for e in of_type(result, "tool_call")] == ["list_files", "read_file"]
        assert of_type(result, "duplicate_tool_call") == of_type(result, "budget_exhausted") == []
        assert of_type(result, "phase_start")[0].phase_index == 1  # phases count per message too
    assert [len(calls(t)) for t in chat_turns(messages)] == [2, 2, 2]


async def test_the_model_reads_earlier_messages_as_questions_and_answers(collect):
    model = scripted(
        turn("Reading.", ("read_file", {"path": "docs/team.md"})),
        turn("Three people."),
        turn("", ("list_files", {"path": "docs"})),
        turn("Two files."),
    )
    await chat(collect, "triggered_phase", ["Who?", "What files?"], chat_model=model)
    second_message, its_result = model.prompts[2], model.prompts[3]
    # the first message's tool call and its notes stay out: its question and answer remain
    assert [type(m) for m in second_message] == [SystemMessage, HumanMessage, AIMessage, HumanMessage]
    assert [m.text for m in second_message[1:]] == ["Who?", "Three people.", "What files?"]
    assert [type(m) for m in its_result] == [
        SystemMessage,
        SystemMessage,
        HumanMessage,
        AIMessage,
        HumanMessage,
    ]
    assert "Result of tool call list_files(path='docs') [ok]:\ndocs/roadmap.md" in its_result[1].text
