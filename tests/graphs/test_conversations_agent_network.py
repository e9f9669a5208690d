"""agent_network holds a conversation: each message starts at the default agent, with the earlier turns."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.memory import InMemorySaver

from phasegraph.graphs.run import RunResult, run
from phasegraph.nodes.trace import MemoryTraceStore
from tests.graphs.chat_shape import check_shape, shape, thread_messages, turns
from tests.helpers import kinds, of_type, scripted, turn

QUESTIONS = [
    "Who works on streaming, and when is it due?",
    "What is planned for June?",
    "Who works on tooling?",
    "Sum that up in one line.",
]
#: Words of the agents' JSON decisions, which live in the state and never in messages.
DECISION_WORDS = ("action_reasoning", "ROUTE_TO_AGENT", "USE_TOOL", "RESPOND", "target_agent")


async def say(message: str, saver: InMemorySaver, workspace: Path, **fields: Any) -> RunResult:
    fields.setdefault("model", "scripted:demo")
    return await run(
        "agent_network", message, checkpointer=saver, thread_id="t", workspace=str(workspace),
        traces=MemoryTraceStore(), **fields,
    )  # fmt: skip


def prompts(result: RunResult) -> list[str]:
    return [e.details["prompt"] for e in result.trace if e.type == "agent_prompt"]


async def test_the_demo_answers_four_messages_each_starting_at_the_default_agent(workspace):
    saver = InMemorySaver()
    # the turns take 5, 4, 5 and 2 decisions: 16 in all, 5 allowed per turn
    results = [await say(q, saver, workspace, max_steps=5) for q in QUESTIONS]
    for result in results:
        assert result.error is None and result.final is not None
        assert "budget_exhausted" not in kinds(result)
        assert of_type(result, "agent_step")[0].agent == "triage"  # the network's default agent
        assert of_type(result, "final")[0].agent == "writer"
    assert "Grace" in results[2].final.answer
    messages = await thread_messages("agent_network", saver)
    answers = check_shape(messages, shown=False)
    assert [shape(t) for t in turns(messages)] == [
        ["human", "ai[search_files]", "tool:search_files:success", "ai[read_file]", "tool:read_file:success",
         "ai"],
        ["human", "ai[read_file]", "tool:read_file:success", "ai"],
        ["human", "ai[list_files]", "tool:list_files:success", "ai[search_files]",
         "tool:search_files:success", "ai"],
        ["human", "ai"],
    ]  # fmt: skip
    assert [m.name for m in messages if isinstance(m, AIMessage)] == [
        "researcher", "researcher", "writer", "researcher", "writer", "triage", "researcher", "writer",
        "writer",
    ]  # fmt: skip
    ids = [a.tool_call_id for a in answers]
    assert len(set(ids)) == len(ids) == 5
    assert [m.text for m in messages if isinstance(m, HumanMessage)] == QUESTIONS
    plain = [m.text for m in messages if isinstance(m, AIMessage) and not m.tool_calls]
    assert plain == [r.final.answer for r in results]
    assert not any(word in m.text for m in messages for word in DECISION_WORDS)


async def test_agents_read_the_earlier_turns_and_only_this_turns_tool_outputs(workspace):
    saver = InMemorySaver()
    first = await say(QUESTIONS[0], saver, workspace)
    assert not any("Earlier in this conversation" in p for p in prompts(first))
    second = await say(QUESTIONS[1], saver, workspace)
    for prompt in prompts(second):
        earlier = prompt.split("Earlier in this conversation:\n", 1)[1].split("\n\nUser message:", 1)[0]
        assert earlier == f"User: {QUESTIONS[0]}\nwriter: {first.final.answer}"
        assert prompt.split("User message:\n", 1)[1].startswith(QUESTIONS[1])
        assert "Linus: streaming server" not in prompt  # turn 1's read of team.md stays in turn 1


async def test_tool_outputs_are_in_the_thread_only_when_shown(workspace):
    saver = InMemorySaver()
    await say(QUESTIONS[0], saver, workspace, show_tool_outputs=True)
    answers = check_shape(await thread_messages("agent_network", saver), shown=True)
    assert "Linus: streaming server" in answers[1].text


async def test_a_refused_tool_call_is_answered_with_why_it_did_not_run(workspace):
    def decide(action: str, **details: Any) -> dict[str, Any]:
        decision = {"action": action, "action_reasoning": "r", "action_details": details}
        return turn("", ("AgentDecision", decision))

    model = scripted(
        decide("USE_TOOL", tool="read_file", params={"path": "docs/team.md"}),  # triage has no read_file
        decide("ROUTE_TO_AGENT", target_agent="writer", message="answer it"),
        decide("RESPOND", message="I could not read it."),
    )
    saver = InMemorySaver()
    result = await say("Read team.md", saver, workspace, model="scripted:demo", chat_model=model)
    assert result.final.answer == "I could not read it."
    messages = await thread_messages("agent_network", saver)
    [refused] = check_shape(messages, shown=False)
    assert shape(messages) == ["human", "ai[read_file]", "tool:read_file:error", "ai"]
    assert messages[1].name == "triage" and messages[1].tool_calls[0]["args"] == {"path": "docs/team.md"}
    assert refused.text == "Not run: triage has no tool 'read_file' (its tools: list_files)."
