"""``GET /metrics`` after a mixed load: what Prometheus reads equals what the clients saw.

A real server (uvicorn on a loopback port, in this process so it starts in a moment, with a meter
provider of its own) runs the demos of three protocols (triggered_phase refuses a repeated call,
goal_pursuit runs its tools, agent_network is stopped by its step budget), refuses a bad request,
replays a run, and streams a slow run whose client leaves half-way (the run pauses; it is resumed).
The scrape is parsed with ``prometheus_client``'s own parser, and each metric is compared with the
events. A ``phasegraph serve`` with two workers answers every scrape for both of them, with the names,
labels and help texts the single-process server has, and keeps a killed worker's counts.
"""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from uuid import uuid4

import httpx
import pytest
import uvicorn
from fastapi.testclient import TestClient
from prometheus_client.metrics_core import Metric
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample
from pydantic import SecretStr

from phasegraph.nodes import telemetry
from phasegraph.nodes.events import BudgetExhaustedEvent, DuplicateToolCall, Event, ToolResultEvent
from phasegraph.nodes.models import DEMO_WORKSPACE
from phasegraph.nodes.settings import ServerSettings
from phasegraph.server.app import create_app
from tests.graphs.test_agent_network import QUESTION
from tests.processes import free_port
from tests.server.conftest import slow_script, stream
from tests.server.test_goal_pursuit import GOAL
from tests.server.test_workers import MAX_STARTS, _all_started, _owners, _pid, _workers

RUN = "/api/runs/{}/stream"
#: The route template the native streams are counted under.
RUN_ROUTE = "/api/runs/{protocol}/stream"
#: How long the server may take to start, to stop, or to notice a client that left.
SETTLE_SECONDS = 10
#: The slow run's model: a tool call streamed in pieces far apart (its stream stays open for seconds,
#: the scrape beside it takes a fraction of one), then an answer.
SLOW = {
    "turns": [
        {"content": "", "tool_calls": [{"name": "list_files", "args": {"path": "docs"}}]},
        {"content": "Done."},
    ],
    "chunk_delay_ms": 400,
}
#: Labels (the OpenTelemetry attributes, with underscores for dots).
PROTOCOL, OUTCOME, TOOL = "phasegraph_protocol", "phasegraph_outcome", "gen_ai_tool_name"
#: Scrapes in a row that must each count every worker (with one worker answering, some of 12 would not).
SCRAPES = 12
#: The demo runs: request id, protocol, body.
DEMOS: list[tuple[str, str, dict[str, Any]]] = [
    ("tp", "triggered_phase", {"message": "Summarise the roadmap."}),
    ("gp", "goal_pursuit", {"message": GOAL}),
    ("an", "agent_network", {"message": QUESTION, "settings": {"max_steps": 2}}),
]


@dataclass
class Load:
    """What the clients saw of the load, and the scrapes taken during and after it."""

    protocols: dict[str, str]  # request id -> protocol
    events: dict[str, list[Event]] = field(default_factory=dict)  # request id -> every event it has
    status: dict[str, str] = field(default_factory=dict)  # request id -> its status at the end
    paused: str = ""  # the slow request's status once its client left
    while_streaming: list[Sample] = field(default_factory=list)  # scraped with the slow stream open
    after: list[Sample] = field(default_factory=list)  # scraped at the end

    def seen(self) -> list[Event]:
        """Every event of every request."""
        return [event for events in self.events.values() for event in events]


def _scrape(client: httpx.Client) -> list[Sample]:
    answer = client.get("/metrics")
    assert answer.status_code == 200, answer.text
    assert answer.headers["content-type"].startswith("text/plain; version=")
    return [s for family in text_string_to_metric_families(answer.text) for s in family.samples]


def _settled(client: httpx.Client) -> list[Sample]:
    """A scrape once no stream is counted open (a client reads a stream's end just before it is)."""
    deadline = time.monotonic() + SETTLE_SECONDS
    while _total(samples := _scrape(client), "phasegraph_streams_active"):
        assert time.monotonic() < deadline, "a stream stayed counted after it closed"
        time.sleep(0.05)
    return samples


def _total(samples: list[Sample], name: str, **labels: str) -> float:
    """The sum of the samples called ``name`` whose labels include ``labels``."""
    return sum(s.value for s in samples if s.name == name and labels.items() <= s.labels.items())


def _by(samples: list[Sample], name: str, *keys: str) -> dict[tuple[str, ...], float]:
    """The non-zero samples called ``name``, summed by the values of their labels ``keys``."""
    counted: dict[tuple[str, ...], float] = {}
    for s in samples:
        if s.name == name and s.value:
            key = tuple(s.labels[key] for key in keys)
            counted[key] = counted.get(key, 0) + s.value
    return counted


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    """The server's address, and the slow model it allows (for the stream its client leaves)."""
    folder = tmp_path_factory.mktemp("metrics")
    slow = folder / "slow.json"
    slow.write_text(json.dumps(SLOW), encoding="utf-8")
    telemetry.use_metric_reader()  # a meter provider of its own: every count starts at zero
    settings = ServerSettings(
        checkpointer=f"sqlite:{folder / 'state.db'}",
        workspace=str(DEMO_WORKSPACE),
        allowed_models=f"scripted:{slow}",
    )
    config = uvicorn.Config(
        create_app(settings), host="127.0.0.1", port=free_port(), log_level="warning",
        timeout_graceful_shutdown=SETTLE_SECONDS,
    )  # fmt: skip
    served = uvicorn.Server(config)
    thread = threading.Thread(target=served.run, name="metrics-server", daemon=True)
    thread.start()
    deadline = time.monotonic() + SETTLE_SECONDS
    while not served.started:
        assert thread.is_alive() and time.monotonic() < deadline, "the server did not start"
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{config.port}", f"scripted:{slow}"
    finally:
        served.should_exit = True
        thread.join(SETTLE_SECONDS)


@pytest.fixture(scope="module")
def load(server: tuple[str, str]) -> Load:
    """Run the mixed load once; the tests below read what it left."""
    url, slow = server
    load = Load(protocols={rid: protocol for rid, protocol, _ in DEMOS} | {"slow": "triggered_phase"})
    with httpx.Client(base_url=url, timeout=60) as client:
        for rid, protocol, body in DEMOS:
            load.events[rid] = stream(client, "POST", RUN.format(protocol), json={**body, "requestId": rid})
        # Refused before any run starts: no run is counted for it.
        refused = client.post(RUN.format("unified"), json={"message": "hi", "settings": {"max_steps": 3}})
        assert refused.status_code == 400, refused.text
        # A replay: a stream of another route, which runs nothing.
        assert stream(client, "GET", "/api/requests/tp/stream") == load.events["tp"]
        body = {"message": "Summarise the roadmap.", "model": slow, "requestId": "slow"}
        _settled(client)  # the streams above are counted closed: only the next one is open below
        with client.stream("POST", RUN.format("triggered_phase"), json=body) as response:
            assert response.status_code == 200
            # Held, not dropped: a dropped line iterator is collected at once, and httpx then closes
            # the connection, so the server would see the client leave before the scrape below.
            lines = response.iter_lines()
            next(line for line in lines if line.startswith("data:"))
            load.while_streaming = _scrape(client)
        # The client left: the run pauses, and its stream is closed.
        deadline = time.monotonic() + SETTLE_SECONDS
        while client.get("/api/requests/slow").json()["status"] == "running":
            assert time.monotonic() < deadline, "the run went on after its client left"
            time.sleep(0.05)
        _settled(client)
        load.paused = client.get("/api/requests/slow").json()["status"]
        stream(client, "POST", "/api/requests/slow/resume")  # a resumed run, to its end
        for rid in load.protocols:  # every event of each request, both segments of the resumed one
            load.events[rid] = stream(client, "GET", f"/api/requests/{rid}/stream")
            load.status[rid] = client.get(f"/api/requests/{rid}").json()["status"]
        load.after = _settled(client)
    return load


def test_the_load_is_what_the_metrics_should_show(load: Load):
    # The demos ran as the tests below assume: otherwise they would compare nothing.
    assert load.paused == "paused"
    assert load.status == {"tp": "completed", "gp": "completed", "an": "failed", "slow": "completed"}
    kinds = Counter(event.type for event in load.seen())
    assert kinds["duplicate_tool_call"] >= 1 and kinds["budget_exhausted"] == 1
    assert {event.protocol for event in load.seen() if isinstance(event, ToolResultEvent)} == {
        "triggered_phase", "goal_pursuit", "agent_network"
    }  # fmt: skip


def test_runs_started_and_ended_by_protocol_and_outcome(load: Load):
    # Three of triggered_phase: the demo, the slow run and its resumption.
    started = {("triggered_phase",): 3, ("goal_pursuit",): 1, ("agent_network",): 1}
    assert _by(load.after, "phasegraph_runs_started_total", PROTOCOL) == started
    expected = {
        ("triggered_phase", "completed"): 2, ("triggered_phase", "paused"): 1,
        ("goal_pursuit", "completed"): 1, ("agent_network", "failed"): 1,
    }  # fmt: skip
    assert _by(load.after, "phasegraph_runs_ended_total", PROTOCOL, OUTCOME) == expected
    assert _by(load.after, "phasegraph_run_duration_seconds_count", PROTOCOL, OUTCOME) == expected


def test_a_resumed_run_is_counted_as_resumed(load: Load):
    assert _by(load.after, "phasegraph_runs_started_total", PROTOCOL, "phasegraph_resumed") == {
        ("triggered_phase", "false"): 2, ("triggered_phase", "true"): 1,  # the slow one, resumed
        ("goal_pursuit", "false"): 1, ("agent_network", "false"): 1,
    }  # fmt: skip


def test_tool_calls_duplicates_and_budget_stops_are_the_events_seen(load: Load):
    results = Counter((e.protocol, e.name, e.status) for e in load.seen() if isinstance(e, ToolResultEvent))
    assert _by(load.after, "phasegraph_tool_calls_total", PROTOCOL, TOOL, "phasegraph_status") == results
    timed = _by(load.after, "phasegraph_tool_duration_seconds_count", PROTOCOL, TOOL, "phasegraph_status")
    assert timed == results
    duplicates = Counter((e.protocol, e.name) for e in load.seen() if isinstance(e, DuplicateToolCall))
    assert _by(load.after, "phasegraph_tool_duplicates_refused_total", PROTOCOL, TOOL) == duplicates
    budgets = Counter((e.protocol, e.budget) for e in load.seen() if isinstance(e, BudgetExhaustedEvent))
    assert _by(load.after, "phasegraph_budget_stops_total", PROTOCOL, "phasegraph_budget") == budgets


def test_model_tokens_and_cost_are_counted(load: Load):
    for kind in ("input", "output"):
        for protocol in ("triggered_phase", "goal_pursuit", "agent_network"):
            labels = {PROTOCOL: protocol, "gen_ai_token_type": kind, "gen_ai_provider_name": "scripted"}
            assert _total(load.after, "gen_ai_client_token_usage_count", **labels) > 0, labels
            assert _total(load.after, "gen_ai_client_token_usage_sum", **labels) > 0, labels
    cost = [s for s in load.after if s.name.startswith("phasegraph_model_cost")]
    assert cost and sum(s.value for s in cost) > 0
    assert _total(load.after, "gen_ai_client_operation_duration_seconds_count") > 0


def test_streams_are_counted_while_open_and_not_after(load: Load):
    assert _by(load.while_streaming, "phasegraph_streams_active", "http_route") == {(RUN_ROUTE,): 1}
    assert _total(load.after, "phasegraph_streams_active") == 0
    # Each route that streamed is there, back at zero (the native start, the replay, the resume).
    routes = {s.labels["http_route"] for s in load.after if s.name == "phasegraph_streams_active"}
    assert routes == {RUN_ROUTE, "/api/requests/{request_id}/stream", "/api/requests/{request_id}/resume"}


def test_event_log_writes_are_timed(load: Load):
    assert _total(load.after, "phasegraph_eventlog_write_duration_seconds_count") > 0
    assert _total(load.after, "phasegraph_eventlog_write_duration_seconds_sum") > 0


def test_metrics_need_a_token_for_every_project(tmp_path: Path):
    settings = ServerSettings(
        checkpointer=f"sqlite:{tmp_path / 'state.db'}", workspace=str(DEMO_WORKSPACE),
        api_tokens=SecretStr("alpha:projA;root:*"),
    )  # fmt: skip
    with TestClient(create_app(settings)) as client:
        anonymous = client.get("/metrics")
        assert anonymous.status_code == 401 and anonymous.headers["www-authenticate"] == "Bearer"
        assert anonymous.json()["error"] == "unauthorized"
        assert client.get("/metrics", headers={"Authorization": "Bearer nobody"}).status_code == 401
        scoped = client.get("/metrics", headers={"Authorization": "Bearer alpha"})
        assert scoped.status_code == 403 and scoped.json()["error"] == "forbidden"
        root = client.get("/metrics", headers={"Authorization": "Bearer root"})
        assert root.status_code == 200 and root.headers["content-type"].startswith("text/plain; version=")
        list(text_string_to_metric_families(root.text))  # Prometheus text, whatever was counted so far
        documented = client.get("/openapi.json").json()["paths"]["/metrics"]["get"]
        assert documented["security"] == [{"bearer": []}]
        answers = documented["responses"]
        assert list(answers["200"]["content"]) == ["text/plain"]
        assert list(answers["401"]["content"]) == list(answers["403"]["content"]) == ["application/json"]


def _families(url: str) -> list[Metric]:
    """One scrape, on a connection of its own (so whichever worker accepts first answers it)."""
    answer = httpx.get(f"{url}/metrics", timeout=30)
    assert answer.status_code == 200, answer.text
    return list(text_string_to_metric_families(answer.text))


def _samples(url: str) -> list[Sample]:
    return [s for family in _families(url) for s in family.samples]


def test_every_scrape_of_a_server_with_workers_counts_them_all(
    servers, server: tuple[str, str], load: Load, tmp_path: Path
):
    database, temporary = f"sqlite:{tmp_path / 'workers.db'}", tmp_path / "tmp"
    temporary.mkdir()
    (tmp_path / "slow").mkdir()
    slow = slow_script(tmp_path / "slow", delay_ms=2000)  # the run still streams after the scrapes below
    served = _all_started(servers(PHASEGRAPH_WORKERS="2", PHASEGRAPH_CHECKPOINTER=database,
                                  PHASEGRAPH_ALLOWED_MODELS=slow, TMPDIR=str(temporary)))  # fmt: skip
    workers = _workers(served)
    # The supervisor's own folder for the workers' metrics, private.
    (folder,) = temporary.glob("phasegraph-metrics-*")
    assert folder.stat().st_mode & 0o777 == 0o700

    # Runs, each on a connection of its own, until both workers drove some: neither counted them all.
    tag, ids = uuid4().hex[:8], list[str]()
    while len(ids) < MAX_STARTS:
        ids.append(f"m-{tag}-{len(ids)}")
        with httpx.Client(base_url=served.url) as client:
            body = {"message": "Summarise the roadmap.", "requestId": ids[-1]}
            assert stream(client, "POST", RUN.format("triggered_phase"), json=body)[-1].type == "final"
        if len(ids) >= 3 and {_pid(owner) for owner in _owners(database, ids).values()} == set(workers):
            break
    assert {_pid(owner) for owner in _owners(database, ids).values()} == set(workers), "one worker ran all"
    deadline = time.monotonic() + SETTLE_SECONDS  # every run's stream is counted closed by its worker
    while _total(_samples(served.url), "phasegraph_streams_active"):
        assert time.monotonic() < deadline, "a stream stayed counted after it closed"
        time.sleep(0.05)
    for _ in range(SCRAPES):
        samples = _samples(served.url)
        assert _total(samples, "phasegraph_runs_started_total") == len(ids)
        assert _total(samples, "phasegraph_runs_ended_total", phasegraph_outcome="completed") == len(ids)

    # The same names, kinds, help texts, label names and bucket bounds as the single-process server's.
    single = {family.name: family for family in _families(server[0])}
    for family in _families(served.url):
        alone = single[family.name]
        assert (family.type, family.documentation) == (alone.type, alone.documentation), family.name
        for sample in family.samples:
            assert set(sample.labels) in [set(s.labels) for s in alone.samples if s.name == sample.name]
            if "le" in sample.labels:
                assert sample.labels["le"] in {s.labels["le"] for s in alone.samples if s.name == sample.name}

    # A stream open on one worker counts on every scrape; once that worker is killed and replaced, it
    # counts no more, and what the dead worker counted stays counted.
    held = f"h-{tag}"
    body = {"message": "Summarise the roadmap.", "model": slow, "requestId": held}
    with (
        httpx.Client(base_url=served.url, timeout=60) as client,
        client.stream("POST", RUN.format("triggered_phase"), json=body) as response,
    ):
        lines = response.iter_lines()
        next(line for line in lines if line.startswith("data:"))
        for _ in range(SCRAPES):
            samples = _samples(served.url)
            assert _total(samples, "phasegraph_streams_active") == 1
            assert _total(samples, "phasegraph_runs_started_total") == len(ids) + 1
        victim = _pid(_owners(database, [held])[held])
        os.kill(victim, signal.SIGKILL)
    deadline = time.monotonic() + 60
    while len(replaced := set(_workers(served))) < 2 or victim in replaced:
        assert time.monotonic() < deadline, "the killed worker was not replaced"
        time.sleep(0.2)
    started = []
    for _ in range(SCRAPES):
        samples = _samples(served.url)
        assert _total(samples, "phasegraph_streams_active") == 0
        started.append(_total(samples, "phasegraph_runs_started_total"))
    assert started[0] >= len(ids) + 1 and started == sorted(started), started

    served.stop()  # the supervisor removes the folder as it ends
    assert not folder.exists()
