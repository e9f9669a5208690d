"""CORS (``PHASEGRAPH_CORS_ORIGINS``): a page on another origin can call every surface, and only then.

A browser asks first (a preflight ``OPTIONS`` without a token), then sends the real request with
its token; the page reads the answer only if it names the page's origin. Without the setting the
server sends no CORS header at all.
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from pydantic import ValidationError

from phasegraph.nodes.settings import ServerSettings
from tests.server.conftest import CORS_ORIGINS, GUARDED, Server

PAGE = "http://localhost:5173"
#: What the JS clients send besides the always-allowed headers.
SENT = ["authorization", "content-type", "x-phasegraph-project", "last-event-id", "x-api-key", "prefer"]
ASK = {"messages": [{"role": "user", "content": "Summarise the roadmap in the docs folder."}]}


@pytest.fixture(scope="module")
def server(shared_servers: Any) -> Server:
    """The session's server with tokens (alpha-secret: project projA) and CORS for ``PAGE`` and one more."""
    assert PAGE in CORS_ORIGINS.split(", ")
    started: Server = shared_servers(**GUARDED)
    return started


def _preflight(server: Server, method: str, path: str, origin: str = PAGE) -> httpx.Response:
    headers = {
        "Origin": origin,
        "Access-Control-Request-Method": method,
        "Access-Control-Request-Headers": ",".join(SENT),
    }
    return httpx.options(f"{server.url}{path}", headers=headers, timeout=30)


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("POST", "/threads/search"),  # the LangGraph API
        ("PATCH", "/threads/some-thread"),
        ("POST", "/threads/some-thread/runs/stream"),
        ("GET", "/threads/some-thread/runs/some-run/stream"),  # a join, with Last-Event-ID
        ("POST", "/api/runs/triggered_phase/stream"),  # the native API
        ("GET", "/api/requests"),
        ("POST", "/ag-ui/triggered_phase"),  # AG-UI
    ],
)
def test_a_preflight_is_answered_without_a_token(server: Server, method: str, path: str) -> None:
    answer = _preflight(server, method, path)
    assert answer.status_code == 200, answer.text
    assert answer.headers["access-control-allow-origin"] == PAGE
    assert method in answer.headers["access-control-allow-methods"]
    allowed = {h.strip().lower() for h in answer.headers["access-control-allow-headers"].split(",")}
    assert set(SENT) <= allowed


def test_the_real_request_still_needs_its_token_and_the_page_can_read_the_refusal(server: Server) -> None:
    refused = httpx.post(f"{server.url}/threads/search", json={}, headers={"Origin": PAGE}, timeout=30)
    assert refused.status_code == 401
    assert refused.headers["access-control-allow-origin"] == PAGE  # so the page sees "401", not a failure


def test_a_real_request_gets_the_headers_its_client_reads(server: Server) -> None:
    headers = {"Origin": PAGE, "Authorization": "Bearer alpha-secret"}
    with httpx.Client(base_url=server.url, headers=headers, timeout=60) as client:
        thread = client.post("/threads", json={})
        assert thread.status_code == 200 and thread.headers["access-control-allow-origin"] == PAGE
        thread_id = thread.json()["thread_id"]
        body = {"assistant_id": "triggered_phase", "input": ASK}
        with client.stream("POST", f"/threads/{thread_id}/runs/stream", json=body) as run:
            run.read()
        assert run.status_code == 200
        assert run.headers["access-control-allow-origin"] == PAGE
        exposed = {h.strip().lower() for h in run.headers["access-control-expose-headers"].split(",")}
        assert {"content-location", "location"} <= exposed
        assert run.headers["content-location"].startswith(f"/threads/{thread_id}/runs/")  # what the SDK reads


def test_another_origin_is_not_let_in(server: Server) -> None:
    preflight = _preflight(server, "POST", "/threads/search", origin="https://evil.example.com")
    assert preflight.status_code == 400
    assert "access-control-allow-origin" not in preflight.headers
    headers = {"Origin": "https://evil.example.com", "Authorization": "Bearer alpha-secret"}
    answer = httpx.post(f"{server.url}/threads/search", json={}, headers=headers, timeout=30)
    assert answer.status_code == 200  # the server answers; the browser keeps it from the page
    assert "access-control-allow-origin" not in answer.headers


def test_without_the_setting_no_cors_header_is_sent(shared_servers) -> None:
    server = shared_servers()  # the session's: no PHASEGRAPH_CORS_ORIGINS
    preflight = _preflight(server, "POST", "/threads/search")
    assert preflight.status_code == 405
    answer = httpx.post(f"{server.url}/threads/search", json={}, headers={"Origin": PAGE}, timeout=30)
    assert answer.status_code == 200
    assert not [h for h in answer.headers if h.startswith("access-control-")]
    assert not [h for h in preflight.headers if h.startswith("access-control-")]


def test_any_origin_and_malformed_origins() -> None:
    assert ServerSettings(cors_origins=" * ").cors_origin_list() == ["*"]
    assert ServerSettings(cors_origins="http://a:1, https://b.example").cors_origin_list() == [
        "http://a:1",
        "https://b.example",
    ]
    assert ServerSettings().cors_origin_list() == []
    for wrong in ("http://localhost:5173/", "localhost:5173", "*,http://a", "https://a.example/app"):
        with pytest.raises(ValidationError, match="cors_origins"):
            ServerSettings(cors_origins=wrong)
