"""Hostile tool calls: oversized arguments and nameless calls become error results the model reads."""

from langchain_core.messages import SystemMessage

from tests.helpers import of_type, scripted, turn

HUGE = {"query": "q" * 30_000}


async def test_triggered_phase_refuses_an_oversized_call_without_running_it(collect):
    model = scripted(turn("Searching.", ("search_files", HUGE)), turn("I will ask for less."))
    result = await collect("triggered_phase", chat_model=model, max_tool_args_chars=2_000)
    call, tool_result = of_type(result, "tool_call")[0], of_type(result, "tool_result")[0]
    assert call.name == "search_files" and call.args == {}
    assert tool_result.status == "error" and "longer than 2000 characters" in tool_result.error
    assert model.stats[0].chunks_read < model.stats[0].chunks_total // 10  # the stream was closed early
    notes = [m.text for m in model.prompts[1] if isinstance(m, SystemMessage)]
    assert any("longer than 2000 characters" in n for n in notes)  # the model reads why
    assert not any(t.details.get("status") == "ok" for t in result.trace if t.type == "tool_result")
    assert result.final.answer == "I will ask for less."


async def test_a_refused_call_sent_again_smaller_is_not_a_duplicate(collect):
    model = scripted(
        turn("", ("search_files", HUGE)), turn("", ("search_files", {"query": "q"})), turn("Done.")
    )
    result = await collect("triggered_phase", chat_model=model, max_tool_args_chars=2_000)
    assert [r.status for r in of_type(result, "tool_result")] == ["error", "ok"]
    assert of_type(result, "duplicate_tool_call") == []


async def test_unified_refuses_an_oversized_call_without_running_it(collect):
    model = scripted(turn("", ("search_files", HUGE)), turn("Fine."))
    result = await collect("unified", chat_model=model, max_tool_args_chars=2_000)
    tool_result = of_type(result, "tool_result")[0]
    assert tool_result.status == "error" and "longer than 2000 characters" in tool_result.error
    assert model.stats[0].chunks_read < model.stats[0].chunks_total // 10  # the stream was closed early
    assert of_type(result, "tool_call")[0].args == {}
    assert result.final.answer == "Fine."


async def test_a_call_without_a_name_is_an_unknown_tool_not_an_ignored_call(collect):
    model = scripted(turn("", ("", {})), turn("Sorry."))
    result = await collect("triggered_phase", chat_model=model)
    assert of_type(result, "ignored_tool_call") == []
    tool_result = of_type(result, "tool_result")[0]
    assert tool_result.status == "error" and "unknown tool ''" in tool_result.error
    notes = [m.text for m in model.prompts[1] if isinstance(m, SystemMessage)]
    assert any("unknown tool ''" in n for n in notes)
    assert result.final.answer == "Sorry."
