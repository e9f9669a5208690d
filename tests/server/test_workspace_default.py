"""With no PHASEGRAPH_WORKSPACE the server reads where the CLI does: the demo data for the demo model."""

from pathlib import Path

import httpx
import pytest

from phasegraph.nodes.events import Final, ToolResultEvent
from tests.server.conftest import Server, stream

RUN = "/api/runs/triggered_phase/stream"


def _results(client: httpx.Client, **body: str) -> tuple[list[ToolResultEvent], object]:
    events = stream(client, "POST", RUN, json={**body, "showToolOutputs": True})
    return [e for e in events if isinstance(e, ToolResultEvent)], events[-1]


def test_the_demo_model_reads_the_bundled_demo_workspace_and_another_model_the_folder_started_in(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    # The quick start: `phasegraph serve` from a folder of the user's, no workspace set.
    monkeypatch.delenv("PHASEGRAPH_WORKSPACE", raising=False)
    started = tmp_path / "started-here"
    started.mkdir()
    (started / "mine.txt").write_text("hello", encoding="utf-8")
    script = tmp_path / "script.json"
    script.write_text(
        '{"turns": [{"content": "Look.", "tool_calls": [{"name": "list_files", "args": {"path": "."}}]},'
        ' {"content": "Done."}]}',
        encoding="utf-8",
    )
    env = {
        "PHASEGRAPH_CHECKPOINTER": f"sqlite:{tmp_path / 'state.db'}",
        "PHASEGRAPH_ALLOWED_MODELS": f"scripted:{script}",
    }
    server = Server(env=env, log=tmp_path / "server.log", cwd=started).start()
    try:
        with httpx.Client(base_url=server.url) as client:
            demo, demo_end = _results(client, message="Summarise the roadmap")
            other, _ = _results(client, message="List", model=f"scripted:{script}")
    finally:
        server.stop()
    # the demo model, as `phasegraph run` without --model: the bundled demo workspace
    assert demo and all(r.status == "ok" for r in demo), [r.error for r in demo]
    assert demo[0].output == "docs/roadmap.md\ndocs/team.md"
    assert isinstance(demo_end, Final) and "two milestones" in demo_end.answer
    # any other model: the folder the server started in
    assert [(r.status, r.output) for r in other] == [("ok", "mine.txt")]
