"""The page's graph debugger, in Debian's headless Chromium against a real server, for every protocol.

For each protocol: the Debug tab draws the protocol's graph; while a run sent from the chat streams, the
lit node follows it; a checkpoint's state and what changed show; an edited counter saved at an older
checkpoint forks the thread, and the run from it ends the way the edit makes it (a budget stop the
original run never reached); the fork shows as a branch of the timeline. Screenshots go to
``$PHASEGRAPH_SCREENSHOTS`` (or the test's tmp folder).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.sync_api import Page, expect

from phasegraph.graphs.registry import PROTOCOLS
from tests.browser import needs_chromium, open_page
from tests.server.conftest import Server, needs_postgres
from tests.server.test_browser import WAIT, send

pytestmark = needs_chromium

MESSAGE = "Summarise the roadmap"
#: each protocol's model pace (ms per streamed chunk): slow enough to see the run move, fast enough
CHUNK_DELAY_MS = 25
#: and a pause before each answer asked for whole (structured decisions, not streamed: goal_pursuit's
#: phases, agent_network's agents, ...), so every protocol's run lasts long enough to be seen moving
CALL_DELAY_MS = 150
#: protocol -> (counter edited, at the first checkpoint whose next is this node, the node the fork then
#: ends at: the counter's budget stop, which the unedited run never reaches)
BUDGET_EDITS = {
    "triggered_phase": ("cycles_used", "tool_phase", "final_phase"),
    "xml_contract": ("steps", "execute_blocks", "answer_without_tools"),
    "agent_network": ("steps", "use_tool", "stop_at_max_steps"),
    "goal_pursuit": ("iteration", "analyze_refinement", "return_last_planned"),
    "planner": ("tool_calls_used", "run_tools", "stop_at_tool_cap"),
}
EDITED_ANSWER = "An answer written by hand in the debugger."


def screenshots(tmp_path: Path) -> Path:
    """Where a reviewer finds the screenshots: ``$PHASEGRAPH_SCREENSHOTS``, else the test's folder."""
    folder = Path(os.environ.get("PHASEGRAPH_SCREENSHOTS") or tmp_path)
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def paced_project(folder: Path, more: str = "") -> Path:
    """A phasegraph.toml giving every protocol its bundled demo script, paced for the eye (and ``more``)."""
    lines = ["[models]"]
    for name in PROTOCOLS:
        demo = PROTOCOLS[name].context_schema().DEMO_SCRIPT
        script = json.loads(demo.read_text(encoding="utf-8"))
        script["chunk_delay_ms"] = CHUNK_DELAY_MS
        script["call_delay_ms"] = CALL_DELAY_MS
        paced = folder / f"{name}.json"
        paced.write_text(json.dumps(script), encoding="utf-8")
        lines.append(f'{name} = "scripted:{paced}"')
    project = folder / "phasegraph.toml"
    project.write_text("\n".join(lines) + "\n" + more, encoding="utf-8")
    return project


def start_server(folder: Path, project: str = "", **env: str) -> Server:
    """A server on ``folder``'s paced project (with ``project`` added to its file); ``env`` overrides."""
    base = {
        "PHASEGRAPH_CHECKPOINTER": f"sqlite:{folder / 'state.db'}",
        "PHASEGRAPH_CONFIG": str(paced_project(folder, project)),
        "PHASEGRAPH_TWO_STAGE_ENABLED": "true",  # the page's triggered_phase chats take their own route
    }
    return Server(env={**base, **env}, log=folder / "server.log").start()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    started = start_server(tmp_path_factory.mktemp("debugger"))
    try:
        yield started
    finally:
        started.stop()


def drawn_nodes(page: Page) -> set[str]:
    return set(
        page.locator("#graph [data-testid='graph-node']").evaluate_all("ns => ns.map(n => n.dataset.node)")
    )


def timeline(server: Server, thread_id: str, project: str = "default") -> list[dict[str, Any]]:
    params = {"limit": 500, "projectId": project}
    rows = httpx.get(f"{server.url}/api/threads/{thread_id}/checkpoints", params=params)
    assert rows.status_code == 200, rows.text
    return rows.json()


def record_lit_nodes(page: Page) -> None:
    """Keep every value the drawing's ``data-active`` takes (the lit nodes), in order."""
    page.evaluate(
        """() => {
          window.litNodes = [];
          const svg = document.querySelector('#graph svg');
          const keep = () => { const now = svg.dataset.active || '';
            if (now && window.litNodes[window.litNodes.length - 1] !== now) window.litNodes.push(now); };
          new MutationObserver(keep).observe(svg, { attributes: true, attributeFilter: ['data-active'] });
          keep();
        }"""
    )


def debug(page: Page, server: Server, protocol: str) -> None:
    """Open the page with ``protocol`` picked, in the Debug tab."""
    page.goto(server.url)
    page.locator("#protocol").select_option(protocol)
    page.locator("[data-testid='tab-debug']").click()


def send_from_chat(page: Page, message: str = MESSAGE) -> None:
    """Go to the Chat tab and send ``message`` (the page stays on Chat)."""
    page.locator("[data-testid='tab-chat']").click()
    send(page, message)


def run_in_chat_and_follow(page: Page, server: Server, protocol: str) -> str:
    """Send the message from the chat, watch the run in the Debug tab; the thread's id."""
    debug(page, server, protocol)
    expect(page.locator("#graph svg[data-testid='graph']")).to_have_attribute("data-protocol", protocol)
    record_lit_nodes(page)
    send_from_chat(page)
    page.locator("[data-testid='tab-debug']").click()
    expect(page.locator("#debug-status")).to_have_text("finished", timeout=WAIT * 3)
    thread_id = page.evaluate("() => new URL(location.href).searchParams.get('thread')")
    assert thread_id
    return str(thread_id)


def check_graph_followed_the_run(
    page: Page, server: Server, protocol: str, rows: list[dict[str, Any]]
) -> None:
    graph = httpx.get(f"{server.url}/assistants/{protocol}/graph", params={"xray": 0}).json()
    assert drawn_nodes(page) == {node["id"] for node in graph["nodes"]}  # the protocol's own nodes
    ran = [row["next"] for row in rows if row["next"]]  # what ran at each step, in order
    lit = [entry.split(",") for entry in page.evaluate("() => window.litNodes")]
    assert len({tuple(entry) for entry in lit}) >= 2, f"the lit node never moved: {lit}"
    steps = iter(ran)  # each lit node is a step of the run, in the run's order
    assert all(any(entry == step for step in steps) for entry in lit), (
        f"lit {lit} is not in the run's order {ran}"
    )
    visited = page.locator("#graph [data-testid='graph-node'].visited")
    expect(visited.first).to_be_visible()
    ran_nodes = {node for step in ran for node in step} - {"__start__"}
    assert set(visited.evaluate_all("ns => ns.map(n => n.dataset.node)")) <= ran_nodes


def open_checkpoint(page: Page, row: dict[str, Any]) -> None:
    page.locator(f"[data-testid='timeline-item'][data-checkpoint-id='{row['checkpointId']}'] button").click()
    expect(page.locator("#state-checkpoint")).to_contain_text(row["checkpointId"])


def save_edit(page: Page, field: str, value: Any) -> None:
    page.locator("[data-testid='edit-field']").select_option(field)
    page.locator("[data-testid='edit-value']").fill(json.dumps(value))
    page.locator("[data-testid='edit-save']").click()
    expect(page.locator("[data-testid='edit-error']")).to_be_empty()


def edit_and_fork(
    page: Page, server: Server, protocol: str, thread_id: str, rows: list[dict[str, Any]]
) -> str:
    """Edit the run at an older checkpoint and run the thread from the edit; the node the fork ended at."""
    if protocol == "unified":  # its state has no counter: the model's tool-calling message becomes an answer
        at = next(row for row in rows if row["next"] == ["tools"])
        open_checkpoint(page, at)
        page.locator("[data-testid='edit-field']").select_option("messages")
        messages = json.loads(page.locator("[data-testid='edit-value']").input_value())
        messages[-1] = {**messages[-1], "content": EDITED_ANSWER, "tool_calls": []}
        save_edit(page, "messages", messages)
        goal = "FinalAnswerMiddleware.after_agent"
    else:
        field, before, goal = BUDGET_EDITS[protocol]
        at = next(row for row in rows if row["next"] == [before])
        open_checkpoint(page, at)
        # the state shows, and so does what the step before changed
        expect(page.locator("[data-testid='state-summary']")).to_contain_text(at["node"])
        expect(page.locator("[data-testid='diff-item']").first).to_be_visible()
        expect(page.locator(f"[data-testid='state-counter'][data-field='{field}']")).to_be_visible()
        save_edit(page, field, 1000)
    # the edit is a new checkpoint on the one edited, selected; the run from it is a branch
    edited = page.locator("[data-testid='timeline-item'][data-source='update']")
    expect(edited).to_have_count(1)
    expect(edited).to_have_class("timeline-item selected")
    page.locator("[data-testid='continue-run']").click()
    expect(page.locator("#debug-status")).to_have_text("finished", timeout=WAIT * 3)
    expect(page.locator("[data-testid='timeline-branch']")).to_have_count(1)
    expect(page.locator(f"[data-testid='timeline-branch'] [data-node='{goal}']").first).to_be_visible()
    return goal


@pytest.mark.parametrize("protocol", list(PROTOCOLS))
def test_the_debugger_follows_inspects_and_forks_a_run(server: Server, protocol: str, tmp_path: Path) -> None:
    with open_page() as page:
        page.set_viewport_size({"width": 1500, "height": 1100})
        thread_id = run_in_chat_and_follow(page, server, protocol)
        first = timeline(server, thread_id)
        check_graph_followed_the_run(page, server, protocol, first)
        page.screenshot(path=str(screenshots(tmp_path) / f"debugger-{protocol}-run.png"), full_page=True)

        goal = edit_and_fork(page, server, protocol, thread_id, first)
        page.screenshot(path=str(screenshots(tmp_path) / f"debugger-{protocol}-fork.png"), full_page=True)

    # the server agrees: the original line never reached the budget stop, the fork did, from the edit
    rows = {row["checkpointId"]: row for row in timeline(server, thread_id)}
    edit = next(row for row in rows.values() if row["source"] == "update")
    if protocol != "unified":  # (unified's goal is its usual end: its edit shows in the answer below)
        assert goal not in {row["node"] for row in first}
    fork = [row for row in rows.values() if row["checkpointId"] not in {r["checkpointId"] for r in first}]
    assert goal in {row["node"] for row in fork} and edit["parentId"] in {
        row["checkpointId"] for row in first
    }
    final = httpx.get(f"{server.url}/threads/{thread_id}/state").json()
    if protocol == "unified":
        assert final["values"]["messages"][-1]["content"] == EDITED_ANSWER


def test_breakpoints_stop_a_replay_where_picked_and_the_replay_is_a_branch(
    server: Server, tmp_path: Path
) -> None:
    with open_page() as page:
        page.set_viewport_size({"width": 1500, "height": 1100})
        thread_id = run_in_chat_and_follow(page, server, "triggered_phase")
        first = timeline(server, thread_id)
        # a breakpoint before final_phase (the path is never taken here) and before tool_phase
        before = page.locator("[data-testid='break-before'][data-node='tool_phase']")
        before.check()
        expect(page.locator("#graph [data-node='tool_phase']")).to_have_class(re.compile(r"\bbreak-before\b"))
        page.locator("#graph [data-node='final_phase']").click()  # clicking a node toggles its stop-before
        expect(page.locator("[data-testid='break-before'][data-node='final_phase']")).to_be_checked()

        # replay the turn from its input: the run stops before tool_phase, and shows where it waits
        open_checkpoint(page, first[0])
        expect(page.locator("[data-testid='continue-run']")).to_have_text("Replay from here")
        page.locator("[data-testid='continue-run']").click()
        expect(page.locator("#debug-status")).to_have_text("paused before tool_phase", timeout=WAIT * 2)
        expect(page.locator("#graph svg")).to_have_attribute("data-waiting", "tool_phase")
        expect(page.locator("#graph [data-node='tool_phase']")).to_have_class(re.compile(r"\bwaiting\b"))
        expect(page.locator("[data-testid='timeline-branch']")).to_have_count(1)
        page.screenshot(path=str(screenshots(tmp_path) / "debugger-breakpoint.png"))

        # without the stop, Continue goes on from the pause to the end, on the same branch
        before.uncheck()
        expect(page.locator("[data-testid='continue-run']")).to_have_text("Continue from here")
        page.locator("[data-testid='continue-run']").click()
        expect(page.locator("#debug-status")).to_have_text("finished", timeout=WAIT * 2)
        expect(page.locator("[data-testid='timeline-branch']")).to_have_count(1)
    rows = timeline(server, thread_id)
    replayed = [row for row in rows if row["checkpointId"] not in {r["checkpointId"] for r in first}]
    assert replayed[0]["parentId"] == first[0]["checkpointId"]  # the branch starts at the input replayed
    assert [row["node"] for row in replayed][-1] == "complete_turn" and not replayed[-1]["next"]


def test_the_planners_executor_expands_and_its_run_marks_it(server: Server) -> None:
    with open_page() as page:
        page.set_viewport_size({"width": 1500, "height": 1100})
        debug(page, server, "triggered_phase")  # no subgraph: nothing to expand
        expect(page.locator("#graph [data-node='tool_phase']")).to_have_count(1)
        expect(page.locator("[data-testid='expand-subgraphs']")).to_be_hidden()
        debug(page, server, "planner")
        expect(page.locator("#graph [data-node='execute_plan']")).to_have_count(1)
        expect(page.locator("[data-testid='expand-subgraphs']")).to_be_visible()
        page.locator("[data-testid='expand-subgraphs']").check()
        cluster = page.locator("#graph [data-testid='graph-cluster'][data-subgraph='execute_plan']")
        expect(cluster).to_have_count(1)
        inside = {"execute_plan:start_plan", "execute_plan:run_step", "execute_plan:finish_plan"}
        assert inside <= drawn_nodes(page) and "execute_plan" not in drawn_nodes(page)
        # the breakpoints stay the protocol's own nodes: a run stops at the executor, not inside it
        assert page.locator("[data-testid='break-before'][data-node='execute_plan']").count() == 1
        send_from_chat(page)
        page.locator("[data-testid='tab-debug']").click()
        expect(page.locator("#debug-status")).to_have_text("finished", timeout=WAIT * 3)
        expect(cluster).to_have_class(re.compile(r"\bvisited\b"))


def test_threads_are_searched_by_metadata_and_words_and_open_in_the_debugger(server: Server) -> None:
    made: dict[str, str] = {}
    project = {"X-Phasegraph-Project": "searching"}
    with httpx.Client(base_url=server.url, headers=project, timeout=60) as client:
        for title, team in (
            ("Roadmap questions", "red"),
            ("Release notes", "red"),
            ("Roadmap for blue", "blue"),
        ):
            thread = client.post("/threads", json={"metadata": {"title": title, "team": team}}).json()
            made[title] = thread["thread_id"]
            ran = client.post(
                f"/threads/{thread['thread_id']}/runs/wait",
                json={
                    "assistant_id": "xml_contract",
                    "input": {"messages": [{"type": "human", "content": title}]},
                },
            )
            assert ran.status_code == 200, ran.text
    with open_page() as page:
        page.goto(f"{server.url}/?project=searching")
        titles = page.locator("[data-testid='thread-item'] .thread-title")
        expect(titles).to_have_count(3)
        search = page.locator("[data-testid='thread-search']")
        search.fill("team=red")
        expect(titles).to_have_text(["Release notes", "Roadmap questions"])
        search.fill("team=red roadmap")
        expect(titles).to_have_text(["Roadmap questions"])
        search.fill("team=green")
        expect(page.locator("#threads")).to_contain_text("No thread of this project matches the search.")
        search.fill("team=007")  # not the number 7: text, as typed (and no page error)
        expect(page.locator("#threads")).to_contain_text("No thread of this project matches the search.")
        search.fill("blue")
        expect(titles).to_have_text(["Roadmap for blue"])
        # a past thread opens in the debugger as any other: its protocol's graph and its timeline
        page.locator("[data-testid='thread-item'] .thread-open").click()
        page.locator("[data-testid='tab-debug']").click()
        expect(page.locator("#graph svg")).to_have_attribute("data-protocol", "xml_contract")
        expect(page.locator("#timeline-thread")).to_have_text(f"· {made['Roadmap for blue']}")
        expect(page.locator("#debug-status")).to_have_text("finished", timeout=WAIT)
        rows = timeline(server, made["Roadmap for blue"], "searching")
        expect(page.locator("[data-testid='timeline-item']")).to_have_count(len(rows))


#: a project policy: a person approves every list_files call before it runs
APPROVE_LIST_FILES = "\n[tools.list_files]\nconfirm = true\n"


@pytest.mark.parametrize("store", ["embedded", pytest.param("postgres", marks=needs_postgres)])
def test_a_run_waiting_for_an_approval_shows_where_it_waits(store: str, tmp_path: Path) -> None:
    """The embedded default store and Postgres alike: the pause, its question, then the rest of the run."""
    database = (
        {"PHASEGRAPH_CHECKPOINTER": os.environ["PHASEGRAPH_TEST_POSTGRES_URL"]} if store == "postgres" else {}
    )
    server = start_server(tmp_path, APPROVE_LIST_FILES, **database)
    try:
        with open_page() as page:
            page.set_viewport_size({"width": 1500, "height": 1100})
            page.goto(server.url)
            page.locator("#protocol").select_option("triggered_phase")
            page.locator("#message").fill(MESSAGE)
            page.locator("#send").click()
            expect(page.locator("[data-testid='approval']")).to_be_visible(timeout=WAIT)
            page.locator("[data-testid='tab-debug']").click()
            expect(page.locator("#debug-status")).to_have_text(
                "waits for an answer at tool_phase", timeout=WAIT
            )
            expect(page.locator("#graph svg")).to_have_attribute("data-waiting", "tool_phase")
            waits = page.locator("[data-testid='timeline-item'].selected .timeline-waits")
            expect(waits).to_have_text("waits: approval")
            expect(page.locator("[data-testid='state-waits']")).to_contain_text("approval")
            page.screenshot(path=str(screenshots(tmp_path) / f"debugger-approval-{store}.png"))
            # no Continue without the answer, and the tab says where to give it; the answer lets it go on
            expect(page.locator("[data-testid='continue-run']")).to_be_disabled()
            expect(page.locator("#run-notice")).to_contain_text("answer it in the Chat tab")
            page.locator("[data-testid='tab-chat']").click()
            page.locator("[data-testid='approve']").click()
            expect(page.locator("#status")).to_have_text("done", timeout=WAIT * 2)
            page.locator("[data-testid='tab-debug']").click()
            expect(page.locator("#debug-status")).to_have_text("finished", timeout=WAIT)
    finally:
        server.stop()


def test_a_breakpoint_pauses_the_next_chat_message_too(server: Server) -> None:
    with open_page() as page:
        debug(page, server, "xml_contract")
        page.locator("[data-testid='break-before'][data-node='execute_blocks']").check()
        send_from_chat(page)
        expect(page.locator("#status")).to_have_text("paused", timeout=WAIT)
        page.locator("[data-testid='tab-debug']").click()
        expect(page.locator("#debug-status")).to_have_text("paused before execute_blocks", timeout=WAIT)
        page.locator("[data-testid='tab-chat']").click()
        resumes, status = 0, page.locator("#status")
        while status.inner_text() == "paused" and resumes < 5:  # it pauses before each execute_blocks
            page.locator("#resume").click()
            resumes += 1
            expect(status).not_to_have_text("paused", timeout=WAIT)
            expect(status).to_have_text(re.compile("^(paused|done)$"), timeout=WAIT)
    assert resumes == 2  # the demo proposes two blocks of calls: it paused before each


def test_a_new_run_is_followed_after_an_older_checkpoint_was_picked(server: Server) -> None:
    """Picking an old checkpoint holds the view there only until the thread's next run starts."""
    with open_page() as page:
        page.set_viewport_size({"width": 1500, "height": 1100})
        thread_id = run_in_chat_and_follow(page, server, "xml_contract")
        first = timeline(server, thread_id)
        open_checkpoint(page, first[2])
        expect(page.locator("#debug-status")).to_contain_text("the thread went on from here")
        record_lit_nodes(page)
        send_from_chat(page, "And who works on it?")
        page.locator("[data-testid='tab-debug']").click()
        expect(page.locator("#debug-status")).to_have_text("finished", timeout=WAIT * 3)
        newest = timeline(server, thread_id)[-1]
        expect(page.locator("[data-testid='timeline-item'].selected")).to_have_attribute(
            "data-checkpoint-id", newest["checkpointId"]
        )
        assert len(page.evaluate("() => window.litNodes")) >= 2  # the lit node moved with the new run


def test_a_thread_without_checkpoints_says_so(server: Server) -> None:
    with httpx.Client(base_url=server.url) as client:
        made = client.post("/threads", json={"metadata": {"title": "Never run", "graph_id": "planner"}})
        thread_id = made.json()["thread_id"]
    with open_page() as page:
        page.goto(f"{server.url}/?thread={thread_id}&view=debug")
        expect(page.locator("[data-testid='debugger']")).to_be_visible()
        expect(page.locator("#timeline")).to_contain_text("This thread has no checkpoints yet", timeout=WAIT)
        expect(page.locator("#debug-status")).to_have_text("This thread has no checkpoints yet.")
        expect(page.locator("#graph [data-testid='graph-node'].visited")).to_have_count(0)
        page.locator("[data-testid='tab-chat']").click()  # the address keeps the tab shown
        assert "view=debug" not in page.url
        page.locator("[data-testid='tab-debug']").click()
        assert "view=debug" in page.url


def test_breakpoints_apply_to_a_triggered_phase_chat_with_the_two_stage_route_off(tmp_path: Path) -> None:
    """The page runs triggered_phase on its own route whatever the two-stage switch, so its breakpoints hold
    (a chat sent to the legacy route's fallback ran unified, whose nodes they did not name)."""
    server = Server(
        env={
            "PHASEGRAPH_CHECKPOINTER": f"sqlite:{tmp_path / 'state.db'}",
            "PHASEGRAPH_TWO_STAGE_ENABLED": "false",
        },
        log=tmp_path / "server.log",
    ).start()
    try:
        with open_page() as page:
            debug(page, server, "triggered_phase")
            page.locator("[data-testid='break-before'][data-node='tool_phase']").check()
            send_from_chat(page)
            expect(page.locator("#status")).to_have_text("paused", timeout=WAIT)
            page.locator("[data-testid='tab-debug']").click()
            expect(page.locator("#debug-status")).to_have_text("paused before tool_phase", timeout=WAIT)
    finally:
        server.stop()
