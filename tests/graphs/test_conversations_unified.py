"""unified holds a conversation: create_agent's messages, outputs hidden from the chat, not from the model."""

from pathlib import Path

from langchain_core.messages import ToolMessage

from phasegraph.graphs.unified import graph
from phasegraph.nodes.models import DEMO_SCRIPT
from phasegraph.nodes.scripted import load_script
from tests.conversations import calls, chat, chat_turns, hidden, tool_messages
from tests.helpers import of_type, scripted, turn, write_script

DEMO = load_script(DEMO_SCRIPT)  # the same demo as triggered_phase: one call per model step
ANSWERS = [DEMO.turns[-1].content, *(f[-1].content for f in DEMO.follow_ups)]


async def test_the_demo_answers_ten_messages_on_one_thread(collect):
    results, messages = await chat(collect, "unified", [f"Question {n}" for n in range(1, 11)])
    assert [r.error for r in results] == [None] * 10
    assert [r.final.answer for r in results] == [ANSWERS[0], *(ANSWERS[1:] * 3)]
    turns = chat_turns(messages)
    assert len(turns) == 10
    assert calls(turns[0]) == [
        ("list_files", {"path": "docs"}),
        ("read_file", {"path": "docs/roadmap.md"}),
        ("read_file", {"path": "./docs/../docs/roadmap.md"}),  # unified runs duplicates
    ]
    assert calls(turns[1]) == [("read_file", {"path": "docs/team.md"})]
    assert all(hidden(m) for t in turns for m in tool_messages(t))
    assert turns[1][1].tool_calls[0]["id"] == "call_m2_1_1"  # the scripted model reads its follow-up
    assert not [m for m in messages if "Ada: orchestration" in m.text]


async def test_tool_messages_hold_the_output_when_outputs_are_shown(collect):
    _, messages = await chat(collect, "unified", ["Roadmap?", "Team?"], show_tool_outputs=True)
    first, second = chat_turns(messages)
    assert tool_messages(first)[0].text == "docs/roadmap.md\ndocs/team.md"
    assert "- Grace: tooling and CI" in tool_messages(second)[0].text


async def test_the_model_reads_every_output_the_chat_hides(collect):
    model = scripted(
        turn("Reading.", ("read_file", {"path": "docs/team.md"})),
        turn("Three people."),
        turn("", ("list_files", {"path": "docs"})),
        turn("Two files."),
    )
    _, messages = await chat(collect, "unified", ["Who?", "What files?"], chat_model=model)
    assert all(hidden(m) for m in messages if isinstance(m, ToolMessage))
    read_outputs = [[m.text for m in prompt if isinstance(m, ToolMessage)] for prompt in model.prompts]
    team = "# Team\n\n- Ada: orchestration core\n- Linus: streaming server\n- Grace: tooling and CI\n"
    assert read_outputs == [[], [team], [team], [team, "docs/roadmap.md\ndocs/team.md"]]
    assert "tool_outputs" not in graph.get_output_jsonschema()["properties"]  # kept for the model only


async def test_budgets_reset_at_every_message(collect, tmp_path: Path):
    # two calls and three model calls per message, against budgets of three: only the sum exceeds them
    both = [turn("", ("list_files", {"path": "docs"})), turn("", ("read_file", {"path": "docs/team.md"}))]
    spec = write_script(tmp_path, *both, turn("First."), follow_ups=[[*both, turn("Again.")]])
    results, messages = await chat(
        collect, "unified", ["One", "Two", "Three"], model=spec, max_tool_calls=3, max_model_calls=3
    )
    assert [r.final.answer for r in results] == ["First.", "Again.", "Again."]
    assert [of_type(r, "budget_exhausted") for r in results] == [[], [], []]
    assert [len(calls(t)) for t in chat_turns(messages)] == [2, 2, 2]


async def test_a_call_past_the_budget_is_answered_with_why_it_did_not_run(collect, tmp_path: Path):
    both = [("read_file", {"path": "docs/roadmap.md"}), ("read_file", {"path": "docs/team.md"})]
    spec = write_script(tmp_path, turn("", *both), turn("Done."), tool_call_delivery="batched")
    _, messages = await chat(collect, "unified", ["Read both"], model=spec, max_tool_calls=1)
    ran, refused = tool_messages(chat_turns(messages)[0])
    assert hidden(ran)
    assert refused.status == "error"
    assert refused.text.startswith("Not run: this turn's budget of 1 tool calls")


async def test_an_empty_answer_falls_back_to_the_outputs_the_chat_hides(collect, tmp_path: Path):
    spec = write_script(tmp_path, turn("", ("list_files", {"path": "docs"})), turn(""))
    results, messages = await chat(collect, "unified", ["List"], model=spec)
    assert results[0].final.fallback and "docs/roadmap.md\ndocs/team.md" in results[0].final.answer
    assert messages[-1].text == results[0].final.answer
