"""Take the page's screenshots the docs show from a real server, in Debian's headless Chromium.

Run it from the repository root, after a change to the page (or `make screenshots`)::

    .venv/bin/python docs/screenshots.py

It starts ``phasegraph serve`` on a free loopback port, with a temporary database and a project file that
gives every protocol its bundled demo script, paced so a run can be watched (the same server the Chromium
tests of the debugger use, tests/server/test_browser_debugger.py). Then it drives the page through the
flows docs/debugging.md describes and writes ``docs/assets/debugger-*.png``, each one a clip of the part of
the page its section is about, and a turn of three protocols in the Chat tab, ``docs/assets/chat-*.png``
(docs/server.md shows them), at a 1280x860 window, made small with an adaptive palette when Pillow is
installed. The server is stopped at the end, whatever happens.
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run as a script: the tests' helpers are imported from the repository
    sys.path.insert(0, str(ROOT))

from playwright.sync_api import Page, expect  # noqa: E402

from phasegraph.nodes.models import DEMO_WORKSPACE  # noqa: E402
from tests.browser import CHROMIUM, open_page  # noqa: E402
from tests.server.conftest import Server  # noqa: E402
from tests.server.test_browser import WAIT  # noqa: E402
from tests.server.test_browser_debugger import (  # noqa: E402
    MESSAGE,
    open_checkpoint,
    run_in_chat_and_follow,
    start_server,
    timeline,
)

IMAGES = ROOT / "docs" / "assets"
VIEWPORT = {"width": 1280, "height": 860}
#: the planner's expanded graph is wider than the graph card at VIEWPORT's width
WIDE = {"width": 1600, "height": 1080}
COLORS = 128
#: what the Debug tab shows above its cards (the "Expand subgraphs" box and the status line)
TOOLBAR = "#debug-view .debug-toolbar"
#: the graph beside the timeline and the "Next run" card
GRID = "#debug-view .debug-grid"
STATE_CARD = "#debug-view section.card:has(#state-view)"
EDITOR_CARD = "#debug-view section.card:has(#state-editor)"
#: the checkpoint edited (the first one whose next node is this), the counter and its value there
EDIT_AT, COUNTER, SPENT = "tool_phase", "cycles_used", 1000


def shrink(path: Path) -> None:
    """An adaptive palette of COLORS colours, saved optimised: the page's flat colours lose nothing seen."""
    try:
        from PIL import Image
    except ImportError:  # without Pillow the PNG stays as Chromium wrote it
        return
    with Image.open(path) as image:
        small = image.convert("RGB").convert("P", palette=Image.Palette.ADAPTIVE, colors=COLORS)
    small.save(path, optimize=True)


def shoot(page: Page, name: str, *selectors: str, prefix: str = "debugger") -> Path:
    """A clip of the page around the elements ``selectors`` name (the first is scrolled to the top)."""
    page.mouse.move(0, 0)  # no button under the pointer keeps a hover outline
    page.locator(selectors[0]).first.evaluate("element => element.scrollIntoView({block: 'start'})")
    boxes = [page.locator(selector).first.bounding_box() for selector in selectors]
    if any(box is None for box in boxes):
        raise RuntimeError(f"{name}: not all of {selectors} are shown")
    shown = [box for box in boxes if box]
    window = page.viewport_size or VIEWPORT
    pad = 6.0
    left = max(0.0, min(box["x"] for box in shown) - pad)
    top = max(0.0, min(box["y"] for box in shown) - pad)
    right = min(float(window["width"]), max(box["x"] + box["width"] for box in shown) + pad)
    bottom = min(float(window["height"]), max(box["y"] + box["height"] for box in shown) + pad)
    path = IMAGES / f"{prefix}-{name}.png"
    page.screenshot(path=str(path), clip={"x": left, "y": top, "width": right - left, "height": bottom - top})
    shrink(path)
    print(f"{path.relative_to(ROOT)}: {path.stat().st_size // 1024} KB")
    return path


def thread_of(page: Page) -> str:
    """The open thread's id, as the page's address names it."""
    return str(page.evaluate("() => new URL(location.href).searchParams.get('thread')"))


def live_run(page: Page, url: str) -> str:
    """(a) A triggered_phase run sent from the chat, caught in the Debug tab while its second action runs."""
    page.goto(url)
    page.locator("#protocol").select_option("triggered_phase")
    page.locator("[data-testid='tab-debug']").click()
    expect(page.locator("#graph svg[data-testid='graph']")).to_have_attribute(
        "data-protocol", "triggered_phase"
    )
    page.locator("[data-testid='tab-chat']").click()
    page.locator("#message").fill(MESSAGE)
    page.locator("#send").click()
    page.locator("[data-testid='tab-debug']").click()
    # lit: action_phase again, after a tool_phase ran (so there are visited nodes and taken edges)
    page.wait_for_function(
        """() => {
          const svg = document.querySelector('#graph svg');
          const status = document.getElementById('debug-status').textContent;
          return svg && svg.dataset.active === 'action_phase' && status.startsWith('running')
            && document.querySelector('#graph [data-node="tool_phase"].visited') !== null;
        }""",
        timeout=WAIT,
    )
    shoot(page, "live", TOOLBAR, GRID)
    expect(page.locator("#debug-status")).to_have_text("finished", timeout=WAIT * 3)
    return thread_of(page)


def state_and_edit(page: Page, server: Server, thread_id: str) -> None:
    """(b) a checkpoint's state, (c) an edit the schema refuses, (d) an edit run from: the budget stop."""
    rows = timeline(server, thread_id)
    # (b) the checkpoint tool_phase wrote: a tool result came in and the cycle counter moved
    after_tool = next(row for row in rows if row["node"] == "tool_phase")
    open_checkpoint(page, after_tool)
    expect(page.locator("[data-testid='state-counter'].changed").first).to_be_visible()
    shoot(page, "state", STATE_CARD, "[data-testid='state-counters']")

    # (c) a string into the counter: the editor names the field and refuses it before anything is sent
    at = next(row for row in rows if row["next"] == [EDIT_AT])
    open_checkpoint(page, at)
    page.locator("[data-testid='edit-field']").select_option(COUNTER)
    page.locator("[data-testid='edit-value']").fill(json.dumps("three"))
    page.locator("[data-testid='edit-save']").click()
    expect(page.locator("[data-testid='edit-error']")).to_contain_text(COUNTER)
    shoot(page, "schema-error", EDITOR_CARD)

    # (d) the counter spent, saved, and the thread continued from the edit: the budget route to final_phase
    page.locator("[data-testid='edit-value']").fill(json.dumps(SPENT))
    page.locator("[data-testid='edit-save']").click()
    expect(page.locator("[data-testid='edit-error']")).to_be_empty()
    expect(page.locator("[data-testid='timeline-item'][data-source='update']")).to_have_count(1)
    page.locator("[data-testid='continue-run']").click()
    expect(page.locator("#debug-status")).to_have_text("finished", timeout=WAIT * 3)
    branch = page.locator("[data-testid='timeline-branch']")
    expect(branch).to_have_count(1)
    expect(branch.locator("[data-node='final_phase']").first).to_be_visible()
    branch.locator("[data-testid='timeline-item']").last.scroll_into_view_if_needed()
    shoot(page, "fork", TOOLBAR, GRID)


def breakpoint_replay(page: Page, server: Server) -> None:
    """(e) A replay of a finished turn from its input, stopped by a breakpoint before tool_phase."""
    thread_id = run_in_chat_and_follow(page, server, "triggered_phase")
    first = timeline(server, thread_id)
    page.locator("[data-testid='break-before'][data-node='tool_phase']").check()
    open_checkpoint(page, first[0])
    expect(page.locator("[data-testid='continue-run']")).to_have_text("Replay from here")
    page.locator("[data-testid='continue-run']").click()
    expect(page.locator("#debug-status")).to_have_text("paused before tool_phase", timeout=WAIT * 2)
    expect(page.locator("#graph svg")).to_have_attribute("data-waiting", "tool_phase")
    shoot(page, "breakpoint", TOOLBAR, GRID)


def planner_expanded(page: Page, url: str) -> None:
    """(f) The planner with "Expand subgraphs": its executor's nodes in a cluster, marked by a run."""
    page.set_viewport_size(WIDE)
    page.goto(url)
    page.locator("#protocol").select_option("planner")
    page.locator("[data-testid='tab-debug']").click()
    page.locator("[data-testid='expand-subgraphs']").check()
    cluster = page.locator("#graph [data-testid='graph-cluster'][data-subgraph='execute_plan']")
    expect(cluster).to_have_count(1)
    page.locator("[data-testid='tab-chat']").click()
    page.locator("#message").fill(MESSAGE)
    page.locator("#send").click()
    page.locator("[data-testid='tab-debug']").click()
    expect(page.locator("#debug-status")).to_have_text("finished", timeout=WAIT * 3)
    expect(cluster).to_have_class("gcluster visited")
    shoot(page, "subgraphs", "#expand-label", "#debug-status", "#graph")


#: (protocol, the message sent): the turns the Chat screenshots show, on each protocol's demo script
CHATS = [
    ("triggered_phase", "Summarise the roadmap in the docs folder."),
    ("planner", "Create a project for the spring launch."),
    ("agent_network", "Who works on the streaming server?"),
]


def chat_turns(page: Page, url: str) -> None:
    """(g) One turn of each protocol in CHATS, as the Chat tab shows it when the answer is in."""
    page.set_viewport_size(VIEWPORT)
    for protocol, message in CHATS:
        page.goto(url)
        page.locator("#protocol").select_option(protocol)
        page.locator("#message").fill(message)
        page.locator("#send").click()
        expect(page.locator("#status")).to_have_text("done", timeout=WAIT * 3)
        page.locator("#message").blur()
        shoot(page, protocol.replace("_", "-"), ".topbar", ".layout", prefix="chat")


def main() -> int:
    """Start the server, take every screenshot, stop the server; 0 when every one was written."""
    if not CHROMIUM.exists():
        print(f"no Chromium at {CHROMIUM}: install Debian's chromium package", file=sys.stderr)
        return 1
    IMAGES.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="phasegraph-shots-") as folder:
        server = start_server(Path(folder), PHASEGRAPH_WORKSPACE=str(DEMO_WORKSPACE))
        try:
            with open_page() as page:
                page.set_viewport_size(VIEWPORT)
                thread_id = live_run(page, server.url)
                state_and_edit(page, server, thread_id)
                breakpoint_replay(page, server)
                planner_expanded(page, server.url)
                chat_turns(page, server.url)
        finally:
            server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
