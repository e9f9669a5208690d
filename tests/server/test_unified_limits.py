"""unified under the server: the run is re-invoked at every pause point, yet its budgets hold per turn."""

from pathlib import Path

import httpx

from tests.helpers import turn, write_script
from tests.server.conftest import stream

#: Far above the budget: a stream that gets here never ended on its own.
RUNAWAY = 40


def test_a_looping_script_ends_at_the_tool_call_budget(servers, tmp_path: Path):
    script = write_script(tmp_path, turn("", ("list_files", {"path": "docs"})), repeat_last=True)
    server = servers(PHASEGRAPH_MODEL=script)
    results = []

    def guard(event):
        results.append(event) if event.type == "tool_result" else None
        assert len(results) < RUNAWAY, "the run kept calling tools past its budget"

    with httpx.Client(base_url=server.url) as client:
        body = {"message": "List the docs forever", "projectId": "proj", "requestId": "loop"}
        events = stream(client, "POST", "/api/chat/messages", on_event=guard, json=body)
        assert len(results) == 8
        budget = [e for e in events if e.type == "budget_exhausted"]
        assert [(e.budget, e.limit, e.used) for e in budget] == [("tool_calls", 8, 8)]
        assert events[-1].type == "final" and events[-1].fallback
        assert client.get("/api/requests/loop").json()["status"] == "completed"
