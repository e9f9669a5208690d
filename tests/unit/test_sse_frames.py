"""SSE responses write the events that are ready together in one chunk; each still parses on its own."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

from phasegraph.nodes.events import Event, Final, PhaseStart, TextChunk
from phasegraph.server.http.sse import KEEPALIVE, PING, encode, frame, sse_response, to_sse

EVENTS: list[Event] = [
    PhaseStart(request_id="r", seq=1, phase="action_phase"),
    TextChunk(request_id="r", seq=2, text='two\nlines, a "quote", a \r return and ünïcode \u2028'),
    TextChunk(request_id="r", seq=3, text="data: not a field\n\nevent: nor this"),
    Final(request_id="r", seq=4, answer="done"),
]


async def _written(parts: AsyncIterator[Any], **keepalive: Any) -> list[bytes]:
    """The body chunks the response sends, in order (the ASGI server's side of the response)."""
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        await asyncio.Event().wait()  # the client never leaves
        return {}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = {"type": "http", "asgi": {"version": "3.0", "spec_version": "2.4"}}
    await sse_response(parts, **keepalive)(scope, receive, send)
    assert sent[0]["type"] == "http.response.start" and sent[-1] == {
        "type": "http.response.body", "body": b"", "more_body": False,
    }  # fmt: skip
    return [message["body"] for message in sent[1:-1]]


def _parsed(body: bytes) -> list[dict[str, str]]:
    """SSE as a client reads it: blocks apart at blank lines, comment lines ignored, fields by name."""
    events = []
    for block in body.split(b"\n\n"):
        fields = {}
        for line in block.decode().split("\n"):
            if line and not line.startswith(":"):
                name, _, value = line.partition(": ")
                fields[name] = value
        if fields:
            events.append(fields)
    return events


def test_an_event_frame_is_its_encoded_part():
    """The direct encoding sends the bytes the ``ServerSentEvent`` of the event would."""
    for event in EVENTS:
        assert frame(event) == encode(to_sse(event))


async def test_events_ready_together_go_in_one_write_and_parse_apart_in_order():
    """Three frames queued at once are one chunk; the client still reads three events, ids in order."""
    later = asyncio.Event()

    async def parts() -> AsyncIterator[bytes]:
        for event in EVENTS[:3]:  # no await between them: all ready before the response writes
            yield frame(event)
        await later.wait()
        yield frame(EVENTS[3])

    async def go_on() -> None:
        await asyncio.sleep(0.05)
        later.set()

    waking = asyncio.create_task(go_on())
    chunks = await _written(parts())
    await waking
    assert chunks == [b"".join(frame(e) for e in EVENTS[:3]), frame(EVENTS[3])]
    events = _parsed(b"".join(chunks))
    assert [(e["event"], e["id"]) for e in events] == [(e.type, str(e.seq)) for e in EVENTS]
    assert [e["data"] for e in events] == [e.to_json() for e in EVENTS]


async def test_a_quiet_stream_sends_its_keepalive_and_a_failure_after_what_was_ready():
    """After ``every`` quiet seconds the keep-alive goes; events read before a failure are still sent."""

    async def parts() -> AsyncIterator[Any]:
        yield to_sse(EVENTS[0])
        await asyncio.sleep(0.3)  # a timer later than the keep-alive's: the loop runs that one first
        yield frame(EVENTS[1])
        raise RuntimeError("the run's stream broke")

    try:
        await _written(parts(), keepalive=PING, every=0.05)
    except RuntimeError as exc:
        assert str(exc) == "the run's stream broke"
    else:
        raise AssertionError("the failure was not raised")
    chunks: list[bytes] = []

    async def quiet() -> AsyncIterator[bytes]:
        yield frame(EVENTS[0])
        await asyncio.sleep(0.3)
        yield frame(EVENTS[1])

    chunks = await _written(quiet(), keepalive=PING, every=0.05)
    assert chunks[0] == frame(EVENTS[0]) and chunks[-1] == frame(EVENTS[1])
    assert set(chunks[1:-1]) == {PING} and PING != KEEPALIVE
    assert [e["id"] for e in _parsed(b"".join(chunks)) if "id" in e] == ["1", "2"]


async def test_a_slow_client_holds_the_reader_at_the_buffer_limit():
    """The reader stops reading parts while a whole buffer waits for the client; nothing is lost."""
    read = 0
    release = asyncio.Event()

    async def many() -> AsyncIterator[bytes]:
        nonlocal read
        for seq in range(1, 4001):
            read += 1
            yield frame(TextChunk(request_id="r", seq=seq, text="x" * 100))

    sent: list[bytes] = []

    async def receive() -> dict[str, Any]:
        await asyncio.Event().wait()
        return {}

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.body" and message["body"]:
            if not sent:
                await release.wait()  # the client reads nothing until released
            sent.append(message["body"])

    scope = {"type": "http", "asgi": {"version": "3.0", "spec_version": "2.4"}}
    writing = asyncio.create_task(sse_response(many())(scope, receive, send))
    for _ in range(50):
        await asyncio.sleep(0)
    held = read
    release.set()
    await writing
    assert held < 4000  # the reader waited for room instead of reading everything into memory
    assert [int(e["id"]) for e in _parsed(b"".join(sent))] == list(range(1, 4001))


async def test_a_client_that_leaves_while_the_buffer_is_full_closes_the_parts_before_the_response_ends():
    """The parts' way out (pausing a run whose client left) runs as the response ends, not at collection."""
    closed: list[str] = []

    async def many() -> AsyncIterator[bytes]:
        try:
            for seq in range(1, 4001):
                yield frame(TextChunk(request_id="r", seq=seq, text="x" * 100))
        finally:
            closed.append("parts")

    left = asyncio.Event()

    async def receive() -> dict[str, Any]:
        await left.wait()
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.body" and message["body"]:
            await asyncio.Event().wait()  # the client reads nothing, then leaves

    scope = {"type": "http", "asgi": {"version": "3.0", "spec_version": "2.3"}}  # it listens for disconnects
    writing = asyncio.create_task(sse_response(many())(scope, receive, send))
    for _ in range(50):
        await asyncio.sleep(0)
    left.set()
    await asyncio.wait_for(writing, 10)
    assert closed == ["parts"]
