"""A thread's checkpoint timeline comes in bounded pages that chain without gaps or repeats."""

import httpx

from tests.server.conftest import stream

RUN = "/api/runs/triggered_phase/stream"


def test_checkpoints_come_in_pages_linked_from_newest_to_oldest(servers):
    server = servers()
    with httpx.Client(base_url=server.url) as client:
        stream(client, "POST", RUN, json={"message": "Summarise the roadmap", "requestId": "paged"})
        whole = client.get("/api/threads/paged/checkpoints", params={"limit": 500})
        assert whole.status_code == 200 and "link" not in whole.headers
        everything = whole.json()
        assert len(everything) > 7  # several phases, so several pages of 3

        default = client.get("/api/threads/paged/checkpoints").json()
        assert default == everything  # the default page (50) holds this short thread

        pages, url = [], "/api/threads/paged/checkpoints?limit=3"
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


def test_bad_page_parameters_are_refused(servers):
    server = servers()
    with httpx.Client(base_url=server.url) as client:
        stream(client, "POST", RUN, json={"message": "Hi", "requestId": "pages"})
        for limit in (0, 501, "x"):
            refused = client.get("/api/threads/pages/checkpoints", params={"limit": limit})
            assert refused.status_code == 422
        unknown = client.get("/api/threads/pages/checkpoints", params={"before": "no-such-checkpoint"})
        assert unknown.status_code == 404 and "no-such-checkpoint" in unknown.json()["message"]
