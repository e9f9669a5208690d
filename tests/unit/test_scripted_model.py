import json
from contextlib import aclosing
from pathlib import Path

import pytest
from pydantic import BaseModel, ValidationError

from phasegraph.nodes.errors import ConfigurationError, ScriptError
from phasegraph.nodes.models import DEMO_SCRIPT, make_model
from phasegraph.nodes.scripted import ScriptedChatModel, load_script
from phasegraph.nodes.settings import provider_settings
from tests.helpers import scripted, turn, write_script


async def test_streams_words_then_tool_call_json_in_pieces():
    model = scripted(turn("Let me look now.", ("read_file", {"path": "docs/roadmap.md"})))
    chunks = [c async for c in model.astream("hi")]
    texts = [c.text for c in chunks if c.text]
    assert texts == ["Let ", "me ", "look ", "now."]
    pieces = [tc for c in chunks for tc in c.tool_call_chunks]
    assert pieces[0]["name"] == "read_file" and pieces[0]["args"] == ""
    arg_pieces = [p["args"] for p in pieces[1:]]
    assert len(arg_pieces) > 2
    assert "".join(arg_pieces) == json.dumps({"path": "docs/roadmap.md"})
    with pytest.raises(json.JSONDecodeError):
        json.loads("".join(arg_pieces[:-1]))
    merged = chunks[0]
    for c in chunks[1:]:
        merged += c
    assert merged.tool_calls[0]["args"] == {"path": "docs/roadmap.md"}
    assert model.stats[0].chunks_read == model.stats[0].chunks_total == len(chunks)


async def test_past_the_last_turn_it_raises_naming_the_script(tmp_path: Path):
    spec = write_script(tmp_path, turn("only"))
    model = make_model(spec)
    assert (await model.ainvoke("a")).content == "only"
    with pytest.raises(ScriptError, match=r"script .*script\.json has no turn 2: it holds 1 turn"):
        await model.ainvoke("b")


async def test_repeat_last_returns_the_last_turn_forever():
    model = scripted(turn("first"), turn("again"), repeat_last=True)
    answers = [(await model.ainvoke("x")).content for _ in range(5)]
    assert answers == ["first", "again", "again", "again", "again"]


async def test_call_index_positions_a_fresh_model(tmp_path: Path):
    spec = write_script(tmp_path, turn("one"), turn("two"), turn("three"))
    assert (await make_model(spec, call_index=2).ainvoke("x")).content == "three"
    assert (await make_model(spec).ainvoke("x")).content == "one"  # every run starts at the first turn


async def test_later_user_messages_read_the_follow_ups_in_turn(tmp_path: Path):
    follow_ups = [[turn("second a"), turn("second b")], [turn("third")]]
    spec = write_script(tmp_path, turn("first"), follow_ups=follow_ups)
    answers = [
        (await make_model(spec, call_index=i, user_turn=user).ainvoke("x")).content
        for user, i in [(0, 0), (1, 0), (1, 1), (2, 0), (3, 0), (3, 1), (4, 0)]
    ]
    assert answers == ["first", "second a", "second b", "third", "second a", "second b", "third"]
    with pytest.raises(ScriptError, match="has no turn 2 for user message 3: it holds 1 turn"):
        await make_model(spec, call_index=1, user_turn=2).ainvoke("x")
    plain = write_script(tmp_path, turn("same"))  # no follow-ups: every message reads the turns
    assert (await make_model(plain, user_turn=4).ainvoke("x")).content == "same"


async def test_call_ids_are_unique_across_the_user_messages_of_a_thread(tmp_path: Path):
    spec = write_script(tmp_path, turn("a", ("list_files", {})), follow_ups=[[turn("b", ("list_files", {}))]])
    ids = set()
    for user in range(3):
        for streamed in (False, True):
            model = make_model(spec, user_turn=user)
            if streamed:
                merged = None
                async for chunk in model.astream("x"):
                    merged = chunk if merged is None else merged + chunk
                ids.add(merged.tool_calls[0]["id"])
            else:
                ids.add((await model.ainvoke("x")).tool_calls[0]["id"])
    assert len(ids) == 3  # one per user message, the same whether streamed or not


async def test_with_structured_output_reads_a_tool_call_named_after_the_schema():
    class Decision(BaseModel):
        verdict: str
        confidence: float

    model = scripted(turn("", ("Decision", {"verdict": "approve", "confidence": 0.9})))
    decision = await model.with_structured_output(Decision).ainvoke("decide")
    assert decision == Decision(verdict="approve", confidence=0.9)


async def test_counts_chunks_read_when_the_consumer_stops_early():
    model = scripted(turn("a b", ("t", {"x": "1234567890"}), ("u", {})))
    async with aclosing(model.astream("")) as stream:
        read = 0
        async for _ in stream:
            read += 1
            if read == 3:
                break
    assert model.stats[0].chunks_read == 3
    assert model.stats[0].chunks_total == 2 + (1 + 4) + (1 + 1) + 1  # words, t header+pieces, u, last


async def test_records_prompts():
    model = scripted(turn("ok"))
    await model.ainvoke("hello")
    assert [m.content for m in model.prompts[0]] == ["hello"]


def test_bad_scripts_and_specs_get_clear_errors(tmp_path: Path, monkeypatch):
    bad = tmp_path / "bad.json"
    bad.write_text('{"turns": []}', encoding="utf-8")
    with pytest.raises(ScriptError, match=r"bad\.json is not a valid script"):
        make_model(f"scripted:{bad}")
    with pytest.raises(ScriptError, match="cannot read script"):
        make_model(f"scripted:{tmp_path / 'missing.json'}")
    with pytest.raises(ConfigurationError, match="unknown model spec 'gpt-4'"):
        make_model("gpt-4")
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    provider_settings.cache_clear()
    try:
        with pytest.raises(ConfigurationError, match="needs OPENAI_API_KEY"):
            make_model("openai:gpt-4o-mini")
    finally:
        provider_settings.cache_clear()


def test_openai_spec_builds_a_chat_openai_for_the_configured_server(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-used")
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    provider_settings.cache_clear()
    try:
        model = make_model("openai:qwen2.5")
    finally:
        provider_settings.cache_clear()
    assert type(model).__name__ == "ChatOpenAI"
    assert model.model_name == "qwen2.5"
    assert model.openai_api_base == "http://127.0.0.1:9/v1"


def test_demo_spec_is_the_bundled_script():
    model = make_model("scripted:demo")
    assert isinstance(model, ScriptedChatModel)
    assert model.source == "script.json"  # named without the server's folders
    assert model.script == load_script(DEMO_SCRIPT)


async def test_a_script_edited_on_disk_is_read_again(tmp_path: Path):
    # scripts are parsed once per file version, so a run asking for its model at every call
    # does not re-read the file; an edit must still be seen
    spec = write_script(tmp_path, turn("before"))
    assert (await make_model(spec).ainvoke("x")).content == "before"
    write_script(tmp_path, turn("after the edit"))
    assert (await make_model(spec).ainvoke("x")).content == "after the edit"


def test_a_loaded_script_cannot_be_changed_by_one_of_its_users():
    script = load_script(DEMO_SCRIPT)
    with pytest.raises(ValidationError):
        script.repeat_last = True  # type: ignore[misc]
    assert load_script(DEMO_SCRIPT) is script  # shared, hence frozen


def test_the_model_repr_names_its_script_not_its_content():
    model = make_model("scripted:demo")
    assert repr(model) == "ScriptedChatModel(source='script.json', start_at=0, user_turn=0)"


async def test_stop_sequences_cut_the_turn_where_a_provider_would():
    from tests.helpers import scripted, turn

    text = (
        "<think>plan</think><demo><read_file>a.md</read_file></demo><execute_tools /><result>made up</result>"
    )
    model = scripted(turn(text, ("never", {})), turn("no stop here"))
    chunks = [c async for c in model.astream("go", stop=["<execute_tools />", "<result>"])]
    received = "".join(c.text for c in chunks)
    assert received == "<think>plan</think><demo><read_file>a.md</read_file></demo>"
    assert not any(c.tool_call_chunks for c in chunks)  # nothing after the stop is produced
    stats = model.stats[0]
    assert stats.stopped_by == "<execute_tools />" and stats.chunks_read == stats.chunks_total
    whole = await model.ainvoke("go", stop=["<execute_tools />"])
    assert whole.text == "no stop here"
