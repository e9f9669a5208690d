"""Every answer of a real server is what its /openapi.json says: schemathesis, all checks, bounded.

Servers run a one-turn scripted model, so every stream ends at once and the checks read whole SSE
answers. The open server gets the schemathesis CLI (every phase, stateful sequences included, along the
links it infers); the server with tokens gets the pytest integration, where ``ignored_auth`` has work.
"""

import json
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.config import SchemathesisConfig
from schemathesis.config._checks import (
    NEGATIVE_DATA_REJECTION_EXPECTED_STATUSES,
    POSITIVE_DATA_ACCEPTANCE_EXPECTED_STATUSES,
)
from schemathesis.core.failures import FailureGroup

from phasegraph.nodes.models import DEMO_WORKSPACE
from phasegraph.nodes.settings import ServerSettings
from phasegraph.server.app import create_app
from phasegraph.server.http.responses import _BLANK, GUARDED, NOT_BLANK
from tests.processes import free_port
from tests.server.conftest import Server

SCHEMATHESIS = str(Path(sys.executable).parent / "schemathesis")
TOKEN = "conformance-token"
EXAMPLES = 12
SCRIPT = "one.json"
MAX_MESSAGE_CHARS = 2000

# One status the checks' defaults leave out: a message over the schema's maxLength is refused with
# 413, the status for "too large".
NEGATIVE = [*NEGATIVE_DATA_REJECTION_EXPECTED_STATUSES, "413"]
# Every other schema-valid request is accepted (2xx) or refused with a status the defaults expect
# for valid data (404 for something that does not exist, 409 for a state that does not allow it),
# on every operation, with two exceptions: a network's publish-time rules (unique agent keys, routes
# naming agents of the network, a responder reachable from the default agent, ...) are about the
# network as a whole, which JSON Schema cannot state, so a well-formed network that breaks one is a
# documented 422 listing the problems; and a thread's state fields are its protocol's, which the path
# does not name, so a state update with a value its thread's state does not have is a documented 422
# naming the field.
PUBLISH_POSITIVE = [*POSITIVE_DATA_ACCEPTANCE_EXPECTED_STATUSES, "422"]
CHECKS = f"""
[generation]
deterministic = true
max-examples = {EXAMPLES}

[checks.negative_data_rejection]
expected-statuses = {json.dumps(NEGATIVE)}

[[operations]]
include-name = "POST /api/networks"
checks.positive_data_acceptance.expected-statuses = {json.dumps(PUBLISH_POSITIVE)}

[[operations]]
include-name = "POST /threads/{{thread_id}}/state"
checks.positive_data_acceptance.expected-statuses = {json.dumps(PUBLISH_POSITIVE)}
"""


def _config(port: int, *, auth: bool) -> SchemathesisConfig:
    top = f'base-url = "http://127.0.0.1:{port}"\nrequest-timeout = 30\n'
    if auth:
        # With this header every request carries the token; ignored_auth also sends each one without
        # it (the schema names the bearer scheme) and expects 401.
        top += f'headers = {{ Authorization = "Bearer {TOKEN}" }}\n'
    return SchemathesisConfig.from_str(top + CHECKS)


def _serve(root: Path, port: int, **env: str) -> Server:
    script = root / SCRIPT
    script.write_text(json.dumps({"turns": [{"content": "Done."}], "repeat_last": True}), encoding="utf-8")
    base = {
        "PHASEGRAPH_CHECKPOINTER": f"sqlite:{root / 'state.db'}",
        "PHASEGRAPH_WORKSPACE": str(DEMO_WORKSPACE),
        "PHASEGRAPH_TWO_STAGE_ENABLED": "true",
        "PHASEGRAPH_MODEL": f"scripted:{script}",
        "PHASEGRAPH_MAX_MESSAGE_CHARS": str(MAX_MESSAGE_CHARS),
    }
    return Server(env={**base, **env}, port=port, log=root / "server.log").start()


# The pytest integration needs the schema before any server runs: build it in-process with the
# settings the server gets (a script is public by its file name, so the folder does not matter); the
# fixture then checks that the server serves exactly this schema.
TOKEN_PORT = free_port()
TOKEN_SETTINGS = ServerSettings(
    two_stage_enabled=True,
    model=f"scripted:{SCRIPT}",
    max_message_chars=MAX_MESSAGE_CHARS,
    api_tokens=f"{TOKEN}:default,other",
)
TOKENS = schemathesis.openapi.from_dict(
    create_app(TOKEN_SETTINGS).openapi(), config=_config(TOKEN_PORT, auth=True)
)


@pytest.fixture(scope="module")
def token_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    server = _serve(
        tmp_path_factory.mktemp("tokens"), TOKEN_PORT, PHASEGRAPH_API_TOKENS=f"{TOKEN}:default,other"
    )
    try:
        assert httpx.get(f"{server.url}/openapi.json").json() == TOKENS.raw_schema
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def open_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    server = _serve(tmp_path_factory.mktemp("open"), free_port())
    yield server
    server.stop()


@pytest.mark.usefixtures("token_server")
@TOKENS.parametrize()
@settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=list(HealthCheck),
)
def test_every_answer_is_documented_with_tokens(case: schemathesis.Case) -> None:
    case.call_and_validate()  # every check: the config enables them all


def test_the_cli_finds_nothing_with_all_checks_and_phases(open_server: Server, tmp_path: Path) -> None:
    config = tmp_path / "schemathesis.toml"
    config.write_text(CHECKS, encoding="utf-8")
    run = subprocess.run(
        [SCHEMATHESIS, "--config-file", str(config), "run", f"{open_server.url}/openapi.json",
         "--checks", "all", "--workers", "1", "--request-timeout", "30", "--no-color"],
        capture_output=True, text=True, timeout=300, check=False, cwd=tmp_path,  # its cache goes there
    )  # fmt: skip
    assert run.returncode == 0, run.stdout + run.stderr
    assert "✅ Stateful" in run.stdout, run.stdout  # sequences ran, and passed
    assert re.search(r"(\d+) generated, \1 passed", run.stdout), run.stdout


def test_an_undocumented_answer_fails_the_checks(open_server: Server) -> None:
    # The same server against a schema that forgot one route's 404: the checks must say so.
    raw = httpx.get(f"{open_server.url}/openapi.json").json()
    del raw["paths"]["/api/requests/{request_id}"]["get"]["responses"]["404"]
    forgetful = schemathesis.openapi.from_dict(raw, config=_config(open_server.port, auth=False))
    case = forgetful["/api/requests/{request_id}"]["GET"].Case(path_parameters={"request_id": "nobody"})
    with pytest.raises(FailureGroup, match="Undocumented status code"):
        case.call_and_validate()


def test_a_cancel_answers_the_cancelled_run_as_its_schema_says(open_server: Server) -> None:
    # The checks never reach a run to cancel (they make up ids): this one has a run, stopped before its
    # first node, so the answer is read against the schema with every check.
    url = open_server.url
    thread = httpx.post(f"{url}/threads", json={}).json()["thread_id"]
    ask = {"messages": [{"role": "user", "content": "Summarise the roadmap."}]}
    stopped = httpx.post(f"{url}/threads/{thread}/runs", json={
        "assistant_id": "triggered_phase", "input": ask, "interrupt_before": "*"})  # fmt: skip
    run_id = stopped.json()["run_id"]
    httpx.get(f"{url}/threads/{thread}/runs/{run_id}/join", timeout=30)  # it has stopped
    schema = schemathesis.openapi.from_url(
        f"{url}/openapi.json", config=_config(open_server.port, auth=False)
    )
    cancel = schema["/threads/{thread_id}/runs/{run_id}/cancel"]["POST"]
    case = cancel.Case(path_parameters={"thread_id": thread, "run_id": run_id})
    answer = case.call()
    case.validate_response(answer)  # every check
    assert answer.status_code == 202 and answer.headers["content-type"] == ["application/json"]
    assert (answer.json()["run_id"], answer.json()["status"]) == (run_id, "interrupted")
    record = httpx.get(f"{url}/api/requests/{run_id}").json()
    assert record["status"] == "cancelled"


def test_the_blank_message_pattern_is_what_strip_removes() -> None:
    # The pattern is read by ECMA (the schema), Rust (pydantic) and Python (schemathesis) engines; an
    # explicit class keeps all three in agreement with the server's own str.strip() test.
    blank = re.compile(f"[{_BLANK}]")
    assert [c for c in range(sys.maxunicode + 1) if bool(blank.fullmatch(chr(c))) != chr(c).isspace()] == []
    assert re.search(NOT_BLANK, " \u3000\x1c\x85") is None
    assert re.search(NOT_BLANK, " \ufeff") is not None


def test_the_schema_states_what_the_settings_decide() -> None:
    plain = create_app(ServerSettings(model="scripted:/srv/secret/one.json", max_message_chars=77)).openapi()
    chat = plain["components"]["schemas"]["ChatRequest"]["properties"]
    assert chat["message"]["maxLength"] == 77
    assert chat["model"]["anyOf"][0]["enum"] == ["scripted:one.json"]  # as clients name it: no folders
    assert "securitySchemes" not in plain["components"]
    assert all("401" not in op["responses"] for ops in plain["paths"].values() for op in ops.values())
    guarded = TOKENS.raw_schema
    assert guarded["components"]["securitySchemes"] == {"bearer": {"type": "http", "scheme": "bearer"}}
    api = [op for path, ops in guarded["paths"].items() if path.startswith(GUARDED) for op in ops.values()]
    assert api and all("401" in op["responses"] and op["security"] == [{"bearer": []}] for op in api)


def test_streams_answer_events_and_refuse_in_json() -> None:
    paths = TOKENS.raw_schema["paths"]
    assert list(paths["/"]["get"]["responses"]["200"]["content"]) == ["text/html"]
    streaming = [op for ops in paths.values() for op in ops.values() if "text/event-stream" in str(op)]
    # the shared streaming routes (the generic one once per protocol, as each takes its own settings),
    # the planner's /api/agent/stream, the LangGraph Server API's three (a run on a thread, a stateless
    # run, a join) and AG-UI's, once per protocol too
    assert len(streaming) == 6 + 6 + 1 + 3 + 6
    for operation in streaming:
        for status, response in operation["responses"].items():
            expected = ["text/event-stream"] if status == "200" else ["application/json"]
            assert list(response["content"]) == expected, (operation["operationId"], status)
