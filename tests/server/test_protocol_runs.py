"""What every protocol's demo does over real HTTP, each one test parametrised over the protocols.

SSE frames are parsed back into the event union. A stream is dropped and followed again with
Last-Event-ID; a run is paused at every pause point and resumed, on one server or by two replicas in
turns; a run is cancelled while it runs and while it is paused; a run paused after its first tool is
SIGKILLed and resumed on a restarted server; a finished run shows its checkpoints and is forked after
its first tool. What the protocols share is in each test; what one adds (its demo, its pause points,
what its state, ledgers and side effects must hold) is in its ``Case`` and in the test's table of
per-protocol checks beside it. The protocols' own modules hold their helpers and the tests only one
protocol has.

The tests that only start runs and read them share this module's servers (``server``; ``slow_server``
on agent_network's slow workspace; two Postgres ``replicas``), so each names its requests and projects
with ``unique``; a test that kills a server starts its own (``servers``).
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from phasegraph.graphs.run import RunResult
from phasegraph.nodes.events import Cancelled, Event, Final, Paused, Resumed, ToolCall, ToolResultEvent
from phasegraph.tools.resources import ResourceRepository, bundled_world
from tests.graphs.test_goal_pursuit import CHAPTER, COMPASS, MIRA
from tests.server import test_agent_network as network
from tests.server import test_api as api
from tests.server import test_goal_pursuit as pursuit
from tests.server import test_planner as planner
from tests.server import test_xml_contract as xml
from tests.server.conftest import Server, demo_server, needs_postgres, slow_script, stream, unique
from tests.server.pausing import (
    PausingDemo,
    Stop,
    checkpoint_values,
    latest_values,
    tool_events,
    tools_traced,
    wait_for,
)

#: What the command line of a stdio demo MCP server (xml_contract's services) holds.
DEMO_SERVICE = xml.DEMO_SERVICE


@dataclass
class Ran:
    """A demo request run to its end through pauses, for the checks of what it left behind."""

    client: httpx.Client  # open on a server that ran it
    server: Server  # (its database and folders)
    request_id: str
    project: str
    events: list[Event]  # the whole request


@dataclass(frozen=True)
class Case:
    """A protocol's demo as these tests drive it (the helpers are its own module's)."""

    prefix: str  # of its request ids
    demo: PausingDemo  # its route, start body, pause points and how a paused segment tells where it stopped
    tools: list[str]  # the tools the demo calls, in order
    later_tools: list[str]  # those it calls after the pause point that follows its first tools
    where: Callable[[Event], tuple[Any, ...]]  # an event's place in the run, as its checkpoint has it
    check_resumed: Callable[[list[list[Event]], RunResult], object]  # gapless seq, its events, no repeats
    reference: Callable[[Path], RunResult]  # the demo run in this process (given a folder of its own)
    left: Callable[[Ran], None]  # what a run of the demo leaves behind, however often it paused
    services: int = 0  # the stdio demo MCP servers a run of it starts


def _left_by_network(ran: Ran) -> None:
    """The final state's execution logs hold exactly the executions streamed."""
    final = ran.events[-1]
    assert isinstance(final, Final)
    executed = network._check_tools_ran_once(ran.events)
    network._check_logs(latest_values(ran.client, ran.request_id), executed, final.answer)


def _left_by_pursuit(ran: Ran) -> None:
    """Nothing beyond its events: the bundled world is changed in memory only (see the restart test)."""


def _left_by_xml(ran: Ran) -> None:
    """No block answered twice, no call twice in the chat, each iteration logged once as training data."""
    values = latest_values(ran.client, ran.request_id)
    assert values["steps"] == 2 and len(xml._transcript(values)) == 6
    assert len(xml._transcript(values, "messages")) == 8
    calls, _ = tool_events(ran.events)
    assert calls[3].args == xml.SUBSTITUTED_ARGS  # substituted from a result read back from the checkpoint
    assert xml._iterations(Path(ran.server.env["PHASEGRAPH_DATASET_DIR"]), ran.request_id) == [1, 2]


def _left_by_planner(ran: Ran) -> None:
    """One project with its brief, and one usage row per model call: nothing was made or called twice."""
    planner._check_the_demo_built_its_project(ran.server, ran.project)
    report = planner._usage(ran.client, requestId=ran.request_id, by="operation")
    assert len(report["rows"]) == planner.DEMO_CALLS
    planner._check_sums(report)


CASES = {
    "agent_network": Case(
        prefix="an",
        demo=network.DEMO,
        tools=network.TOOLS,
        later_tools=["read_file"],  # search_files ran before its pause point
        where=network._where,
        check_resumed=network._check_resumed_without_repeats,
        reference=lambda folder: network.reference_run(),
        left=_left_by_network,
    ),
    "goal_pursuit": Case(
        prefix="gp",
        demo=pursuit.DEMO,
        tools=pursuit.TOOLS,
        later_tools=["add_chapter_note"],  # move_item ran before its pause point
        where=lambda e: (e.phase, e.phase_index, e.step),
        check_resumed=pursuit._check_resumed_without_repeats,
        reference=lambda folder: pursuit.reference_run(),
        left=_left_by_pursuit,
    ),
    "xml_contract": Case(
        prefix="xc",
        demo=xml.DEMO,
        tools=xml.TOOLS,
        later_tools=xml.TOOLS[2:],  # the parallel block's two reads ran before its pause point
        where=xml._where,
        check_resumed=xml._check_resumed_without_repeats,
        reference=xml.reference_run,
        left=_left_by_xml,
        services=1,
    ),
    "planner": Case(
        prefix="pl",
        demo=planner.DEMO,
        tools=planner.TOOLS,
        later_tools=planner.TOOLS[1:],  # the planner's own list_templates ran before its pause point
        where=planner._where,
        check_resumed=planner._check_resumed_without_repeats,
        reference=planner.reference_run,
        left=_left_by_planner,
    ),
}
#: The slow scripts of the protocols whose tests need one (each written into a folder of its own).
SLOW_SCRIPTS: dict[str, Callable[[Path], str]] = {
    "triggered_phase": slow_script,  # paced: the run is still going when a dropped stream is followed
    "xml_contract": xml._slow_script,  # a slow_echo of seconds: a cancel lands while it sleeps
}


@pytest.fixture(scope="module")
def slow_models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """The slow scripts' model specs, by protocol (a request names one: ``server`` allows them)."""
    folder = tmp_path_factory.mktemp("slow-scripts")
    specs = {}
    for protocol, write in SLOW_SCRIPTS.items():
        (folder / protocol).mkdir()
        specs[protocol] = write(folder / protocol)
    return specs


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, slow_models: dict[str, str]) -> Iterator[Server]:
    """The server of the tests that only start runs and read them back, for every protocol."""
    settings = {
        "PHASEGRAPH_TWO_STAGE_ENABLED": "true",  # triggered_phase's own route
        "PHASEGRAPH_DATASET_DIR": str(tmp_path_factory.mktemp("dataset")),  # xml_contract's training data
        "PHASEGRAPH_ALLOWED_MODELS": ",".join(slow_models.values()),
    }
    with demo_server(tmp_path_factory, "protocol-runs", **settings) as started:
        yield started


@pytest.fixture(scope="module")
def slow_workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """agent_network's slow workspace: its search_files takes a second or so there (see its module)."""
    return network.make_slow_workspace(tmp_path_factory.mktemp("slow"))


@pytest.fixture(scope="module")
def slow_server(tmp_path_factory: pytest.TempPathFactory, slow_workspace: Path) -> Iterator[Server]:
    """A server on the slow workspace, started when a test first asks for it."""
    with demo_server(tmp_path_factory, "slow-workspace", PHASEGRAPH_WORKSPACE=str(slow_workspace)) as started:
        yield started


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """goal_pursuit's story world in a folder: a server on it writes its changes back, so they outlive it."""
    root = tmp_path_factory.mktemp("world") / "world"
    shutil.copytree(bundled_world(), root)
    return root


@pytest.fixture(scope="module")
def replicas(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Server, Server]]:
    """Two replicas on the test Postgres writing training data to one folder (for needs_postgres tests)."""
    settings = {
        "PHASEGRAPH_CHECKPOINTER": os.environ["PHASEGRAPH_TEST_POSTGRES_URL"],
        "PHASEGRAPH_DATASET_DIR": str(tmp_path_factory.mktemp("replica-dataset")),
    }
    with (
        demo_server(tmp_path_factory, "replica-a", **settings) as replica_a,
        demo_server(tmp_path_factory, "replica-b", **settings) as replica_b,
    ):
        yield replica_a, replica_b


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], RunResult]:
    """A protocol's demo run in this process, made at first use: what every stream of it must reproduce."""
    runs: dict[str, RunResult] = {}

    def of(protocol: str) -> RunResult:
        if protocol not in runs:
            runs[protocol] = CASES[protocol].reference(tmp_path_factory.mktemp(f"{protocol}-in-process"))
        return runs[protocol]

    return of


def _joined(segments: list[list[Event]]) -> list[Event]:
    """A request's events, its segments one after the other."""
    return [e for segment in segments for e in segment]


# --- Last-Event-ID ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Replay:
    """A protocol's stream as the replay test drops it."""

    route: str
    body: Callable[[str], dict[str, Any]]  # the start body of a request id
    cut_after: str  # the event type the first stream is dropped after
    check: Callable[[list[Event], list[Event]], None]  # (what was read before the cut, the whole request)
    slow: bool = False  # on the protocol's slow script


def _replayed_network(head: list[Event], events: list[Event]) -> None:
    assert [e.type for e in head] == ["agent_step", "route"]
    assert [e.type for e in events] == network.DEMO_KINDS
    network._check_tools_ran_once(events)
    outputs = {e.name: e.output for e in events if isinstance(e, ToolResultEvent)}
    assert outputs["read_file"] is not None and "Linus: streaming server" in outputs["read_file"]
    assert outputs["search_files"] is not None and "docs/roadmap.md" in outputs["search_files"]


def _replayed_pursuit(head: list[Event], events: list[Event]) -> None:
    final = events[-1]
    assert isinstance(final, Final) and final.resolution is not None
    assert final.resolution["status"] == "success"
    outputs = [e.output for e in events if isinstance(e, ToolResultEvent)]
    assert outputs[0] is not None
    assert "owner 'res://character/tamsin-reed' -> 'res://character/mira-voss'" in outputs[0]


def _replayed_xml(head: list[Event], events: list[Event]) -> None:
    assert [e.type for e in head] == xml.DEMO_KINDS[:4]
    assert [e.type for e in events] == xml.DEMO_KINDS
    xml._check_tools_ran_once(events)
    outputs = {e.call_id: e.output for e in events if isinstance(e, ToolResultEvent)}
    assert outputs["1.1.1"] is not None and "Milestone 1" in outputs["1.1.1"]
    assert outputs["1.1.2"] is not None and "Linus: streaming server" in outputs["1.1.2"]
    assert (outputs["2.1.1"], outputs["2.1.2"]) == ("3", xml.SUBSTITUTED_ARGS["text"])


def _replayed_triggered(head: list[Event], events: list[Event]) -> None:
    """The slow script's two tools, each once, then its answer."""
    assert [e.name for e in events if isinstance(e, ToolCall)] == ["list_files", "read_file"]
    final = events[-1]
    assert isinstance(final, Final) and "two milestones" in final.answer


REPLAYS = {
    "agent_network": Replay(network.RUN, network._body, "route", _replayed_network),
    "goal_pursuit": Replay(pursuit.RUN, pursuit._body, "decision", _replayed_pursuit),
    "xml_contract": Replay(xml.RUN, xml._body, "xml_block", _replayed_xml),
    "triggered_phase": Replay(
        api.TWO_STAGE, lambda rid: api._body(requestId=rid), "tool_call", _replayed_triggered, slow=True
    ),
}


@pytest.mark.parametrize("protocol", list(REPLAYS))
def test_last_event_id_replays_what_was_missed_without_repeats(
    server: Server, slow_models: dict[str, str], protocol: str
):
    replay = REPLAYS[protocol]
    request_id = unique(protocol)
    body = {**replay.body(request_id), "projectId": unique("proj"), "onDisconnect": "continue"}
    body |= {"showToolOutputs": True} | ({"model": slow_models[protocol]} if replay.slow else {})
    follow = f"/api/requests/{request_id}/stream"
    with httpx.Client(base_url=server.url) as client:
        head = stream(client, "POST", replay.route, json=body, stop_after=replay.cut_after)  # then drop it
        rest = stream(client, "GET", follow, headers={"Last-Event-ID": str(head[-1].seq)})
        everything = stream(client, "GET", follow)
        nothing_after = stream(client, "GET", follow, headers={"Last-Event-ID": str(everything[-1].seq)})
        half = len(everything) // 2
        middle = stream(client, "GET", follow, headers={"Last-Event-ID": str(half)})
        past_the_end = client.get(follow, headers={"Last-Event-ID": str(everything[-1].seq + 1)})
    assert head[-1].type == replay.cut_after
    events = head + rest
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    assert [e.to_json() for e in everything] == [e.to_json() for e in events]
    assert nothing_after == []
    assert [e.to_json() for e in middle] == [e.to_json() for e in events[half:]]
    assert isinstance(events[-1], Final)
    assert past_the_end.status_code == 409 and "Last-Event-ID" in past_the_end.json()["message"]
    replay.check(head, events)


# --- Pausing at every pause point -----------------------------------------------------------------------


@pytest.mark.parametrize("protocol", list(CASES))
def test_pausing_at_every_pause_point_then_resuming_runs_each_tool_once(
    server: Server, reference: Callable[[str], RunResult], protocol: str
):
    case = CASES[protocol]
    request_id, project = unique(case.prefix), unique("proj")
    with httpx.Client(base_url=server.url) as client:
        segments = case.demo.with_fields(projectId=project).pause_and_replay(client, request_id, case.tools)
        case.check_resumed(segments, reference(protocol))
        case.left(Ran(client, server, request_id, project, _joined(segments)))
    # each segment closed the stdio demo server it started
    wait_for(lambda: not server.children(DEMO_SERVICE), "a demo MCP server outlived its run")


@needs_postgres
@pytest.mark.parametrize("protocol", list(CASES))
def test_two_replicas_take_turns_at_every_pause_point(
    replicas: tuple[Server, Server], reference: Callable[[str], RunResult], protocol: str
):
    case = CASES[protocol]
    request_id, project = unique(case.prefix), unique("proj")  # a Postgres database outlives the test
    demo = case.demo.with_fields(projectId=project)
    with httpx.Client(base_url=replicas[0].url) as a, httpx.Client(base_url=replicas[1].url) as b:
        segments = demo.pause_everywhere([a, b], request_id)
        traced = [tools_traced(client, request_id) for client in (a, b)]
        replayed = [stream(client, "GET", f"/api/requests/{request_id}/stream") for client in (a, b)]
        case.left(Ran(b, replicas[1], request_id, project, replayed[0]))
    demo.check_stops(segments)
    case.check_resumed(segments, reference(protocol))
    assert traced == [case.tools, case.tools]
    events = [e.to_json() for e in _joined(segments)]
    assert [e.to_json() for e in replayed[0]] == [e.to_json() for e in replayed[1]] == events


# --- Cancelling -----------------------------------------------------------------------------------------


@dataclass
class CancelledRuns:
    """A run cancelled while it ran and another cancelled while paused, as the cancel test saw them."""

    server: Server
    running: list[Event]  # the first run's stream, to its cancelled event
    took: float  # seconds from asking to cancel it to the end of its stream
    traced: list[str]  # the tools its trace shows called
    paused: list[Event]  # the other run's first segment, to the pause it was cancelled in
    replayed: list[Event]  # the other run's replay after its cancel


@dataclass(frozen=True)
class Cancel:
    """How the cancel test cancels a protocol's running demo, and what it checks besides."""

    when: Callable[[Event], bool]  # the running run is cancelled as it streams this event
    check: Callable[[CancelledRuns], None]
    server: str = "server"  # the fixture of the server the runs go to
    slow: bool = False  # the runs use the protocol's slow script


def _cancelled_network(runs: CancelledRuns) -> None:
    assert [e.type for e in runs.running] == [
        *network.DEMO_KINDS[:4],
        "cancelled",
    ]  # the search never returned
    assert network._where(runs.running[-1]) == network.DECIDED_TO_SEARCH
    assert network._stopped_after(runs.paused) in network.EVERY_PAUSE_POINT[:2]  # before the search, or after


def _cancelled_pursuit(runs: CancelledRuns) -> None:
    cancelled = runs.replayed[-1]
    assert (cancelled.phase, cancelled.phase_index, cancelled.iteration) == ("refinement_analysis", 6, 1)


def _cancelled_xml(runs: CancelledRuns) -> None:
    assert [e.type for e in runs.running] == [*xml.SLOW_KINDS[:14], "cancelled"]  # slow_echo never returned
    assert runs.took < xml.SLOW_ECHO_MS / 1000  # the cancel did not wait for the sleeping tool
    assert xml._where(runs.running[-1]) == xml.PROPOSED_SLOW_BLOCK
    assert runs.traced[:2] == ["demo.read_file", "demo.calculate"]
    assert xml._stopped_after(runs.paused) == xml.EVERY_PAUSE_POINT[0]
    assert xml._where(runs.replayed[-1]) == ("tool_phase", 2, 1)
    dataset = Path(runs.server.env["PHASEGRAPH_DATASET_DIR"])
    assert xml._iterations(dataset, runs.running[-1].request_id) == [1]


CANCELS = {
    # on the slow workspace: the cancel lands while search_files runs
    "agent_network": Cancel(lambda e: isinstance(e, ToolCall), _cancelled_network, server="slow_server"),
    "goal_pursuit": Cancel(lambda e: e.seq == 1, _cancelled_pursuit),
    "xml_contract": Cancel(
        lambda e: isinstance(e, ToolCall) and e.name == "demo.slow_echo", _cancelled_xml, slow=True
    ),
}


@pytest.mark.parametrize("protocol", list(CANCELS))
def test_cancel_ends_a_running_or_paused_run_for_good(
    request: pytest.FixtureRequest, slow_models: dict[str, str], protocol: str
):
    case, cancel = CASES[protocol], CANCELS[protocol]
    server: Server = request.getfixturevalue(cancel.server)
    running_id, paused_id = unique(case.prefix), unique(case.prefix)
    fields = {"projectId": unique("proj")} | ({"model": slow_models[protocol]} if cancel.slow else {})
    demo = case.demo.with_fields(**fields)
    with httpx.Client(base_url=server.url) as client:
        asked: list[tuple[float, int]] = []  # when, and how many demo services the server ran then

        def cancel_running(event: Event) -> None:
            if cancel.when(event):
                asked.append((time.monotonic(), len(server.children(DEMO_SERVICE))))
                assert client.post(f"/api/requests/{running_id}/cancel").json()["status"] == "cancelled"

        running = stream(client, "POST", demo.route, json=demo.body(running_id), on_event=cancel_running)
        took = time.monotonic() - asked[0][0]
        wait_for(lambda: not server.children(DEMO_SERVICE), "the cancelled run left its demo service")
        refused = client.post(f"/api/requests/{running_id}/resume", json={})
        paused = demo.segment(client, paused_id, start=True)
        assert client.post(f"/api/requests/{paused_id}/cancel").json()["status"] == "cancelled"
        assert client.post(f"/api/requests/{paused_id}/cancel").status_code == 200  # idempotent
        replayed = stream(client, "GET", f"/api/requests/{paused_id}/stream")
        statuses = {client.get(f"/api/requests/{r}").json()["status"] for r in (running_id, paused_id)}
        refused_too = client.post(f"/api/requests/{paused_id}/resume", json={})
        traced = tools_traced(client, running_id)
    assert asked[0][1] == case.services  # the run's own stdio demo servers, while it ran
    cancelled = running[-1]
    assert isinstance(cancelled, Cancelled) and cancelled.protocol == protocol
    assert not [e for e in running if isinstance(e, Final)]
    assert statuses == {"cancelled"}
    for answer in (refused, refused_too):
        assert answer.status_code == 409 and "cancelled" in answer.json()["message"]
    cancelled = replayed[-1]
    assert [e.to_json() for e in replayed[:-1]] == [e.to_json() for e in paused]
    assert isinstance(cancelled, Cancelled) and cancelled.seq == paused[-1].seq + 1
    assert case.where(cancelled) == case.where(paused[-1]) == case.where(paused[-2])
    cancel.check(CancelledRuns(server, running, took, traced, paused, replayed))


# --- A restarted server ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Restart:
    """How the restart test runs a protocol's demo, and what it checks besides."""

    settings: Callable[[pytest.FixtureRequest], dict[str, str]]  # of both servers (fixtures asked for)
    paused_at: Stop | None = None  # where the demo is always paused when killed (None: it may vary)
    check: Callable[[Ran], None] = lambda ran: None  # besides what ``Case.left`` checks


def _world_changed_once(ran: Ran) -> None:
    """The world on disk: the compass went to Mira (before the kill) and the chapter got one note."""
    world = ResourceRepository.load(Path(ran.server.env["PHASEGRAPH_RESOURCES"]))
    assert world.get(COMPASS).properties["owner"] == MIRA
    notes = world.get(CHAPTER).properties["notes"]
    assert len(notes) == 1 and "compass" in notes[0]


RESTARTS = {
    # on the slow workspace the pause always lands right after search_files
    "agent_network": Restart(
        lambda request: {"PHASEGRAPH_WORKSPACE": str(request.getfixturevalue("slow_workspace"))},
        paused_at=("use_tool", 4),
    ),
    # on a loaded machine the pause may land past move_item's pause point (it still ran before the kill)
    "goal_pursuit": Restart(
        lambda request: {"PHASEGRAPH_RESOURCES": str(request.getfixturevalue("world"))},
        check=_world_changed_once,
    ),
    "planner": Restart(lambda request: {}, paused_at=planner.EVERY_PAUSE_POINT[0]),
}


@pytest.mark.parametrize("protocol", list(RESTARTS))
def test_a_run_paused_after_its_first_tool_resumes_on_a_restarted_server(
    servers, request: pytest.FixtureRequest, reference: Callable[[str], RunResult], protocol: str
):
    case, restart = CASES[protocol], RESTARTS[protocol]
    settings = restart.settings(request)
    request_id, project = unique(case.prefix), unique("proj")
    demo = case.demo.with_fields(projectId=project)
    first = servers(**settings)
    with httpx.Client(base_url=first.url) as client:
        segments = [demo.segment(client, request_id, start=True)]
        while not any(isinstance(e, ToolResultEvent) for e in segments[-1]):
            segments.append(demo.segment(client, request_id))
    first.kill()  # SIGKILL while paused after the demo's first tool ran
    before = _joined(segments)
    killed_at = demo.stopped_after(segments[-1])

    second = servers(**settings)
    with httpx.Client(base_url=second.url) as client:
        assert client.get(f"/api/requests/{request_id}").json()["status"] == "paused"
        replayed = stream(client, "GET", f"/api/requests/{request_id}/stream")
        while isinstance(segments[-1][-1], Paused):  # resumed, and paused at every later point
            segments.append(demo.segment(client, request_id))
        traced = tools_traced(client, request_id)
        ran = Ran(client, second, request_id, project, _joined(segments))
        case.left(ran)
        restart.check(ran)
    assert restart.paused_at is None or killed_at == restart.paused_at
    assert [e.to_json() for e in replayed] == [e.to_json() for e in before]
    demo.check_stops(segments)
    case.check_resumed(segments, reference(protocol))
    rest = ran.events[len(before) :]
    assert [e.name for e in rest if isinstance(e, ToolCall)] == case.later_tools
    assert traced == case.tools  # the first tools ran before the kill and never again


# --- Checkpoints and forks ------------------------------------------------------------------------------


@dataclass
class Forked:
    """A finished demo run, its checkpoints, and two runs continued from the one after its first tools."""

    done: list[Event]
    timeline: list[dict[str, Any]]  # its checkpoints, oldest first
    after_tools: list[dict[str, Any]]  # those after the node that runs tools
    earlier: dict[str, Any]  # the first after a node before it
    values: dict[str, dict[str, Any]]  # the state each saved: "after_tool" (the first), "earlier"
    final_values: dict[str, Any]  # the state at the end of the run
    forked: list[Event]  # forked from after_tools[0]: a request of its own
    forked_values: dict[str, Any]  # the state at the end of the fork's branch
    from_phase: list[Event]  # the request resumed from after_tools[0]'s phase index
    reference: RunResult


@dataclass(frozen=True)
class Fork:
    """Where the fork test forks a protocol's demo, and what it checks besides."""

    tool_node: str  # the graph node that runs tools: the fork continues from its first checkpoint
    earlier_node: str  # a node before it, whose first checkpoint's state is checked too
    check: Callable[[Forked], None]


def _forked_network(run: Forked) -> None:
    assert [c["node"] for c in run.timeline] == network.TIMELINE
    assert [c["phaseIndex"] for c in run.timeline] == [None, None, 0, *range(1, 10), 9]
    assert [c["next"] for c in run.after_tools] == [["run_agent_step"]] * 2
    assert [c["phaseIndex"] for c in run.after_tools] == [4, 6] and run.earlier["phaseIndex"] == 2
    after_route, after_search = run.values["earlier"], run.values["after_tool"]
    handed_over = (after_route["current_agent"], after_route["control_epoch"], after_route["steps"])
    assert handed_over == ("researcher", 2, 1)
    assert after_route["handoff"].startswith("Find who works on the streaming server")
    assert after_route["tool_execution_log"] == {}
    done_ids = network._check_tools_ran_once(run.done)
    assert [e["execution_id"] for e in after_search["execution_log"] if e["type"] == "tool"] == done_ids[:1]
    assert list(after_search["tool_execution_log"]) == done_ids[:1] and after_search["steps"] == 2
    final = run.done[-1]
    assert isinstance(final, Final)
    network._check_logs(run.final_values, done_ids, final.answer)
    after_search_ran = network.DEMO_KINDS.index("tool_result") + 1
    for resumed in (run.forked, run.from_phase):
        assert network._progress(resumed) == network._progress(run.reference.events)[after_search_ran:]
    # the fork keeps the search's execution from the checkpoint and adds a read of its own
    fork_read = next(e.execution_id for e in run.forked if isinstance(e, ToolCall))
    assert fork_read is not None and fork_read not in done_ids
    network._check_logs(run.forked_values, [done_ids[0], fork_read], final.answer)


def _forked_pursuit(run: Forked) -> None:
    phases = [pursuit.NODE_OF[e.phase] for e in run.reference.events if e.type == "phase_start"]
    assert [c["node"] for c in run.timeline] == [
        None,
        "__start__",
        "start_pursuit",
        *phases,
        "finish_pursuit",
    ]
    assert [c["phaseIndex"] for c in run.timeline[3:]] == [*range(1, len(phases) + 1), len(phases)]
    assert run.after_tools[0]["next"] == ["discover_context"]
    assert [c["phaseIndex"] for c in run.after_tools] == [10, 14]
    assert run.earlier["phaseIndex"] == 6 and run.earlier["next"] == ["discover_context"]
    after_refine, after_tool = run.values["earlier"], run.values["after_tool"]
    assert (after_refine["iteration"], after_refine["step"]) == (1, 0)
    assert after_refine["verdict"]["verdict"] == "refine"
    assert "Mira Voss" in after_refine["assessment"]["expected_actions"]
    assert (after_tool["iteration"], after_tool["context_round"], after_tool["step"]) == (0, 0, 1)
    assert [r["name"] for r in after_tool["results"]] == ["move_item"] and len(after_tool["executed"]) == 1
    assert after_tool["assessment"]["finished_tasks"][0].startswith("move_item(")


def _forked_xml(run: Forked) -> None:
    assert [c["node"] for c in run.timeline] == xml.TIMELINE
    assert [c["phaseIndex"] for c in run.timeline] == [None, None, 0, 1, 2, 3, 4, 5, 5]
    assert [c["next"] for c in run.after_tools] == [["propose_action"]] * 2
    assert [c["phaseIndex"] for c in run.after_tools] == [2, 4] and run.earlier["next"] == ["execute_blocks"]
    after_proposal, after_block = run.values["earlier"], run.values["after_tool"]
    blocks = after_proposal["proposal"]["blocks"]
    assert [(b["kind"], len(b["steps"]), b["problems"]) for b in blocks] == [("parallel", 2, [])]
    assert (after_proposal["steps"], after_proposal["model_calls"]) == (0, 1)
    assert (after_block["phase"], after_block["phase_index"], after_block["steps"]) == ("tool_phase", 2, 1)
    conversation = xml._transcript(after_block)
    assert [kind for kind, _ in conversation] == ["human", "ai", "human"]
    assert conversation[0][1] == xml.TASK and "Linus: streaming server" in conversation[2][1]
    xml._check_tools_ran_once(run.done)
    for resumed in (run.forked, run.from_phase):
        # the parallel block ran before the point they continue from and never again
        xml._check_tools_ran_once(resumed, xml.CALLS[2:])
        assert xml._progress(resumed) == xml._progress(run.reference.events)[xml.FIRST_BLOCK_DONE :]
        calls, _ = tool_events(resumed)
        assert calls[1].args == xml.SUBSTITUTED_ARGS
    assert run.forked_values["steps"] == 2 and len(xml._transcript(run.forked_values)) == 6  # its own branch


FORKS = {
    "agent_network": Fork("use_tool", "route_to_agent", _forked_network),
    "goal_pursuit": Fork("execute_action", "analyze_refinement", _forked_pursuit),
    "xml_contract": Fork("execute_blocks", "propose_action", _forked_xml),
}


@pytest.mark.parametrize("protocol", list(FORKS))
def test_checkpoints_show_the_run_and_fork_after_its_first_tool(
    server: Server, reference: Callable[[str], RunResult], protocol: str
):
    case, fork = CASES[protocol], FORKS[protocol]
    request_id = unique(case.prefix)
    checkpoints = f"/api/threads/{request_id}/checkpoints"
    demo = case.demo.with_fields(projectId=unique("proj"))
    with httpx.Client(base_url=server.url) as client:
        done = stream(client, "POST", demo.route, json=demo.body(request_id))
        timeline = client.get(checkpoints).json()
        after_tools = [c for c in timeline if c["node"] == fork.tool_node]
        earlier = next(c for c in timeline if c["node"] == fork.earlier_node)
        values = {
            name: checkpoint_values(client, request_id, c["checkpointId"])
            for name, c in (("after_tool", after_tools[0]), ("earlier", earlier))
        }
        final_values = latest_values(client, request_id)
        forked = stream(client, "POST", f"{checkpoints}/{after_tools[0]['checkpointId']}/fork")
        forked_values = latest_values(client, request_id)  # the fork's branch is the thread's newest
        phase_index = after_tools[0]["phaseIndex"]
        resume = {"resumeFromPhaseIndex": phase_index}
        from_phase = stream(client, "POST", f"/api/requests/{request_id}/resume", json=resume)
        traced = [tools_traced(client, r) for r in (request_id, forked[0].request_id)]
    assert timeline[-1]["next"] == []
    final = done[-1]
    assert isinstance(final, Final)
    for resumed, continued in ((forked, 1), (from_phase, final.seq + 1)):
        assert isinstance(resumed[0], Resumed) and resumed[0].fork and resumed[0].seq == continued
        assert [e.seq for e in resumed] == list(range(continued, continued + len(resumed)))
        # the first tools ran before the point they continue from and never again
        assert [e.name for e in resumed if isinstance(e, ToolCall)] == case.later_tools
        last = resumed[-1]
        assert isinstance(last, Final) and (last.answer, last.resolution) == (final.answer, final.resolution)
    assert forked[0].request_id != request_id and isinstance(from_phase[0], Resumed)
    assert from_phase[0].from_phase_index == phase_index
    assert traced == [[*case.tools, *case.later_tools], case.later_tools]
    ref = reference(protocol)
    fork.check(
        Forked(
            done, timeline, after_tools, earlier, values, final_values, forked, forked_values, from_phase, ref
        )
    )
