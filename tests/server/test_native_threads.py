"""A thread that phasegraph's own routes or the command started is listed like the API's threads."""

from pathlib import Path

import httpx

from phasegraph.nodes.events import Final
from tests.server.conftest import Server, stream

RUN = "/api/runs/{protocol}/stream"


def test_a_native_turns_thread_is_listed_with_its_protocol_and_keeps_its_title(tmp_path: Path):
    env = {"PHASEGRAPH_CHECKPOINTER": f"sqlite:{tmp_path / 'state.db'}"}
    server = Server(env=env, log=tmp_path / "server.log").start()
    try:
        with httpx.Client(base_url=server.url, timeout=60) as client:
            first = stream(client, "POST", RUN.format(protocol="unified"), json={
                "message": "Summarise the roadmap", "threadId": "native-1"})  # fmt: skip
            assert isinstance(first[-1], Final)
            found = client.post("/threads/search", json={"metadata": {"graph_id": "unified"}}).json()
            assert [t["thread_id"] for t in found] == ["native-1"]
            assert found[0]["metadata"] == {"graph_id": "unified", "assistant_id": "unified"}
            touched = found[0]["updated_at"]
            renamed = client.patch("/threads/native-1", json={"metadata": {"title": "Roadmap"}})
            assert renamed.status_code == 200, renamed.text
            second = stream(client, "POST", RUN.format(protocol="unified"), json={
                "message": "Who is on the team?", "threadId": "native-1"})  # fmt: skip
            assert isinstance(second[-1], Final)
            again = client.get("/threads/native-1").json()
            # a later turn keeps what a client set and marks the thread touched
            assert again["metadata"] == {"graph_id": "unified", "assistant_id": "unified", "title": "Roadmap"}
            assert again["updated_at"] > touched
            # a request without a thread is a thread of its own, listed too
            alone = stream(client, "POST", RUN.format(protocol="triggered_phase"), json={"message": "Hi"})
            listed = {t["thread_id"] for t in client.post("/threads/search", json={}).json()}
            assert listed == {"native-1", alone[0].request_id}
    finally:
        server.stop()
