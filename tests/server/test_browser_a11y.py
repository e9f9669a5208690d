"""The page's accessibility, in Debian's headless Chromium against a real server: axe-core finds no serious
or critical violation on the Chat and Debug tabs of any protocol, and the page works from the keyboard.

For each protocol, a turn of its bundled demo script fills the chat with what the protocol draws (tool
lines, the answer, plan cards, agent steps and hand-offs, XML blocks, phase headers); triggered_phase's
model instead calls a tool that waits for approval, so its chat holds an approval card, scanned both
waiting and answered. The Debug tab is scanned with the protocol's graph, the thread's timeline and a
checkpoint's state and editor drawn. axe-core is the copy tests/js pins (``make test`` installs it).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Page, expect

from phasegraph.graphs.registry import PROTOCOLS
from phasegraph.nodes.models import DEMO_WORKSPACE
from tests.browser import needs_chromium, open_page
from tests.server.conftest import Server
from tests.server.test_ag_ui_approval import ASK, PROPOSED
from tests.server.test_browser import WAIT
from tests.tool_projects import write_project, write_script

pytestmark = needs_chromium

ROOT = Path(__file__).resolve().parents[2]
AXE = ROOT / "tests" / "js" / "node_modules" / "axe-core" / "axe.min.js"
#: The impacts that fail the scan (axe's others are "moderate" and "minor").
BLOCKING = {"serious", "critical"}
#: The protocol whose model asks for an approval (the others run their demo scripts).
APPROVING = "triggered_phase"
MESSAGE = "Summarise the roadmap in the docs folder."
#: What each protocol's turn draws of its own, so the scan covers it (a protocol not named here: its answer).
OWN_LINES = {
    "triggered_phase": "[data-testid='tool-line']",
    "unified": "[data-testid='tool-line']",
    "goal_pursuit": "[data-testid='phase-header']",
    "agent_network": "[data-testid='route']",
    "xml_contract": "[data-testid='xml-block']",
    "planner": "[data-testid='plan-card']",
}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    folder = tmp_path_factory.mktemp("a11y")
    script = write_script(
        folder,
        [
            {"content": "Archiving.", "tool_calls": [{"name": "archive_everything", "args": PROPOSED}]},
            {"content": "The roadmap has two milestones; everything is archived."},
        ],
    )
    project = write_project(
        folder,
        {
            "models": {APPROVING: f"scripted:{script}"},
            "python_tools": {"archive_everything": "tests.user_tools:archive_everything"},
            "tools": {"archive_everything": {"confirm": True}},
        },
    )
    env = {
        "PHASEGRAPH_CHECKPOINTER": f"sqlite:{folder / 'state.db'}",
        "PHASEGRAPH_WORKSPACE": str(DEMO_WORKSPACE),
        "PHASEGRAPH_DATASET_DIR": str(folder / "dataset"),
        "PHASEGRAPH_CONFIG": str(project),
        "PHASEGRAPH_TWO_STAGE_ENABLED": "true",
        "PYTHONPATH": str(ROOT),  # the server imports tests.user_tools
    }
    started = Server(env=env, log=folder / "server.log", cwd=ROOT).start()
    try:
        yield started
    finally:
        started.stop()


def violations(page: Page, where: str) -> list[str]:
    """axe-core's serious and critical violations on the page as it is now, each with what to fix."""
    assert AXE.is_file(), f"axe-core is not installed at {AXE}: run `make test`, or `npm ci` in tests/js"
    if not page.evaluate("() => typeof window.axe === 'object'"):
        page.add_script_tag(path=str(AXE))
    found: list[dict[str, Any]] = page.evaluate(
        """async () => {
            const result = await axe.run(document, { resultTypes: ["violations"] });
            return result.violations.map((v) => ({
                id: v.id, impact: v.impact, help: v.help,
                nodes: v.nodes.map((n) => ({ target: n.target, html: n.html, why: n.failureSummary })),
            }));
        }"""
    )
    return [
        f"{where}: {v['id']} ({v['impact']}) {v['help']}, {len(v['nodes'])} nodes:\n"
        + "\n".join(f"  {n['target']} {n['html'][:200]}\n    {n['why']}" for n in v["nodes"][:8])
        for v in found
        if v["impact"] in BLOCKING
    ]


def start_turn(page: Page, server: Server, protocol: str) -> None:
    page.goto(server.url)
    expect(page.locator(f"#protocol option[value='{protocol}']")).to_have_count(1)
    page.locator("#protocol").select_option(protocol)
    page.locator("#show-tool-outputs").check()
    page.locator("#message").fill(ASK if protocol == APPROVING else MESSAGE)
    page.locator("#send").click()


def expect_answered(page: Page) -> None:
    expect(page.locator("#status")).to_have_text("done", timeout=WAIT)
    expect(page.locator("#answer")).to_be_visible()


@pytest.mark.parametrize("protocol", list(PROTOCOLS))
def test_axe_finds_no_serious_violation_on_the_chat_and_debug_tabs(server: Server, protocol: str) -> None:
    found: list[str] = []
    with open_page() as page:
        start_turn(page, server, protocol)
        if protocol == APPROVING:
            card = page.locator("[data-testid='approval']")
            expect(card).to_have_count(1, timeout=WAIT)
            expect(page.locator("#status")).to_have_text("paused", timeout=WAIT)
            found += violations(page, "chat, an approval waiting")
            card.locator("[data-testid='approve']").click()
        expect_answered(page)
        expect(page.locator(f"#chat {OWN_LINES.get(protocol, '#answer')}").first).to_be_visible()
        page.locator("#trace-button").click()
        page.locator("#checkpoints-button").click()
        expect(page.locator("#trace [data-testid='trace-entry']").first).to_be_visible(timeout=WAIT)
        expect(page.locator("#checkpoints [data-testid='checkpoint-row']").first).to_be_visible(timeout=WAIT)
        found += violations(page, "chat")

        page.locator("[data-testid='tab-debug']").click()
        expect(page.locator("#graph svg[data-testid='graph']")).to_have_attribute("data-protocol", protocol)
        expect(page.locator("#debug-status")).to_have_text("finished", timeout=WAIT)
        rows = page.locator("[data-testid='timeline-item']")
        expect(rows.nth(2)).to_be_visible()
        rows.nth(rows.count() - 2).locator("button").click()  # a step with a change, not the first
        expect(page.locator("[data-testid='state-summary']")).to_be_visible()
        expect(page.locator("[data-testid='edit-field']")).to_be_visible()
        found += violations(page, "debug")
    assert found == [], "\n".join(found)


def focused(page: Page, selector: str) -> bool:
    return bool(page.evaluate("(s) => document.activeElement?.matches(s)", selector))


def tab_to(page: Page, selector: str, key: str = "Tab", limit: int = 60) -> None:
    """Press ``key`` (Tab or Shift+Tab) until the element ``selector`` names has the focus, and check that
    the page shows where the focus is (a ring round it)."""
    for _ in range(limit):
        page.keyboard.press(key)
        if focused(page, selector):
            break
    else:
        where = page.evaluate("() => document.activeElement?.outerHTML.slice(0, 120)")
        raise AssertionError(f"{limit} presses of {key} never reached {selector} (the focus is on {where})")
    ring = page.evaluate(
        """() => { const style = getComputedStyle(document.activeElement);
            return style.outlineStyle !== 'none' && parseFloat(style.outlineWidth) >= 2; }"""
    )
    assert ring, f"{selector} has the focus but nothing shows it"


def test_a_turn_and_its_approval_go_from_the_keyboard_alone(server: Server) -> None:
    """Type and send with Enter, answer the approval card with Tab and Enter, then open the thread again
    from the thread list: never a mouse click."""
    with open_page() as page:
        page.goto(server.url)
        expect(page.locator("#protocol")).to_have_value(APPROVING)  # the picker's default
        tab_to(page, "#message")
        page.keyboard.type(ASK)
        page.keyboard.press("Enter")
        card = page.locator("[data-testid='approval']")
        expect(card).to_have_count(1, timeout=WAIT)
        expect(page.locator("#status")).to_have_text("paused", timeout=WAIT)

        tab_to(page, "[data-testid='approve']", key="Shift+Tab")  # back up into the chat, to the card
        page.keyboard.press("Enter")
        expect_answered(page)
        expect(card.locator("[data-testid='approval-answer']")).to_have_text("approved")

        tab_to(page, "#new-thread")
        page.keyboard.press("Space")
        expect(page.locator("#chat .msg")).to_have_count(0)
        tab_to(page, ".thread-item .thread-open")
        page.keyboard.press("Enter")
        expect(page.locator("#chat .msg.user")).to_contain_text(ASK, timeout=WAIT)
        expect(page.locator(".thread-item.open")).to_have_count(1)


def test_the_tabs_move_with_arrow_keys_and_the_debugger_works_from_the_keyboard(server: Server) -> None:
    """The Chat and Debug tabs follow the ARIA tabs pattern (Tab reaches the selected one, arrows, Home and
    End move between them); in the Debug tab, a graph node toggles its breakpoint and a timeline row opens
    its checkpoint, by Tab and Enter."""
    with open_page() as page:
        start_turn(page, server, "unified")  # the turn is set up with the mouse
        expect_answered(page)
        chat, debug = page.locator("#tab-chat"), page.locator("#tab-debug")

        tab_to(page, "#tab-chat")
        page.keyboard.press("ArrowRight")
        expect(debug).to_be_focused()
        expect(debug).to_have_attribute("aria-selected", "true")
        expect(page.locator("#debug-view")).to_be_visible()
        expect(page.locator("#chat-view")).to_be_hidden()
        page.keyboard.press("ArrowLeft")
        expect(chat).to_be_focused()
        expect(chat).to_have_attribute("aria-selected", "true")
        expect(page.locator("#chat-view")).to_be_visible()
        page.keyboard.press("End")
        expect(debug).to_be_focused()
        page.keyboard.press("Home")
        expect(chat).to_be_focused()
        page.keyboard.press("Tab")  # past the tabs: the unselected one is not a stop of its own
        expect(debug).not_to_be_focused()
        expect(debug).to_have_attribute("tabindex", "-1")
        page.keyboard.press("Shift+Tab")
        expect(chat).to_be_focused()
        page.keyboard.press("ArrowRight")

        expect(page.locator("#debug-status")).to_have_text("finished", timeout=WAIT)
        tab_to(page, "[data-testid='graph-node']")
        node = page.evaluate("() => document.activeElement.dataset.node")
        page.keyboard.press("Enter")
        expect(page.locator(f"[data-testid='break-before'][data-node='{node}']")).to_be_checked()
        tab_to(page, "[data-testid='timeline-item'] button")
        checkpoint = page.locator("[data-testid='timeline-item']:has(button:focus)").get_attribute(
            "data-checkpoint-id"
        )
        assert checkpoint
        page.keyboard.press("Enter")
        expect(page.locator("#state-checkpoint")).to_contain_text(checkpoint)
