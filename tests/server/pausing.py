"""Driving a protocol's offline demo over HTTP: to each pause point, through crashes (the server tests)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from itertools import pairwise
from typing import Any

import httpx

from phasegraph.nodes.events import Event, Paused, Resumed, ToolCall, ToolResultEvent
from tests.server.conftest import Server, read_sse, stream

#: Where a paused segment stopped: (graph node, phase index).
Stop = tuple[str, int | None]


@dataclass(frozen=True)
class PausingDemo:
    """A protocol's demo as the pause tests drive it."""

    route: str  # its streaming route
    body: Callable[[str], dict[str, Any]]  # the start body of a request id
    every_pause_point: list[Stop]  # in order, where it stops when asked to pause as each segment starts
    stopped_after: Callable[[list[Event]], Stop]  # told by a paused segment's last protocol event

    def with_fields(self, **fields: Any) -> PausingDemo:
        """The same demo with ``fields`` added to its start bodies (a project of its own, another model)."""
        body = self.body
        return replace(self, body=lambda request_id: {**body(request_id), **fields})

    def segment(self, client: httpx.Client, request_id: str, *, start: bool = False) -> list[Event]:
        """Start or resume the demo and ask it to pause at once: it stops at its next pause point.

        The pause is asked for as soon as the response starts, before its first event: the run is
        driven from then on, and the next pause point may be one fast tool call away.
        """
        url, body = (
            (self.route, self.body(request_id)) if start else (f"/api/requests/{request_id}/resume", {})
        )
        with client.stream("POST", url, json=body, timeout=60) as response:
            assert response.status_code == 200, response.read()
            asked = client.post(f"/api/requests/{request_id}/pause").status_code
            frames = read_sse(response)
        events = [event for _, _, event in frames]
        if isinstance(events[-1], Paused):
            assert asked == 202 and events[-1].reason == "requested"
        return events

    def pause_everywhere(self, clients: list[httpx.Client], request_id: str) -> list[list[Event]]:
        """The demo stopped at every pause point; segment i goes through ``clients[i % len(clients)]``."""
        segments = [self.segment(clients[0], request_id, start=True)]
        while isinstance(segments[-1][-1], Paused):
            assert len(segments) <= len(self.every_pause_point), "the run does not end"
            segments.append(self.segment(clients[len(segments) % len(clients)], request_id))
        return segments

    def pause_and_replay(self, client: httpx.Client, request_id: str, tools: list[str]) -> list[list[Event]]:
        """Pause at every point to the end; check the stops, replays across pauses and traced tools."""
        segments = self.pause_everywhere([client], request_id)
        refused = client.post(f"/api/requests/{request_id}/pause")
        replayed = stream(client, "GET", f"/api/requests/{request_id}/stream")
        first_pause = {"Last-Event-ID": str(segments[0][-1].seq)}
        after_first_pause = stream(client, "GET", f"/api/requests/{request_id}/stream", headers=first_pause)
        self.check_stops(segments)
        assert refused.status_code == 409 and "completed" in refused.json()["message"]
        events = [e for segment in segments for e in segment]
        assert [e.to_json() for e in replayed] == [e.to_json() for e in events]  # across every pause
        assert [e.seq for e in after_first_pause] == [e.seq for e in events[len(segments[0]) :]]
        assert tools_traced(client, request_id) == tools
        return segments

    def check_stops(self, segments: list[list[Event]]) -> None:
        """Every segment but the last stopped at a pause point, in the run's order, and every kind occurs.

        A resumed run reaches the next pause point within one fast step, so a pause asked for at once
        may, on a loaded machine, arrive just after it: that pause lands on the following point.
        """
        stops = [self.stopped_after(segment) for segment in segments[:-1]]
        points = iter(self.every_pause_point)
        assert all(stop in points for stop in stops), stops  # a subsequence, in order
        kinds = {node for node, _ in self.every_pause_point}
        assert stops[0] == self.every_pause_point[0] and {node for node, _ in stops} == kinds, stops


def check_resumes(segments: list[list[Event]], where: Callable[[Event], tuple[Any, ...]]) -> list[Event]:
    """Each resume follows its pause with the next seq and the checkpoint's progress; returns all events."""
    for before, after in pairwise(segments):
        paused, resumed = before[-1], after[0]
        assert isinstance(paused, Paused) and isinstance(resumed, Resumed)
        assert resumed.seq == paused.seq + 1 and not resumed.fork and resumed.reason == "requested"
        # the server's own events carry the protocol's progress, read from the checkpoint
        assert where(paused) == where(resumed) == where(before[-2])
    events = [e for segment in segments for e in segment]
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    return events


def tools_traced(client: httpx.Client, request_id: str) -> list[str]:
    """The tools a request's trace shows called, in order (a finished call replayed after a crash once)."""
    trace = client.get(f"/api/requests/{request_id}/trace").json()
    return [
        t["details"]["name"] for t in trace if t["type"] == "tool_call" and not t["details"].get("replayed")
    ]


#: Longest wait for a server to save a checkpoint or take a run over.
WAIT_SECONDS = 30


def wait_for_checkpoint(client: httpx.Client, request_id: str, node: str, phase_index: int) -> None:
    """Until the run's checkpoint after ``node`` at ``phase_index`` is saved."""
    deadline = time.monotonic() + WAIT_SECONDS
    url = f"/api/threads/{request_id}/checkpoints"
    while not any((c["node"], c["phaseIndex"]) == (node, phase_index) for c in client.get(url).json()):
        assert time.monotonic() < deadline, f"{node} ({phase_index}) was never saved"
        time.sleep(0.02)


def wait_until_not_running(client: httpx.Client, request_id: str) -> str:
    """The status a run has once a replica stopped driving it (paused as crashed, say)."""
    deadline = time.monotonic() + WAIT_SECONDS
    while (status := client.get(f"/api/requests/{request_id}").json()["status"]) == "running":
        assert time.monotonic() < deadline, "no replica took the run over"
        time.sleep(0.1)
    return str(status)


def wait_for(condition: Callable[[], bool], what: str) -> None:
    """Until ``condition()`` holds (``what`` says what never happened)."""
    deadline = time.monotonic() + WAIT_SECONDS
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.05)


def checkpoint_values(client: httpx.Client, thread_id: str, checkpoint_id: str) -> dict[str, Any]:
    """The state a checkpoint of the thread saved."""
    answer = client.get(f"/api/threads/{thread_id}/checkpoints/{checkpoint_id}").json()
    assert answer["checkpointId"] == checkpoint_id
    values: dict[str, Any] = answer["values"]
    return values


def latest_values(client: httpx.Client, thread_id: str) -> dict[str, Any]:
    """The state the thread's newest checkpoint saved (the end of the run)."""
    newest = client.get(f"/api/threads/{thread_id}/checkpoints").json()[-1]
    answer = client.get(f"/api/threads/{thread_id}/checkpoints/{newest['checkpointId']}").json()
    assert answer["checkpointId"] == newest["checkpointId"] and answer["next"] == []
    values: dict[str, Any] = answer["values"]
    return values


def tool_events(events: list[Event]) -> tuple[list[ToolCall], list[ToolResultEvent]]:
    """The tool calls and the tool results among ``events``."""
    calls = [e for e in events if isinstance(e, ToolCall)]
    return calls, [e for e in events if isinstance(e, ToolResultEvent)]


@dataclass
class Takeover:
    """A run whose driver was killed, as the server that took it over shows it."""

    crashed: Paused  # the pause the takeover recorded
    resumed: Resumed  # how the resume began
    events: list[Event]  # the whole request: what the killed driver sent, the pause, the resumed rest
    rest: list[Event]  # the resumed rest
    traced: list[str]  # the tools the trace shows called
    values: dict[str, Any]  # the state at the end


def take_over(other: Server, request_id: str, before: list[Event]) -> Takeover:
    """Wait until ``other`` took the killed run over (paused as crashed), resume it there, check the seams.

    ``before`` are the events the killed driver sent; the replay must repeat them exactly, then the
    ``crashed`` pause, then a ``crashed`` resume, with one gapless seq over the whole request.
    """
    with httpx.Client(base_url=other.url) as client:
        assert wait_until_not_running(client, request_id) == "paused"
        replayed = stream(client, "GET", f"/api/requests/{request_id}/stream")
        rest = stream(client, "POST", f"/api/requests/{request_id}/resume", json={})
        traced = tools_traced(client, request_id)
        values = latest_values(client, request_id)
    crashed, resumed = replayed[-1], rest[0]
    assert [e.to_json() for e in replayed[:-1]] == [e.to_json() for e in before]
    assert isinstance(crashed, Paused) and crashed.reason == "crashed" and crashed.seq == before[-1].seq + 1
    assert isinstance(resumed, Resumed) and resumed.reason == "crashed" and not resumed.fork
    assert resumed.seq == crashed.seq + 1
    events = replayed + rest
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    return Takeover(crashed, resumed, events, rest, traced, values)
