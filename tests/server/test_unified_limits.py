"""unified under the server: the run is re-invoked at every pause point, yet its budgets hold per turn."""

import httpx

from tests.server.conftest import allowing_scripts, scripts, stream, unique

#: Far above the budget: a stream that gets here never ended on its own.
RUNAWAY = 40


def test_a_looping_script_ends_at_the_tool_call_budget(shared_servers, tmp_path_factory):
    # the model lists the docs again and again (the ``loop`` script)
    server, loop = shared_servers(**allowing_scripts(tmp_path_factory)), scripts(tmp_path_factory)["loop"]
    request_id = unique("loop")
    results = []

    def guard(event):
        results.append(event) if event.type == "tool_result" else None
        assert len(results) < RUNAWAY, "the run kept calling tools past its budget"

    with httpx.Client(base_url=server.url) as client:
        body = {
            "message": "List the docs forever",
            "projectId": "proj",
            "requestId": request_id,
            "model": loop,
        }
        events = stream(client, "POST", "/api/chat/messages", on_event=guard, json=body)
        assert len(results) == 8
        budget = [e for e in events if e.type == "budget_exhausted"]
        assert [(e.budget, e.limit, e.used) for e in budget] == [("tool_calls", 8, 8)]
        assert events[-1].type == "final" and events[-1].fallback
        assert client.get(f"/api/requests/{request_id}").json()["status"] == "completed"
