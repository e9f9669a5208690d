"""The server under concurrent load, and followers on another replica woken by Postgres."""

from __future__ import annotations

import asyncio
import json
import math
import os
import statistics
import threading
import time
from pathlib import Path
from uuid import uuid4

import httpx
import pytest

from phasegraph.nodes.events import Event, parse_event
from tests.server.conftest import needs_postgres, read_sse, stream

RUN = "/api/runs/triggered_phase/stream"
LOAD_RUNS = 100
LOAD_SECONDS = 180  # the whole load test stops by itself after this


def _script(directory: Path, chunks: int, delay_ms: int) -> str:
    """A model that streams ``chunks`` words ``delay_ms`` apart and calls no tool."""
    path = directory / f"text-{chunks}x{delay_ms}.json"
    answer = " ".join(f"word{i}" for i in range(chunks))
    path.write_text(json.dumps({"turns": [{"content": answer}], "repeat_last": True,
                                "chunk_delay_ms": delay_ms}), encoding="utf-8")  # fmt: skip
    return f"scripted:{path}"


async def _one_run(client: httpx.AsyncClient, request_id: str) -> tuple[list[Event], float]:
    started = time.perf_counter()
    events: list[Event] = []
    body = {"message": "Summarise the roadmap.", "requestId": request_id}
    async with client.stream("POST", RUN, json=body) as response:
        assert response.status_code == 200, await response.aread()
        async for line in response.aiter_lines():  # to the end: the server closes the stream
            if line.startswith("data:"):
                events.append(parse_event(line.removeprefix("data:")))
    return events, time.perf_counter() - started


def test_a_hundred_concurrent_runs_each_get_every_event_once_and_end_with_final(servers, tmp_path: Path):
    server = servers(PHASEGRAPH_MODEL=_script(tmp_path, 10, 20))

    async def load() -> tuple[list[tuple[list[Event], float]], float]:
        limits = httpx.Limits(max_connections=LOAD_RUNS + 4, max_keepalive_connections=LOAD_RUNS + 4)
        async with httpx.AsyncClient(base_url=server.url, limits=limits, timeout=LOAD_SECONDS) as client:
            started = time.perf_counter()
            runs = [_one_run(client, f"load-{i}") for i in range(LOAD_RUNS)]
            try:
                results = await asyncio.wait_for(asyncio.gather(*runs), LOAD_SECONDS)
            except TimeoutError:
                pytest.fail(f"{LOAD_RUNS} concurrent runs did not all end within {LOAD_SECONDS} s")
            seconds = time.perf_counter() - started
            statuses = await asyncio.gather(
                *(client.get(f"/api/requests/load-{i}") for i in range(LOAD_RUNS))
            )
        assert {s.json()["status"] for s in statuses} == {"completed"}
        return results, seconds

    results, seconds = asyncio.run(load())
    for events, _ in results:
        seqs = [e.seq for e in events]
        assert seqs == list(range(1, len(seqs) + 1)), seqs  # none lost, none repeated
        assert events[-1].type == "final" and not [e for e in events if e.type == "error"]
    assert len({len(events) for events, _ in results}) == 1  # every run the same events
    latencies = sorted(latency for _, latency in results)
    p99 = latencies[math.ceil(0.99 * len(latencies)) - 1]
    print(f"\n{LOAD_RUNS} concurrent runs: {seconds:.2f} s, {LOAD_RUNS / seconds:.1f} runs/s, "
          f"p50 {statistics.median(latencies):.3f} s, p99 {p99:.3f} s")  # fmt: skip


@needs_postgres
def test_a_follower_on_another_replica_gets_every_event_soon_after_the_driver_commits(
    servers, tmp_path: Path
):
    env = {
        "PHASEGRAPH_MODEL": _script(tmp_path, 20, 50),
        "PHASEGRAPH_CHECKPOINTER": os.environ["PHASEGRAPH_TEST_POSTGRES_URL"],
    }
    replica_a, replica_b = servers(**env), servers(**env)
    request_id = f"req-{uuid4().hex}"
    seen_a: dict[int, float] = {}
    seen_b: dict[int, float] = {}
    first = threading.Event()
    events_b: list[Event] = []

    def follow_on_b() -> None:
        first.wait(30)
        with (
            httpx.Client(base_url=replica_b.url) as client,
            client.stream("GET", f"/api/requests/{request_id}/stream", timeout=60) as response,
        ):
            assert response.status_code == 200

            def on_event(event: Event) -> None:
                seen_b[event.seq] = time.perf_counter()
                events_b.append(event)

            read_sse(response, on_event=on_event)

    follower = threading.Thread(target=follow_on_b)
    follower.start()
    with (
        httpx.Client(base_url=replica_a.url) as client,
        client.stream("POST", RUN, json={"message": "Go", "requestId": request_id}, timeout=60) as response,
    ):

        def on_event(event: Event) -> None:
            seen_a[event.seq] = time.perf_counter()  # A's client sees an event right after A commits it
            first.set()

        events_a = [event for _, _, event in read_sse(response, on_event=on_event)]
    follower.join(60)
    assert not follower.is_alive()
    assert [e.seq for e in events_b] == [e.seq for e in events_a]  # every event, once, in order
    assert [e.to_json() for e in events_b] == [e.to_json() for e in events_a]
    assert events_b[-1].type == "final"
    # Live events only: committed after B was following (those B replayed when it joined were older).
    joined = min(seen_b.values())
    live = [seq for seq in seen_b if seen_a[seq] > joined]
    lags = sorted((seen_b[seq] - seen_a[seq]) * 1000 for seq in live)
    assert lags, "replica B joined after the run ended: nothing was live"
    print(f"\nfollower on replica B behind the driver's client on replica A, {len(lags)} live events: "
          f"p50 {statistics.median(lags):.1f} ms, max {max(lags):.1f} ms")  # fmt: skip


def test_a_run_is_completed_when_its_final_event_arrives_and_a_hang_up_then_changes_nothing(
    servers, tmp_path: Path
):
    """The final event and the completed status are one commit: a client that reads ``final`` and
    hangs up at once (as many do) must not leave the run running, paused or failed."""
    server = servers(PHASEGRAPH_MODEL=_script(tmp_path, 3, 5))
    with httpx.Client(base_url=server.url) as client:
        for i in range(5):
            body = {"message": "Go", "requestId": f"hang-up-{i}"}
            with client.stream("POST", RUN, json=body, timeout=30) as response:
                events = [e for _, _, e in read_sse(response, stop_after="final")]  # then it hangs up
                at_final = client.get(f"/api/requests/hang-up-{i}").json()["status"]
            assert at_final == "completed"
            assert [e.type for e in events][-1] == "final"
        time.sleep(0.5)  # room for a wrongly triggered pause to land
        for i in range(5):
            assert client.get(f"/api/requests/hang-up-{i}").json()["status"] == "completed"
            replay = stream(client, "GET", f"/api/requests/hang-up-{i}/stream")
            assert replay[-1].type == "final" and [e.seq for e in replay] == list(range(1, len(replay) + 1))
