"""With no PHASEGRAPH_WORKSPACE the server reads where the CLI does: the demo data for the demo model."""

from pathlib import Path

import httpx
import pytest

from phasegraph.nodes.events import Final, ToolResultEvent
from tests.server.conftest import Server, stream

RUN = "/api/runs/triggered_phase/stream"


def _serve(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, **env: str) -> Server:
    # The quick start: `phasegraph serve` from a folder of the user's (here an empty one), no workspace set.
    monkeypatch.delenv("PHASEGRAPH_WORKSPACE", raising=False)
    started = tmp_path / "started-here"
    started.mkdir()
    env = {"PHASEGRAPH_CHECKPOINTER": f"sqlite:{tmp_path / 'state.db'}", **env}
    return Server(env=env, log=tmp_path / "server.log", cwd=started).start()


def test_the_demo_model_reads_the_bundled_demo_workspace_as_the_cli_does(tmp_path, monkeypatch):
    server = _serve(tmp_path, monkeypatch)
    try:
        with httpx.Client(base_url=server.url) as client:
            events = stream(
                client, "POST", RUN, json={"message": "Summarise the roadmap", "showToolOutputs": True}
            )
    finally:
        server.stop()
    results = [e for e in events if isinstance(e, ToolResultEvent)]
    assert results and all(r.status == "ok" for r in results), [r.error for r in results]
    assert results[0].output == "docs/roadmap.md\ndocs/team.md"
    assert isinstance(events[-1], Final) and "two milestones" in events[-1].answer


def test_another_model_reads_the_folder_the_server_started_in(tmp_path, monkeypatch):
    script = tmp_path / "script.json"
    script.write_text(
        '{"turns": [{"content": "Look.", "tool_calls": [{"name": "list_files", "args": {"path": "."}}]},'
        ' {"content": "Done."}]}',
        encoding="utf-8",
    )
    server = _serve(tmp_path, monkeypatch, PHASEGRAPH_MODEL=f"scripted:{script}")
    (tmp_path / "started-here" / "mine.txt").write_text("hello", encoding="utf-8")
    try:
        with httpx.Client(base_url=server.url) as client:
            events = stream(client, "POST", RUN, json={"message": "List", "showToolOutputs": True})
    finally:
        server.stop()
    results = [e for e in events if isinstance(e, ToolResultEvent)]
    assert [(r.status, r.output) for r in results] == [("ok", "mine.txt")]
