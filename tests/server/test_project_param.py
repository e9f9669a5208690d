"""``?projectId=`` names the one project of a request: a body naming another is refused (403), saying why."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from phasegraph.nodes.models import DEMO_WORKSPACE
from phasegraph.nodes.settings import ServerSettings
from phasegraph.server.app import create_app

RUN = "/api/runs/triggered_phase/stream"


@pytest.fixture(scope="module")
def client() -> Iterator[TestClient]:
    settings = ServerSettings(checkpointer="memory", workspace=str(DEMO_WORKSPACE))  # no tokens: auth off
    with TestClient(create_app(settings)) as test_client:
        yield test_client


def test_a_query_and_a_body_naming_different_projects_are_refused_saying_so(client: TestClient):
    body = {"message": "Summarise the roadmap", "projectId": "beta", "requestId": "differ-1"}
    answer = client.post(RUN, params={"projectId": "alpha"}, json=body)
    assert answer.status_code == 403, answer.text
    assert "?projectId=alpha and the request's project 'beta' differ" in answer.text
    assert "token" not in answer.text  # no token exists: nothing is said of one
    ran = client.get("/api/requests/differ-1", params={"projectId": "beta"})
    assert ran.status_code == 404  # nothing ran


def test_a_query_and_a_body_naming_the_same_project_run(client: TestClient):
    body = {"message": "Summarise the roadmap", "projectId": "alpha", "requestId": "agree-1"}
    with client.stream("POST", RUN, params={"projectId": "alpha"}, json=body) as answer:
        assert answer.status_code == 200
        assert "event: final" in answer.read().decode()
