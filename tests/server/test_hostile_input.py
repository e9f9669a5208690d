"""Bad and hostile input gets a clear JSON 4xx before any stream opens, and reveals nothing of the server."""

import json

import httpx
import pytest

from phasegraph.nodes.models import DEMO_WORKSPACE
from tests.server.conftest import GUARDED, Server, stream, unique

RUN = "/api/runs/triggered_phase/stream"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("hostile")
    (root / "broken.json").write_text("{not json", encoding="utf-8")
    (root / "s.json").write_text(json.dumps({"turns": [{"content": "ok"}]}), encoding="utf-8")
    allowed = (f"scripted:{root / name}" for name in ("missing.json", "broken.json", "s.json"))
    env = {
        "PHASEGRAPH_CHECKPOINTER": f"sqlite:{root / 'state.db'}",
        "PHASEGRAPH_WORKSPACE": str(DEMO_WORKSPACE),
        "PHASEGRAPH_ALLOWED_MODELS": ",".join(allowed),
        "PHASEGRAPH_MAX_MESSAGE_CHARS": "1000",
        "PHASEGRAPH_MAX_BODY_BYTES": "20000",
    }
    started = Server(env=env, log=root / "server.log").start()
    yield started, root
    started.stop()


def _json_error(response: httpx.Response, status: int) -> dict:
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/json")
    return response.json()


def test_following_an_unknown_request_or_a_bad_event_id_is_refused_before_streaming(server):
    running, _ = server
    with httpx.Client(base_url=running.url) as client:
        _json_error(client.get("/api/requests/nope/stream"), 404)
        events = stream(client, "POST", RUN, json={"message": "Summarise", "requestId": "followed"})
        last = events[-1].seq
        replay = stream(client, "GET", "/api/requests/followed/stream", headers={"Last-Event-ID": "3"})
        assert [e.seq for e in replay] == list(range(4, last + 1))
        for bad in ("9" * 400, "-1", "abc"):
            body = _json_error(
                client.get("/api/requests/followed/stream", headers={"Last-Event-ID": bad}), 422
            )
            assert "Last-Event-ID" in body["message"]
        # well formed, but past the log: the request's state does not allow it
        past = client.get("/api/requests/followed/stream", headers={"Last-Event-ID": str(last + 1)})
        assert f"past this request's last event ({last})" in _json_error(past, 409)["message"]


def test_another_projects_request_is_not_streamed(shared_servers):
    running, a1 = shared_servers(**GUARDED), unique("a1")  # alpha-secret: projA, beta-secret: projB
    with httpx.Client(base_url=running.url) as client:
        stream(client, "POST", RUN, json={"message": "Hi", "projectId": "projA", "requestId": a1},
               headers={"Authorization": "Bearer alpha-secret"})  # fmt: skip
        response = client.get(f"/api/requests/{a1}/stream", headers={"Authorization": "Bearer beta-secret"})
        _json_error(response, 404)


def test_a_lone_surrogate_is_a_422_json_answer(server):
    running, _ = server
    raw = '{"message": "x\\ud800y"}'
    with httpx.Client(base_url=running.url) as client:
        response = client.post(RUN, content=raw, headers={"content-type": "application/json"})
        assert "valid string" in json.dumps(_json_error(response, 422))
        thread = '{"message": "hi", "threadId": "t\\udfff"}'
        response = client.post(RUN, content=thread, headers={"content-type": "application/json"})
        _json_error(response, 422)


@pytest.mark.parametrize("bad", [".", ".."])
def test_dot_ids_are_refused(server, bad: str):
    running, _ = server
    with httpx.Client(base_url=running.url) as client:
        for field in ("requestId", "threadId", "projectId"):
            _json_error(client.post(RUN, json={"message": "hi", field: bad}), 422)


def test_bad_scripts_and_refused_models_are_4xx_without_server_paths(server):
    running, root = server
    with httpx.Client(base_url=running.url) as client:
        for name in ("missing.json", "broken.json"):
            sent = {"message": "hi", "model": f"scripted:{root / name}"}
            body = _json_error(client.post(RUN, json=sent), 400)
            assert name in body["message"] and str(root) not in body["message"]
        by_name = _json_error(client.post(RUN, json={"message": "hi", "model": "scripted:missing.json"}), 400)
        assert "missing.json" in by_name["message"]  # allowed specs can be named as they are listed
        refused = _json_error(client.post(RUN, json={"message": "hi", "model": "openai:gpt-4o"}), 400)
        assert "scripted:missing.json" in refused["message"] and str(root) not in refused["message"]


def test_requests_name_their_model_without_server_paths(server):
    running, root = server
    with httpx.Client(base_url=running.url) as client:
        body = {"message": "hi", "requestId": "named", "model": f"scripted:{root / 's.json'}"}
        stream(client, "POST", RUN, json=body)
        assert client.get("/api/requests/named").json()["model"] == "scripted:s.json"


def test_messages_and_bodies_over_the_limits_are_413(server):
    running, _ = server
    with httpx.Client(base_url=running.url) as client:
        body = _json_error(client.post(RUN, json={"message": "m" * 1001}), 413)
        assert "at most 1000" in body["message"]
        # Bodies over PHASEGRAPH_MAX_BODY_BYTES: refused unread when their Content-Length says so ...
        declared = _json_error(client.post(RUN, json={"message": "m" * 30_000}), 413)
        assert declared["error"] == "too_large" and "at most 20000" in declared["message"]

        def chunked():
            yield b'{"message": "'
            for _ in range(30):
                yield b"m" * 1000
            yield b'"}'

        # ... and by FastAPI's own limit while they stream in otherwise.
        response = client.post(RUN, content=chunked(), headers={"content-type": "application/json"})
        assert _json_error(response, 413)["error"] == "too_large"
        assert stream(client, "POST", RUN, json={"message": "m" * 1000})[-1].type == "final"


def test_http_level_refusals_have_the_error_body(server):
    running, _ = server
    with httpx.Client(base_url=running.url) as client:
        unparsed = client.post(
            RUN, content=b'{"message": "\xff"}', headers={"content-type": "application/json"}
        )
        assert _json_error(unparsed, 400) == {
            "error": "bad_request",
            "message": "There was an error parsing the body",
        }
        wrong_method = client.delete("/api/protocols")
        assert _json_error(wrong_method, 405)["error"] == "method_not_allowed"
        assert wrong_method.headers["allow"] == "GET"
        # routers the app includes (AG-UI, the LangGraph API) name their methods too
        assert client.get("/ag-ui/unified").headers["allow"] == "POST"
        assert client.get("/threads").headers["allow"] == "POST"
        # the addressed resource's methods, not those of a template that also matches its path
        assert client.put("/threads/search").headers["allow"] == "POST"
        assert client.put("/threads/t-1").headers["allow"] == "DELETE, GET, PATCH"


def test_bodies_are_read_strictly_as_the_schema_types_them(server):
    running, _ = server
    with httpx.Client(base_url=running.url) as client:
        for loose in ({"showToolOutputs": 0}, {"showToolOutputs": "true"}, {"requestId": 7}):
            _json_error(client.post(RUN, json={"message": "hi", **loose}), 422)
        events = stream(client, "POST", RUN, json={"message": "hi", "showToolOutputs": True})
        assert events[-1].type == "final"
        for loose in ("1", True, 1.5, 0):
            body = {"resumeFromPhaseIndex": loose}
            _json_error(client.post("/api/requests/nobody/resume", json=body), 422)
        # 1.0 is an integer to JSON Schema: the body is fine, and the request does not exist.
        _json_error(client.post("/api/requests/nobody/resume", json={"resumeFromPhaseIndex": 1.0}), 404)


def test_ids_in_paths_follow_the_id_pattern(server):
    running, _ = server
    with httpx.Client(base_url=running.url) as client:
        for path in ("/api/requests/a%20b", "/api/requests/%C3%A9/trace", "/api/threads/a%21b/checkpoints"):
            assert _json_error(client.get(path), 422)["detail"][0]["loc"][0] == "path"
        _json_error(client.get("/api/requests/well-formed:but.unknown_1"), 404)
