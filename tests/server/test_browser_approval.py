"""The web page answers a tool call's approval, in a real headless Chromium against a real server.

The scripted model (of triggered_phase, and of unified) calls the Python tool ``archive_everything``
(``tests.user_tools``), which the project file makes wait for approval (``confirm = true``). The page
shows the call (tool, arguments as editable JSON, why it waits) with Approve / Run with these arguments
/ Reject; an answer resumes the request through the native resume route (``{"answer": ...}``). Whether
the tool ran, and with which arguments, is read from the server's trace (the tool's output).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from playwright.sync_api import Page, Request, expect

from tests.browser import needs_chromium, open_page
from tests.server.conftest import Server
from tests.server.test_ag_ui_approval import ASK, PROPOSED, WAITS, approval_server
from tests.server.test_browser import WAIT, send

pytestmark = needs_chromium


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    # the two-stage route on: the page's triggered_phase chats run triggered_phase
    started = approval_server(tmp_path_factory.mktemp("page-approval"), PHASEGRAPH_TWO_STAGE_ENABLED="true")
    try:
        yield started.start()
    finally:
        started.stop()


def request_id(page: Page) -> str:
    """The current request, as the page names it (``request <id> · thread <id>``)."""
    found = page.locator("#request-info").get_attribute("data-request-id")
    assert found, "the page names no request"
    return found


def tool_results(server: Server, request: str) -> list[dict[str, Any]]:
    """What the request's tool calls did, from its trace (status, output, error)."""
    trace = httpx.get(f"{server.url}/api/requests/{request}/trace").json()
    return [entry["details"] for entry in trace if entry["type"] == "tool_result"]


def asked(page: Page, protocol: str = "triggered_phase") -> Any:
    """Send the message; the run stops before the call and its card shows what waits."""
    expect(page.locator(f"#protocol option[value='{protocol}']")).to_have_count(1)
    page.locator("#protocol").select_option(protocol)
    send(page, ASK)
    card = page.locator("[data-testid='approval']")
    expect(card).to_have_count(1, timeout=WAIT)
    expect(page.locator("#status")).to_have_text("paused", timeout=WAIT)
    expect(card.locator(".tool-name")).to_have_text("archive_everything")
    expect(card).to_contain_text(WAITS)
    assert json.loads(card.locator("[data-testid='approval-args']").input_value()) == PROPOSED
    expect(page.locator("#resume")).to_be_disabled()  # the card's answer resumes it, not Resume
    expect(page.locator("#chat [data-testid='tool-line']")).to_have_count(0)  # nothing ran
    expect(page.locator("#chat .note", has_text="for your approval")).to_have_count(1)
    return card


def answers(page: Page) -> list[Any]:
    """Record the bodies the page posts to the resume route."""
    sent: list[Any] = []

    def record(request: Request) -> None:
        if request.url.split("?")[0].endswith("/resume"):
            sent.append(request.post_data_json)

    page.on("request", record)
    return sent


def expect_ran(page: Page, status: str) -> None:
    line = page.locator("#chat [data-testid='tool-line']")
    expect(line).to_have_count(1, timeout=WAIT)
    expect(line.locator(".tool-status")).to_contain_text(status, timeout=WAIT)
    expect(page.locator("#answer")).to_contain_text("Done.", timeout=WAIT)
    expect(page.locator("#status")).to_have_text("done", timeout=WAIT)


def test_the_page_approves_a_call_also_after_a_reload(server: Server) -> None:
    with open_page() as page:
        sent = answers(page)
        page.goto(server.url)
        asked(page)
        request = request_id(page)
        # A reload draws the thread from its state: the call still waits, its card is back.
        page.reload()
        card = page.locator("[data-testid='approval']")
        expect(card).to_have_count(1, timeout=WAIT)
        expect(card.locator(".tool-name")).to_have_text("archive_everything")
        assert json.loads(card.locator("[data-testid='approval-args']").input_value()) == PROPOSED
        expect(page.locator("#resume")).to_be_disabled()
        expect(page.locator("#chat .note", has_text="for your approval")).to_have_count(1)
        card.locator("[data-testid='approve']").click()

        expect_ran(page, "ok")
        expect(page.locator("#chat .note", has_text="for your approval")).to_have_count(0)  # it waits no more
        expect(card.locator("[data-testid='approval-answer']")).to_have_text("approved")
        expect(card.locator("[data-testid='approve']")).to_be_disabled()
        assert request_id(page) == request  # the same request went on
    assert sent == [{"answer": "approve"}]
    assert [r["output"] for r in tool_results(server, request)] == ["archived (tidy up)"]
    assert httpx.get(f"{server.url}/api/requests/{request}").json()["status"] == "completed"


def test_the_page_runs_a_call_with_edited_arguments(server: Server) -> None:
    with open_page() as page:
        sent = answers(page)
        page.goto(server.url)
        card = asked(page)
        args = card.locator("[data-testid='approval-args']")
        args.fill("{not json")
        card.locator("[data-testid='approve-edited']").click()
        expect(card.locator("[data-testid='approval-error']")).to_contain_text("not JSON")
        args.fill('["a list"]')
        card.locator("[data-testid='approve-edited']").click()
        expect(card.locator("[data-testid='approval-error']")).to_contain_text("must be a JSON object")
        assert sent == []  # nothing was sent for either
        # arguments the tool does not take: the run asks again, saying why, on a new card
        args.fill('{"why": "no such argument"}')
        card.locator("[data-testid='approve-edited']").click()
        cards = page.locator("[data-testid='approval']")
        expect(cards).to_have_count(2, timeout=WAIT)
        expect(cards.first).to_have_attribute("data-state", "retired")
        expect(cards.first.locator("[data-testid='approve']")).to_be_disabled()
        card = cards.last
        expect(card.locator("[data-testid='approval-problem']")).to_contain_text(
            "do not fit archive_everything"
        )
        expect(page.locator("#status")).to_have_text("paused", timeout=WAIT)
        expect(page.locator("#chat [data-testid='tool-line']")).to_have_count(0)  # still nothing ran
        args = card.locator("[data-testid='approval-args']")
        args.fill('{"reason": "only the old drafts"}')
        card.locator("[data-testid='approve-edited']").click()

        expect_ran(page, "ok")
        expect(card.locator("[data-testid='approval-answer']")).to_have_text("approved with edited arguments")
        expect(page.locator("#chat [data-testid='tool-line'] .tool-args")).to_have_text(
            '{"reason":"only the old drafts"}'
        )
        request = request_id(page)
    assert httpx.get(f"{server.url}/api/requests/{request}").json()["protocol"] == "triggered_phase"
    assert sent == [
        {"answer": {"decision": "edit", "args": {"why": "no such argument"}}},
        {"answer": {"decision": "edit", "args": {"reason": "only the old drafts"}}},
    ]
    assert [r["output"] for r in tool_results(server, request)] == ["archived (only the old drafts)"]


def test_the_page_rejects_a_unified_call_which_never_runs(server: Server) -> None:
    with open_page() as page:
        sent = answers(page)
        page.goto(server.url)
        card = asked(page, "unified")
        card.locator("[data-testid='approval-why']").fill("keep everything")
        card.locator("[data-testid='reject']").click()

        expect_ran(page, "rejected, not run")  # the row says the call never ran (not "error")
        expect(card.locator("[data-testid='approval-answer']")).to_have_text("rejected: keep everything")
        expect(page.locator("#chat [data-testid='tool-line'] .tool-error")).to_contain_text("keep everything")
        request = request_id(page)
    assert sent == [{"answer": {"decision": "reject", "reason": "keep everything"}}]
    [result] = tool_results(server, request)
    assert result["output"] is None and "did not run" in result["error"]
    assert httpx.get(f"{server.url}/api/requests/{request}").json()["protocol"] == "unified"


def test_a_message_sent_while_a_call_waits_is_refused_and_its_card_still_answers(server: Server) -> None:
    with open_page() as page:
        sent = answers(page)
        page.goto(server.url)
        card = asked(page, "unified")
        request = request_id(page)
        send(page, "Approve")  # words are no answer: the server refuses the message (409)
        expect(page.locator("#chat")).to_contain_text("409: thread", timeout=WAIT)
        expect(page.locator("#chat")).to_contain_text(
            "waits for an approval of its call 'archive_everything'"
        )
        expect(page.locator("#status")).to_have_text("paused")
        card.locator("[data-testid='approve']").click()  # the card still answers the request that waits
        expect_ran(page, "ok")
    assert sent == [{"answer": "approve"}]
    assert [r["output"] for r in tool_results(server, request)] == ["archived (tidy up)"]


def test_a_call_approved_elsewhere_leaves_the_page_no_answer_or_resume_that_fails(server: Server) -> None:
    with open_page() as page:
        page.goto(server.url)
        card = asked(page, "unified")
        request = request_id(page)
        thread = httpx.get(f"{server.url}/api/requests/{request}").json()["threadId"]
        body = {"assistant_id": "unified", "command": {"resume": "approve"}}  # Agent Chat UI's answer
        assert (
            httpx.post(f"{server.url}/threads/{thread}/runs/wait", json=body, timeout=60).status_code == 200
        )

        card.locator("[data-testid='approve']").click()  # the page's card is late: a later run answered
        expect(page.locator("#chat")).to_contain_text("was superseded", timeout=WAIT)
        expect(page.locator("#status")).to_have_text("superseded", timeout=WAIT)
        expect(page.locator("#resume")).to_be_disabled()
    assert httpx.get(f"{server.url}/api/requests/{request}").json()["status"] == "superseded"
