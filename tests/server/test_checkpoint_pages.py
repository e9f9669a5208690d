"""A thread's checkpoint timeline comes in bounded pages that chain without gaps or repeats."""

import itertools

import httpx

from tests.server.conftest import stream, unique

RUN = "/api/runs/triggered_phase/stream"


def test_checkpoints_come_in_pages_linked_from_newest_to_oldest(shared_servers):
    server, paged = shared_servers(), unique("paged")
    with httpx.Client(base_url=server.url) as client:
        stream(client, "POST", RUN, json={"message": "Summarise the roadmap", "requestId": paged})
        whole = client.get(f"/api/threads/{paged}/checkpoints", params={"limit": 500})
        assert whole.status_code == 200 and "link" not in whole.headers
        everything = whole.json()
        assert len(everything) > 7  # several phases, so several pages of 3

        default = client.get(f"/api/threads/{paged}/checkpoints").json()
        assert default == everything  # the default page (50) holds this short thread

        pages, url = [], f"/api/threads/{paged}/checkpoints?limit=3"
        while url:
            response = client.get(url)
            assert response.status_code == 200
            pages.append(response.json())
            link = response.headers.get("link")
            url = link[1 : link.index(">")] if link else None
        assert all(1 <= len(page) <= 3 for page in pages) and len(pages[0]) == 3
        chained = [row for page in reversed(pages) for row in page]  # each page is oldest first
        assert chained == everything  # same rows, same nodes: no gap, no repeat
        assert everything[0]["node"] is None and all(row["node"] for row in everything[1:])


def test_bad_page_parameters_are_refused(shared_servers):
    server, pages = shared_servers(), unique("pages")
    with httpx.Client(base_url=server.url) as client:
        stream(client, "POST", RUN, json={"message": "Hi", "requestId": pages})
        for limit in (0, 501, "x"):
            refused = client.get(f"/api/threads/{pages}/checkpoints", params={"limit": limit})
            assert refused.status_code == 422
        unknown = client.get(f"/api/threads/{pages}/checkpoints", params={"before": "no-such-checkpoint"})
        assert unknown.status_code == 404 and "no-such-checkpoint" in unknown.json()["message"]


def test_the_timeline_is_a_tree_edits_and_forks_branch_off_their_parent(shared_servers):
    """An edit at an older checkpoint and the run from it hang off that checkpoint, not off the newest."""
    server, tree = shared_servers(), unique("tree")
    with httpx.Client(base_url=server.url) as client:
        stream(client, "POST", RUN, json={"message": "Summarise the roadmap", "requestId": tree})
        first = client.get(f"/api/threads/{tree}/checkpoints", params={"limit": 500}).json()
        # each row continues the one before it, and names the node its parent had next
        assert first[0]["parentId"] is None and first[0]["source"] == "input"
        for before, row in itertools.pairwise(first):
            assert row["parentId"] == before["checkpointId"] and row["source"] == "loop"
            assert row["node"] == ",".join(before["next"]) and row["interrupts"] == []
        at = next(row for row in first if row["next"] == ["tool_phase"])
        edit = client.post(f"/threads/{tree}/state", json={"values": {}, "checkpoint_id": at["checkpointId"]})
        assert edit.status_code == 200, edit.text
        edited = edit.json()["checkpoint_id"]
        replay = client.post(
            f"/threads/{tree}/runs/wait",
            json={"assistant_id": "triggered_phase", "input": None, "checkpoint_id": edited},
        )
        assert replay.status_code == 200, replay.text

        listed = client.get(f"/api/threads/{tree}/checkpoints", params={"limit": 500}).json()
        rows = {row["checkpointId"]: row for row in listed}
        assert rows[edited]["parentId"] == at["checkpointId"]
        assert rows[edited]["source"] == "update" and rows[edited]["node"] is None  # no node ran: an edit
        branch = [row for row in rows.values() if row["parentId"] == edited]
        assert len(branch) == 1 and branch[0]["node"] == ",".join(rows[edited]["next"])
        # the original line is still whole: the checkpoint edited at now has two children
        assert len([row for row in rows.values() if row["parentId"] == at["checkpointId"]]) == 2


def test_a_replay_from_an_older_checkpoint_starts_with_a_fork_no_node_ran_for(shared_servers):
    server, replayed = shared_servers(), unique("replayed")
    with httpx.Client(base_url=server.url, timeout=60) as client:
        stream(client, "POST", RUN, json={"message": "Summarise the roadmap", "requestId": replayed})
        first = client.get(f"/api/threads/{replayed}/checkpoints", params={"limit": 500}).json()
        at = next(row for row in first if row["next"] == ["tool_phase"])
        replay = client.post(
            f"/threads/{replayed}/runs/wait",
            json={"assistant_id": "triggered_phase", "input": None, "checkpoint_id": at["checkpointId"]},
        )
        assert replay.status_code == 200, replay.text
        rows = client.get(f"/api/threads/{replayed}/checkpoints", params={"limit": 500}).json()
        fork = next(row for row in rows if row["parentId"] == at["checkpointId"] and row["source"] == "fork")
        assert fork["node"] is None and fork["next"] == ["tool_phase"]  # nothing ran yet: tool_phase is next
        after = next(row for row in rows if row["parentId"] == fork["checkpointId"])
        assert after["node"] == "tool_phase"  # and then it ran, once
