"""goal_pursuit holds a conversation: later goals continue the thread, each turn with fresh budgets."""

from __future__ import annotations

import json
from typing import Any

from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver

from phasegraph.graphs.run import RunResult, run
from phasegraph.nodes.goal_pursuit.context import DEMO_SCRIPT, GoalPursuitContext
from phasegraph.nodes.scripted import Script, ScriptedChatModel, load_script
from phasegraph.nodes.trace import MemoryTraceStore
from phasegraph.tools.resources import load_bundled
from tests.graphs.chat_shape import check_shape, shape, thread_messages, turns
from tests.helpers import kinds, of_type, scripted, turn

GOALS = [
    "The Grey Fox found her compass at the lighthouse in chapter 3: give it back and note it there.",
    "Where is the compass now?",
    "Have Hesk give the salt key to Mira, and note it in chapter 4.",
    "What does the storm glass foretell?",
]
#: Words of the phases' structured answers, which live in the state and never in messages.
PHASE_WORDS = ("discovery_analysis", "situation_analysis", "refinement", "verdict", "DiscoveryPlan")


async def say(goal: str, saver: InMemorySaver, **fields: Any) -> RunResult:
    fields.setdefault("model", "scripted:demo")
    return await run(
        "goal_pursuit", goal, checkpointer=saver, thread_id="t", traces=MemoryTraceStore(), **fields
    )


async def test_the_demo_pursues_four_goals_on_one_thread_each_with_its_own_step_budget():
    saver, world = InMemorySaver(), load_bundled()
    # the first and third goals execute two steps each: 4 in all, 3 allowed per turn
    results = [await say(g, saver, max_steps=3, resource_repository=world) for g in GOALS]
    for result in results:
        assert result.error is None and result.final is not None and result.final.exit == "approved"
        assert "budget_exhausted" not in kinds(result)
    assert [len(of_type(r, "tool_call")) for r in results] == [2, 0, 2, 0]
    assert world.get("res://item/salt-key").properties["owner"] == "res://character/mira-voss"
    messages = await thread_messages("goal_pursuit", saver)
    answers = check_shape(messages, shown=False)
    assert [shape(t) for t in turns(messages)] == [
        ["human", "ai[move_item]", "tool:move_item:success", "ai[add_chapter_note]",
         "tool:add_chapter_note:success", "ai"],
        ["human", "ai"],
        ["human", "ai[move_item]", "tool:move_item:success", "ai[add_chapter_note]",
         "tool:add_chapter_note:success", "ai"],
        ["human", "ai"],
    ]  # fmt: skip
    assert [a.tool_call_id for a in answers] == ["step_1", "step_2", "m3_step_1", "m3_step_2"]
    assert [m.text for m in messages if isinstance(m, HumanMessage)] == GOALS
    plain = [m.text for m in messages if isinstance(m, AIMessage) and not m.tool_calls]
    assert plain == [r.final.answer for r in results]
    # the phases' answers stay in the state: no message holds them
    assert not any(word in m.text for m in messages for word in PHASE_WORDS)


async def test_tool_outputs_are_in_the_thread_only_when_shown():
    saver = InMemorySaver()
    await say(GOALS[0], saver, show_tool_outputs=True, resource_repository=load_bundled())
    answers = check_shape(await thread_messages("goal_pursuit", saver), shown=True)
    assert "res://character/mira-voss" in answers[0].text  # move_item's own output


async def test_later_phases_read_the_earlier_turns_as_a_dialogue_and_the_new_goal_last():
    demo = load_script(DEMO_SCRIPT)
    model = ScriptedChatModel(script=Script(turns=[*demo.turns, *demo.follow_ups[0]]))
    context = GoalPursuitContext(chat_model=model, resource_repository=load_bundled())
    saver = InMemorySaver()
    first = await run("goal_pursuit", GOALS[0], context=context, checkpointer=saver, thread_id="t")
    context = GoalPursuitContext(chat_model=model, resource_repository=context.resource_repository)
    await run("goal_pursuit", GOALS[1], context=context, checkpointer=saver, thread_id="t")
    assert model.exhausted
    opening = len(demo.turns)
    for prompt in model.prompts[:opening]:  # the first turn: the phase prompt and the goal
        assert [m.type for m in prompt[:2]] == ["system", "human"] and prompt[1].text == GOALS[0]
    for prompt in model.prompts[opening:]:
        assert [m.type for m in prompt[:4]] == ["system", "human", "ai", "human"]
        assert [m.text for m in prompt[1:4]] == [GOALS[0], first.final.answer, GOALS[1]]
        assert not any(isinstance(m, ToolMessage) or getattr(m, "tool_calls", None) for m in prompt[1:4])


async def test_a_repeated_call_is_answered_as_not_run_in_the_thread():
    call = turn("", ("ActionDecision", {
        "situation_analysis": "ready", "decision_type": "execute",
        "execution": {"tool": "move_item", "params": {"item_uri": "res://item/brass-compass",
                                                       "to_uri": "res://character/mira-voss"}, "reason": "x"},
    }))  # fmt: skip
    discover = turn("", ("DiscoveryPlan", {"discovery_analysis": "looked"}))
    approve = turn("", ("RefinementDecision", {"analysis": "ok", "verdict": "approve",
                                               "approval": {"confidence": 0.9}}))  # fmt: skip
    done = {"response": "done", "status": "success"}
    final = turn("", ("ActionDecision", {"situation_analysis": "done", "decision_type": "finalize",
                                         "finalization": done}))  # fmt: skip
    model = scripted(discover, call, approve, discover, call, approve, discover, final, approve)
    saver = InMemorySaver()
    context = GoalPursuitContext(chat_model=model, resource_repository=load_bundled())
    await run("goal_pursuit", GOALS[0], context=context, checkpointer=saver, thread_id="t")
    answers = check_shape(await thread_messages("goal_pursuit", saver), shown=False)
    assert [(a.status, a.text) for a in answers] == [
        ("success", "move_item ran: ok. Its output is not shown (show_tool_outputs is off)."),
        ("error", "move_item did not run: the same call already ran this turn."),
    ]
    assert json.dumps([a.tool_call_id for a in answers]) == '["step_1", "step_2"]'
