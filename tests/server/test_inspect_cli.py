"""``phasegraph inspect`` reads a thread's timeline straight from the server's database."""

import json
from pathlib import Path

import httpx
from typer.testing import CliRunner

from phasegraph.server.cli.main import app
from tests.server.conftest import stream


def test_inspect_prints_the_timeline_and_a_checkpoint(servers, tmp_path: Path, monkeypatch):
    database = f"sqlite:{tmp_path / 'inspect.db'}"
    server = servers(PHASEGRAPH_CHECKPOINTER=database)
    with httpx.Client(base_url=server.url) as client:
        body = {"message": "Summarise", "projectId": "p", "requestId": "req-inspect"}
        stream(client, "POST", "/api/chat/messages_two_stage", json=body)
        timeline = client.get("/api/threads/req-inspect/checkpoints").json()
    monkeypatch.setenv("PHASEGRAPH_CHECKPOINTER", database)
    monkeypatch.setenv("COLUMNS", "220")
    runner = CliRunner()
    shown = runner.invoke(app, ["inspect", "req-inspect"])
    assert shown.exit_code == 0, shown.output
    for fragment in (
        "thread req-inspect (triggered_phase, project p)",
        "tool_phase",
        "complete_turn",
        "(end)",
    ):
        assert fragment in shown.stdout
    one = runner.invoke(app, ["inspect", "req-inspect", "--checkpoint", timeline[-1]["checkpointId"]])
    assert one.exit_code == 0
    assert json.loads(one.stdout)["values"]["answer"].startswith("The roadmap has two milestones.")
    missing = runner.invoke(app, ["inspect", "nope"])
    assert missing.exit_code == 2 and "thread 'nope' does not exist" in missing.stderr
