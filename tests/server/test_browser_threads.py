"""The web page keeps the conversation, in a real headless Chromium against a real server: Send continues
the open thread, and the thread list makes, switches, renames and deletes threads; an opened (or
reloaded) thread is drawn from its state, with its checkpoint timeline across its turns."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

import httpx
from playwright.sync_api import Page, Request, expect

from tests.browser import needs_chromium, open_page
from tests.server.conftest import slow_script
from tests.server.test_browser import WAIT, expect_done, send

pytestmark = needs_chromium

FIRST, FOLLOW_UP, OTHER = "What is on the roadmap?", "And what comes after that?", "Something else entirely."


def open_thread_id(page: Page) -> str | None:
    """The thread the page's address names."""
    found = parse_qs(urlparse(page.url).query).get("thread")
    return found[0] if found else None


def thread_item(page: Page, title: str) -> Any:
    return page.locator("[data-testid='thread-item']", has_text=title)


def expect_first_conversation(page: Page) -> None:
    """The first thread's two turns, drawn from its state: user bubbles, tools that ran, the answers."""
    chat = page.locator("#chat")
    expect(chat.locator(".msg.user")).to_have_text(["you" + FIRST, "you" + FOLLOW_UP], timeout=WAIT)
    tools = chat.locator("[data-testid='history-tool']")
    expect(tools).to_have_count(4)
    expect(tools.nth(0).locator("summary")).to_have_text('⚙list_files{"path":"docs"}ok')
    expect(tools.nth(1).locator("summary")).to_have_text('⚙read_file{"path":"docs/roadmap.md"}ok')
    answers = chat.locator("[data-testid='history-answer']")
    expect(answers).to_have_count(2)
    expect(answers.last).to_contain_text("The roadmap has two milestones.")
    # In order: the second question comes after the first answer, and its answer after it.
    order = chat.evaluate(
        """chat => [...chat.querySelectorAll('.msg.user .body, [data-testid="history-answer"]')]
            .map(node => node.classList.contains('body') ? 'user' : 'answer')"""
    )
    assert order == ["user", "answer", "user", "answer"]


def test_page_keeps_the_conversation_on_threads(servers: Any, tmp_path: Path) -> None:
    server = servers(PHASEGRAPH_MODEL=slow_script(tmp_path, delay_ms=10))
    sent: list[Any] = []  # the bodies of the chats' runs

    def record(request: Request) -> None:
        if "/api/runs/" in request.url:
            sent.append(request.post_data_json)

    with open_page() as page:
        page.on("request", record)
        page.goto(server.url)
        expect(page.locator("#protocol")).to_have_value("triggered_phase")
        threads = page.locator("[data-testid='thread-item']")
        expect(page.locator("#threads")).to_contain_text("No threads in this project yet.")

        # 1. A first message makes a thread: listed, open, named by the message, in the address.
        send(page, FIRST)
        expect_done(page)
        expect(threads).to_have_count(1)
        expect(threads.first).to_have_class(re.compile(r"\bopen\b"))
        expect(threads.first.locator(".thread-title")).to_have_text(FIRST)
        first = open_thread_id(page)
        assert first is not None and sent[0]["threadId"] == first

        # 2. A follow-up goes on the same thread; its answer shows under the first one.
        send(page, FOLLOW_UP)
        expect(page.locator("#chat [data-testid='answer']")).to_have_count(2, timeout=WAIT)
        expect(page.locator("#status")).to_have_text("done", timeout=WAIT)
        assert [body["threadId"] for body in sent] == [first, first]
        assert sent[0]["requestId"] != sent[1]["requestId"]
        for body in sent:  # the server ran both requests on that thread
            run = httpx.get(f"{server.url}/api/requests/{body['requestId']}").json()
            assert run["threadId"] == first and run["status"] == "completed"
        state = httpx.get(f"{server.url}/threads/{first}/state").json()
        humans = [m["content"] for m in state["values"]["messages"] if m["type"] == "human"]
        assert humans == [FIRST, FOLLOW_UP]
        chat_text = page.locator("#chat").inner_text()
        assert chat_text.index(FIRST) < chat_text.index(FOLLOW_UP)
        expect(page.locator("#chat .msg").nth(3).locator("[data-testid='answer']")).to_be_visible()
        expect(threads).to_have_count(1)

        # 3. The checkpoint timeline is the open thread's, both turns of it (each starts with its input).
        expect(page.locator("#checkpoints-thread")).to_have_text(f"· {first}")
        expect(page.locator("#checkpoints tr.turn-start")).to_have_count(2, timeout=WAIT)

        # 4. A new thread: an empty chat, a thread of its own at the first Send.
        page.locator("[data-testid='new-thread']").click()
        expect(page.locator("#chat .msg")).to_have_count(0)
        assert open_thread_id(page) is None
        send(page, OTHER)
        expect_done(page)
        expect(threads).to_have_count(2)
        second = open_thread_id(page)
        assert second not in (None, first) and sent[-1]["threadId"] == second
        expect(thread_item(page, OTHER)).to_have_class(re.compile(r"\bopen\b"))
        expect(page.locator("#chat .msg.user")).to_have_count(1)

        # 5. Switching back draws the first conversation from the thread's state, with its timeline.
        thread_item(page, FIRST).locator(".thread-open").click()
        expect_first_conversation(page)
        assert open_thread_id(page) == first
        expect(page.locator("#checkpoints-thread")).to_have_text(f"· {first}")
        expect(page.locator("#checkpoints tr.turn-start")).to_have_count(2, timeout=WAIT)

        # 6. Rename: the new title is the thread's metadata, so it stays after a reload.
        thread_item(page, FIRST).locator("[data-testid='thread-rename']").click()
        title = page.locator("[data-testid='thread-title-input']")
        title.fill("Roadmap talk")
        title.press("Enter")
        expect(thread_item(page, "Roadmap talk")).to_have_count(1, timeout=WAIT)
        expect(page.locator("[data-testid='threads-notice']")).to_be_hidden()
        assert httpx.get(f"{server.url}/threads/{first}").json()["metadata"]["title"] == "Roadmap talk"

        # 7. A reload opens the thread the address names: its conversation, its protocol, its title.
        page.reload()
        expect(thread_item(page, "Roadmap talk")).to_have_class(re.compile(r"\bopen\b"), timeout=WAIT)
        expect_first_conversation(page)
        expect(page.locator("#protocol")).to_have_value("triggered_phase")
        # ... and a message after the reload still continues it.
        send(page, "One more question.")
        expect(page.locator("#chat [data-testid='answer']")).to_have_count(1, timeout=WAIT)
        expect(page.locator("#status")).to_have_text("done", timeout=WAIT)
        assert sent[-1]["threadId"] == first
        expect(page.locator("#checkpoints tr.turn-start")).to_have_count(3, timeout=WAIT)

        # 8. Delete (a second click confirms): the thread is gone from the list and from the server.
        delete = thread_item(page, OTHER).locator("[data-testid='thread-delete']")
        delete.click()
        expect(delete).to_have_text("Delete?")
        delete.click()
        expect(threads).to_have_count(1, timeout=WAIT)
        expect(thread_item(page, OTHER)).to_have_count(0)
        assert httpx.get(f"{server.url}/threads/{second}").status_code == 404
        assert open_thread_id(page) == first  # another thread's delete leaves the open one open

        page.screenshot(path=str(tmp_path / "page-threads.png"), full_page=True)

        # Deleting the open thread leaves a new, empty one.
        delete = thread_item(page, "Roadmap talk").locator("[data-testid='thread-delete']")
        delete.click()
        delete.click()
        expect(page.locator("#threads")).to_contain_text("No threads in this project yet.", timeout=WAIT)
        expect(page.locator("#chat .msg")).to_have_count(0)
        assert open_thread_id(page) is None


def test_a_reload_mid_run_follows_the_running_request(servers: Any, tmp_path: Path) -> None:
    """A reload while the thread's request runs shows the earlier turns from state and follows the
    running one live (onDisconnect continue keeps it running without the page)."""
    server = servers(PHASEGRAPH_MODEL=slow_script(tmp_path, delay_ms=300))
    with open_page() as page:
        page.goto(server.url)
        expect(page.locator("#protocol")).to_have_value("triggered_phase")
        send(page, FIRST)
        expect_done(page)
        thread = open_thread_id(page)
        # The second turn starts from outside the page (as another tab would), and keeps running.
        body = {"message": FOLLOW_UP, "threadId": thread, "onDisconnect": "continue"}
        route = f"{server.url}/api/chat/messages_two_stage"
        with httpx.stream("POST", route, json=body, timeout=30) as stream:
            for line in stream.iter_lines():
                if line.startswith("event: text"):
                    break
        page.reload()
        chat = page.locator("#chat")
        expect(chat.locator("[data-testid='history-answer']")).to_have_count(1, timeout=WAIT)
        expect(chat.locator(".msg.user")).to_have_text(["you" + FIRST, "you" + FOLLOW_UP])
        expect(page.locator("#answer")).to_contain_text("The roadmap has two milestones.", timeout=WAIT)
        expect(page.locator("#status")).to_have_text("done", timeout=WAIT)
        # The running turn is shown once: its tools from its events, not again from the state.
        last = chat.locator(".msg.assistant").last
        expect(last.locator("[data-testid='tool-line']")).to_have_count(2)
        expect(chat.locator("[data-testid='history-tool']")).to_have_count(2)
