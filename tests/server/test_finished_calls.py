"""A tool call that finished never runs again, whatever kills the server: every step of every block.

xml_contract runs a block's calls in one graph step. The server is killed (SIGKILL) while the slow
call of a block runs, after the block's fast call finished; a restarted server (sqlite) or a replica
(Postgres) takes the run over and resumes it. The recording service writes each call's start and end
to a file: the fast call ran once, only the interrupted one runs again. The service, a stdio child of
the killed server, dies with it: the interrupted call never ends in the background. The trace shows
every call the event log shows, the interrupted one too.
"""

import json
import os
import time
from collections import Counter
from pathlib import Path
from uuid import uuid4

import httpx
import pytest

from phasegraph.nodes.events import Event, Final
from tests.helpers import turn, write_script
from tests.server.conftest import Server, needs_postgres, read_sse
from tests.server.pausing import WAIT_SECONDS, take_over, tool_events, tools_traced, wait_for_checkpoint

RUN = "/api/runs/xml_contract/stream"
SERVICE = Path(__file__).resolve().parent / "recording_service.py"
#: How long the block's second call runs: far longer than a takeover takes to notice anything.
SLOW_MS = 4000


def _record(name: str, ms: int) -> str:
    return f"<rec><record><name>{name}</name><ms>{ms}</ms></record></rec>"


def _setup(tmp_path: Path, kind: str) -> tuple[dict[str, str], Path]:
    """The servers' settings (the recording service, a script running one block) and the service's file."""
    log = tmp_path / "calls.log"
    log.touch()
    config = tmp_path / "mcp_servers.json"
    service = {"transport": "stdio", "command": "${python}", "args": [str(SERVICE), "--log", str(log)]}
    config.write_text(json.dumps({"rec": service}), encoding="utf-8")
    block = f"<{kind}>{_record('one', 0)}{_record('two', SLOW_MS)}</{kind}>"
    script = write_script(tmp_path, turn(f"{block}\n<execute_tools />"), turn("Final Answer: done"))
    return {"PHASEGRAPH_MODEL": script, "PHASEGRAPH_MCP_CONFIG": str(config)}, log


def _lines(log: Path) -> list[str]:
    return log.read_text(encoding="utf-8").splitlines()


def _gone(pid: int) -> bool:
    """The process has exited (a zombie nobody reaped yet counts as exited)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except (OSError, IndexError):
        return True
    return state in ("Z", "X")


def _wait(condition, what: str) -> None:
    deadline = time.monotonic() + WAIT_SECONDS  # a hang guard only
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.05)


def _kill_during_the_second_call(server: Server, request_id: str, log: Path) -> tuple[list[Event], int]:
    """Start the run and SIGKILL its server once call one finished and call two runs.

    Returns the events the client got and the pid of the server's recording service.
    """
    seen: list[Event] = []
    service: list[int] = []
    body = {"message": "Record twice.", "projectId": "proj", "requestId": request_id}
    with (
        httpx.Client(base_url=server.url) as client,
        client.stream("POST", RUN, json=body, timeout=60) as response,
    ):

        def on_event(event: Event) -> None:
            seen.append(event)
            calls, results = tool_events(seen)
            ids = {e.args["name"]: e.call_id for e in calls}
            if list(ids) == ["one", "two"] and [e.call_id for e in results] == [ids["one"]]:
                # nothing more comes until call two ends: the client has everything the store has
                wait_for_checkpoint(client, request_id, "propose_action", 1)
                _wait(lambda: "start two" in _lines(log), "call two never started")
                service.extend(server.children(SERVICE.name.encode()))
                server.kill()

        with pytest.raises(httpx.HTTPError):  # the connection dies with the server
            read_sse(response, on_event=on_event)
    assert server.process is not None and server.process.returncode is not None, "the run was never killed"
    assert len(service) == 1
    return seen, service[0]


def _check_the_service_died_with_its_server(service: int, log: Path) -> None:
    """The killed server's service is gone, and the call it was running never finished."""
    _wait(lambda: _gone(service), "the recording service outlived its server")
    assert Counter(_lines(log)) == Counter(["start one", "end one", "start two"])


def test_a_killed_server_takes_its_stdio_services_with_it(servers, tmp_path: Path):
    env, log = _setup(tmp_path, "sequential")
    _, service = _kill_during_the_second_call(servers(**env), f"rec-{uuid4().hex}", log)
    _check_the_service_died_with_its_server(service, log)


@pytest.mark.parametrize("kind", ["sequential", "parallel"])
@pytest.mark.parametrize("taken_over_by", ["restarted server", pytest.param("replica", marks=needs_postgres)])
def test_a_finished_call_of_a_block_never_runs_again_after_a_kill(
    servers, tmp_path: Path, kind: str, taken_over_by: str
):
    env, log = _setup(tmp_path, kind)
    replicas = taken_over_by == "replica"
    if replicas:  # two replicas on the test Postgres: the other one is up before the kill
        env["PHASEGRAPH_CHECKPOINTER"] = os.environ["PHASEGRAPH_TEST_POSTGRES_URL"]
    driver = servers(**env)
    other: Server | None = servers(**env) if replicas else None
    request_id = f"rec-{uuid4().hex}"  # a Postgres database outlives the test
    before, service = _kill_during_the_second_call(driver, request_id, log)
    _check_the_service_died_with_its_server(service, log)
    taker = other or servers(**env)
    with httpx.Client(base_url=taker.url) as client:
        # the trace holds every call the events show, the one the kill interrupted too
        _wait(lambda: client.get(f"/api/requests/{request_id}").json()["status"] != "running", "no takeover")
        calls, _ = tool_events(before)
        assert tools_traced(client, request_id) == [e.name for e in calls] == ["rec.record"] * 2
    taken = take_over(taker, request_id, before)
    final = taken.events[-1]
    assert isinstance(final, Final) and final.answer == "done"
    # call one ran once, before the kill; call two ran again from its start, and once to its end
    assert Counter(_lines(log)) == Counter(["start one", "end one", "start two", "start two", "end two"])
    rerun, results = tool_events(taken.rest)
    assert sorted(e.args["name"] for e in rerun) == ["one", "two"]  # the re-run step shows both calls
    assert [e.status for e in results] == ["ok", "ok"]
    assert taken.traced == ["rec.record"] * 3  # one, two (interrupted), two: one is not traced twice
    observation = taken.values["transcript"][2]["kwargs"]["content"]  # what the model read back
    assert observation.count('status="ok">one</result>') == observation.count('status="ok">two</result>') == 1
