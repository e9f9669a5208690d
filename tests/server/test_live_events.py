"""Reconnecting with ``Last-Event-ID`` joins a running run's live events with no gap and no repeat."""

import httpx

from phasegraph.nodes.events import Event, parse_event
from tests.server.conftest import WORDS, allowing_scripts, scripts, stream, unique

RUN = "/api/runs/triggered_phase/stream"
#: The run's model streams this many words 30 ms apart and calls no tool (the ``words`` script).
CHUNKS = WORDS


def _first_event(response: httpx.Response) -> Event | None:
    """The next event of an SSE response, or None when the server closes it first."""
    assert response.status_code == 200, response.read()
    for line in response.iter_lines():
        if line.startswith("data:"):  # event: and id: repeat it
            return parse_event(line.removeprefix("data:"))
    return None


def test_reconnecting_after_every_event_of_a_running_run_misses_and_repeats_nothing(
    shared_servers, tmp_path_factory
):
    """Each reconnect reads one event and hangs up, so the replay-then-live handoff runs at every seq."""
    server, words = shared_servers(**allowing_scripts(tmp_path_factory)), scripts(tmp_path_factory)["words"]
    request_id = unique("reconnects")
    follow = f"/api/requests/{request_id}/stream"
    with httpx.Client(base_url=server.url, timeout=30) as client:
        body = {"message": "Go", "requestId": request_id, "onDisconnect": "continue", "model": words}
        with client.stream("POST", RUN, json=body) as response:
            first = _first_event(response)
        assert first is not None and first.seq == 1
        events, statuses = [first], []
        while events[-1].type != "final" and len(events) < 4 * CHUNKS:
            statuses.append(client.get(f"/api/requests/{request_id}").json()["status"])
            after = events[-1].seq
            with client.stream("GET", follow, headers={"Last-Event-ID": str(after)}) as response:
                event = _first_event(response)
            assert event is not None, f"the stream after seq {after} closed before the final event"
            assert event.seq == after + 1, f"after Last-Event-ID {after} came seq {event.seq}"
            events.append(event)
        assert events[-1].type == "final" and not [e for e in events if e.type == "error"]
        assert statuses[0] == "running"  # the first reconnects joined the run while it was going
        assert stream(client, "GET", follow, headers={"Last-Event-ID": str(events[-1].seq)}) == []
        everything = stream(client, "GET", follow)
    assert [e.to_json() for e in events] == [e.to_json() for e in everything]
    print(f"\n{len(events) - 1} reconnects, {statuses.count('running')} while the run was going")
