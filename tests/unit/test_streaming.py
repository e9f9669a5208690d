from phasegraph.nodes.streaming import stream_until_first_call
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


async def test_a_long_argument_is_parsed_once_not_at_every_chunk(monkeypatch):
    import phasegraph.nodes.streaming as streaming

    parses: list[int] = []
    real_loads = streaming.json.loads

    def counting_loads(text, *args, **kwargs):
        if len(text) > 1_000:  # LangChain parses each small chunk on its own; count whole-argument parses
            parses.append(len(text))
        return real_loads(text, *args, **kwargs)

    monkeypatch.setattr(streaming.json, "loads", counting_loads)
    query = "x" * 20_000
    model = scripted(turn("", ("search_files", {"query": query, "path": 'a "quoted" } {[ path'})))
    outcome = await stream_until_first_call(model, [], lambda _: None)
    assert outcome.call["args"] == {"query": query, "path": 'a "quoted" } {[ path'}
    assert model.stats[0].chunks_read > 3_000  # thousands of argument pieces ...
    # ... and two whole parses: ours when the object closed, LangChain's once as the stream closes
    assert len(parses) <= 2, parses


async def test_arguments_over_the_limit_close_the_stream_and_refuse_the_call():
    model = scripted(turn("Here goes.", ("search_files", {"query": "y" * 50_000}), ("list_files", {})))
    outcome = await stream_until_first_call(model, [], lambda _: None, max_args_chars=1_000)
    assert outcome.cut is True
    assert outcome.call["name"] == "search_files" and outcome.call["args"] == {}
    assert "longer than 1000 characters" in outcome.call["error"]
    stats = model.stats[0]
    # Reading stopped just past the limit: header + ~1000/6 pieces, far from the 8,000+ the turn holds.
    assert stats.chunks_read < 2 + 1_000 // 6 + 5 < stats.chunks_total // 40
    assert outcome.ignored == []


async def test_without_tools_an_oversized_call_is_ignored_as_too_large():
    model = scripted(turn("Answer.", ("search_files", {"query": "z" * 5_000})))
    outcome = await stream_until_first_call(model, [], lambda _: None, take_calls=False, max_args_chars=100)
    assert outcome.call is None and outcome.cut is True and outcome.text == "Answer."
    assert outcome.ignored == [{"name": "search_files", "args": {}, "reason": "too_large"}]


def test_scanner_follows_strings_escapes_and_nesting():
    from phasegraph.nodes.streaming import PartialCall

    text = '{"a": "}\\"{", "b": [1, {"c": "]"}], "d": "\\\\"}'
    partial = PartialCall(index=0)
    for piece in [text[i : i + 3] for i in range(0, len(text), 3)][:-1]:
        partial.add_args(piece)
        assert partial.parsed_args() is None
    partial.add_args(text[len(text) - len(text) % 3 or len(text) - 3 :])
    assert partial.parsed_args() == {"a": '}"{', "b": [1, {"c": "]"}], "d": "\\"}
    for raw in ("[1, 2]", '{"a": 1} x', '"text"', '{"a": }'):
        other = PartialCall(index=0)
        other.add_args(raw)
        assert other.parsed_args(ended=True) is None, raw
