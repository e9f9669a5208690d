"""``phasegraph inspect`` reads a thread's timeline straight from the server's database."""

import json

import httpx
from typer.testing import CliRunner

from phasegraph.server.cli.main import app
from tests.server.conftest import stream, unique


def test_inspect_prints_the_timeline_and_a_checkpoint(shared_servers, monkeypatch):
    server, request_id, nope = shared_servers(), unique("req-inspect"), unique("nope")
    database = server.env["PHASEGRAPH_CHECKPOINTER"]  # the session's server: the thread's id is its own
    with httpx.Client(base_url=server.url) as client:
        body = {"message": "Summarise", "projectId": "p", "requestId": request_id}
        stream(client, "POST", "/api/chat/messages_two_stage", json=body)
        timeline = client.get(f"/api/threads/{request_id}/checkpoints").json()
    monkeypatch.setenv("PHASEGRAPH_CHECKPOINTER", database)
    monkeypatch.setenv("COLUMNS", "220")
    runner = CliRunner()
    shown = runner.invoke(app, ["inspect", request_id])
    assert shown.exit_code == 0, shown.output
    for fragment in (
        f"thread {request_id} (triggered_phase, project p)",
        "tool_phase",
        "complete_turn",
        "(end)",
    ):
        assert fragment in shown.stdout
    one = runner.invoke(app, ["inspect", request_id, "--checkpoint", timeline[-1]["checkpointId"]])
    assert one.exit_code == 0
    assert json.loads(one.stdout)["values"]["answer"].startswith("The roadmap has two milestones.")
    missing = runner.invoke(app, ["inspect", nope])
    assert missing.exit_code == 2 and f"thread '{nope}' does not exist" in missing.stderr
