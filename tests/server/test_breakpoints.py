"""Breakpoints on the native chat routes: ``interruptBefore`` / ``interruptAfter`` pause a run at those nodes,
every time it reaches them, and Resume goes on; a node the protocol does not have is refused up front."""

import httpx

from tests.server.conftest import stream, unique

RUN = "/api/runs/triggered_phase/stream"
RESUME = "/api/requests/{}/resume"


def test_a_run_pauses_before_its_breakpoint_each_time_and_resume_goes_on(shared_servers):
    server, stops, after_start = shared_servers(), unique("stops"), unique("after")
    with httpx.Client(base_url=server.url, timeout=60) as client:
        body = {"message": "Summarise the roadmap", "requestId": stops, "interruptBefore": ["tool_phase"]}
        events = stream(client, "POST", RUN, json=body)
        pauses = 0
        while events[-1].type == "paused":
            assert events[-1].reason == "interrupt"
            waiting = client.get(f"/threads/{stops}/state").json()
            assert waiting["next"] == ["tool_phase"]  # stopped before it: nothing of it ran yet
            pauses += 1
            events = stream(client, "POST", RESUME.format(stops), json={})
        assert events[-1].type == "final"
        rows = client.get(f"/api/threads/{stops}/checkpoints").json()
        tools = [row for row in rows if row["node"] == "tool_phase"]
        assert pauses == len(tools) == 2  # the demo's two tool cycles: one pause before each

        after = {
            "message": "Summarise the roadmap",
            "requestId": after_start,
            "interruptAfter": ["start_turn"],
        }
        paused = stream(client, "POST", RUN, json=after)[-1]
        assert paused.type == "paused"
        assert client.get(f"/threads/{after_start}/state").json()["next"] == ["action_phase"]


def test_a_breakpoint_on_a_node_the_protocol_lacks_is_refused_and_nothing_starts(shared_servers):
    server = shared_servers()
    with httpx.Client(base_url=server.url, timeout=60) as client:
        for field in ("interruptBefore", "interruptAfter"):
            request_id = unique(f"bad-{field}")
            body = {"message": "Hi", "requestId": request_id, field: ["tool_phase", "no_such_node"]}
            refused = client.post(RUN, json=body)
            assert refused.status_code == 422
            assert field in refused.json()["message"] and "no_such_node" in refused.json()["message"]
            assert client.get(f"/api/requests/{request_id}").status_code == 404
        wrong_type = client.post(RUN, json={"message": "Hi", "interruptBefore": "tool_phase"})
        assert wrong_type.status_code == 422
