from nodes.streaming import stream_until_first_call
from tests.helpers import scripted, turn

FIVE = [("read_file", {"path": f"docs/{n}.md"}) for n in ("a", "b", "c", "d", "e")]


async def test_stops_reading_at_the_first_complete_call():
    model = scripted(turn("Reading five files.", *FIVE))
    texts: list[str] = []
    outcome = await stream_until_first_call(model, [], texts.append)
    assert outcome.call["name"] == "read_file" and outcome.call["args"] == {"path": "docs/a.md"}
    assert outcome.cut is True
    assert "".join(texts) == "Reading five files."
    stats = model.stats[0]
    assert stats.chunks_after_first_complete_call == 0
    assert outcome.chunks_read == stats.first_tool_call_complete_at + 1 == stats.chunks_read
    assert stats.chunks_total > stats.chunks_read + 4 * 2  # four more calls were never streamed
    assert outcome.ignored == []  # calls 2-5 were never read, so nothing about them is known


async def test_batched_calls_are_all_seen_and_the_rest_ignored():
    model = scripted(turn("", *FIVE), tool_call_delivery="batched")
    outcome = await stream_until_first_call(model, [], lambda _: None)
    assert outcome.call["args"] == {"path": "docs/a.md"}
    assert [i["args"]["path"] for i in outcome.ignored] == [f"docs/{n}.md" for n in "bcde"]
    assert {i["reason"] for i in outcome.ignored} == {"after_first_call"}
    assert model.stats[0].chunks_after_first_complete_call == 0


async def test_without_tools_the_stream_is_read_to_the_end():
    model = scripted(turn("Answer.", ("list_files", {})))
    outcome = await stream_until_first_call(model, [], lambda _: None, take_calls=False)
    assert outcome.call is None and outcome.cut is False
    assert outcome.ignored == [{"name": "list_files", "args": {}, "reason": "tools_unbound"}]
    assert outcome.chunks_read == model.stats[0].chunks_read


async def test_plain_text_has_no_call():
    outcome = await stream_until_first_call(scripted(turn("Just text.")), [], lambda _: None)
    assert outcome.call is None and outcome.text == "Just text." and outcome.ignored == []
