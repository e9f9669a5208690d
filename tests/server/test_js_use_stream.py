"""A ``useStream`` page (``@langchain/langgraph-sdk/react``, tests/js/page/, built with vite into a temp
folder) served from another origin, against ``phasegraph serve`` with ``PHASEGRAPH_CORS_ORIGINS`` set to
that origin, in Debian's headless Chromium: the answer streams in, the tool calls show, a reload re-opens
the thread from the address, and a second message continues it. The page's Agent Chat UI-style
approvals (``?page=approvals``) answer an approval as Agent Chat UI does, with ``submit({}, {command})``,
with ``fetchStateHistory`` and without it (stream modes values, messages-tuple and custom)."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.sync_api import Page, expect

from phasegraph.nodes.models import DEMO_WORKSPACE
from tests.browser import needs_chromium, open_page
from tests.helpers import turn
from tests.processes import Process, free_port, listens, running
from tests.server.conftest import Server
from tests.server.js import node
from tests.server.test_ag_ui_approval import approval_server

ASK = "What is on the roadmap?"
ANSWER = "The roadmap has two milestones: March ships the protocol, June the rest."
FOLLOW_UP, SECOND_ANSWER = "Who is on the team?", "Three people work on the project: Ada, Linus and Grace."
WAIT = 30_000  # ms

pytestmark = needs_chromium


def _script(folder: Path) -> str:
    """triggered_phase's script: a tool call and a paced answer per user message (word chunks, 40 ms)."""
    first = [turn("Let me look.", ("list_files", {"path": "docs"})), turn(ANSWER)]
    second = [turn("Reading the team list.", ("read_file", {"path": "docs/team.md"})), turn(SECOND_ANSWER)]
    path = folder / "chat.json"
    path.write_text(json.dumps({"turns": first, "follow_ups": [second], "chunk_delay_ms": 40}), "utf-8")
    return f"scripted:{path}"


@contextmanager
def _static(folder: Path) -> Iterator[str]:
    """``python -m http.server`` on its own loopback port: the page's origin."""
    port = free_port()
    command = [
        sys.executable,
        "-m",
        "http.server",
        str(port),
        "--bind",
        "127.0.0.1",
        "--directory",
        str(folder),
    ]
    with running(Process(command, folder.parent / "static.log"), listens(port)):
        yield f"http://127.0.0.1:{port}"


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Server]]:
    """The built page on its origin and a server allowing that origin."""
    folder = tmp_path_factory.mktemp("js-use-stream")
    node("node_modules/vite/bin/vite.js", "build", env={"PAGE_OUT": str(folder / "page")}, timeout=300)
    with _static(folder / "page") as origin:
        env = {
            "PHASEGRAPH_CHECKPOINTER": f"sqlite:{folder / 'state.db'}",
            "PHASEGRAPH_WORKSPACE": str(DEMO_WORKSPACE),
            "PHASEGRAPH_MODEL": _script(folder),
            "PHASEGRAPH_CORS_ORIGINS": origin,
        }
        server = Server(env=env, log=folder / "server.log").start()
        try:
            yield origin, server
        finally:
            server.stop()


@pytest.fixture(scope="module")
def approvals(setup: tuple[str, Server], tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """A server whose model calls ``archive_everything``, which waits for approval, allowing the page."""
    origin, _ = setup
    server = approval_server(
        tmp_path_factory.mktemp("js-use-stream-approvals"), PHASEGRAPH_CORS_ORIGINS=origin
    )
    try:
        yield server.start()
    finally:
        server.stop()


@contextmanager
def _page() -> Iterator[tuple[Page, list[str]]]:
    """A page in Debian's headless Chromium; page errors fail the test, console errors are returned."""
    console: list[str] = []
    with open_page(console, viewport={"width": 1280, "height": 720}) as page:
        yield page, console


def _send(page: Page, text: str) -> None:
    """Send a message and wait until it is in the thread (or the page shows the client's error)."""
    count = page.locator(".message.human").count()
    page.locator("input[name=message]").fill(text)
    page.locator("form button").click()
    shown = page.locator(f".message.human >> nth={count}").or_(page.locator(".error"))
    expect(shown.first).to_be_visible(timeout=WAIT)
    _no_error(page)


def _no_error(page: Page) -> None:
    errors = page.locator(".error").all_text_contents()
    assert errors == [], f"useStream failed: {errors}"


def _answered(page: Page, answer: str) -> None:
    expect(page.locator(".message.ai").last).to_have_text(answer, timeout=WAIT)
    expect(page.locator("body")).to_have_attribute("data-busy", "false", timeout=WAIT)
    _no_error(page)


def test_use_stream_from_another_origin(setup: tuple[str, Server]) -> None:
    origin, server = setup
    with _page() as (page, console):
        allowed: list[str | None] = []
        page.on(
            "response",
            lambda r: (
                allowed.append(r.headers.get("access-control-allow-origin"))
                if r.url.startswith(server.url)
                else None
            ),
        )
        page.goto(f"{origin}/?apiUrl={server.url}&assistantId=triggered_phase")

        # 1. The answer streams in: the page showed parts of it before the whole.
        _send(page, ASK)
        expect(page.locator(".message.human")).to_have_text([ASK], timeout=WAIT)
        _answered(page, ANSWER)
        seen = page.evaluate("window.seenAnswers")
        assert any(ANSWER.startswith(text) and text != ANSWER for text in seen), seen

        # 2. The tool call and its result are messages of the thread.
        expect(page.locator(".tool-call")).to_have_text(['list_files({"path":"docs"})'])
        expect(page.locator(".tool-result")).to_have_text(["list_files: success"])
        assert allowed and set(allowed) == {origin}, allowed  # cross-origin, allowed by CORS

        # 3. The thread id is in the address: a reload re-opens the conversation.
        thread_id = page.evaluate("new URLSearchParams(location.search).get('threadId')")
        assert thread_id and httpx.get(f"{server.url}/threads/{thread_id}").status_code == 200
        page.reload()
        expect(page.locator(".message.human")).to_have_text([ASK], timeout=WAIT)
        expect(page.locator(".message.ai").last).to_have_text(ANSWER)
        expect(page.locator(".tool-call")).to_have_count(1)

        # 4. A second message continues the same thread.
        _send(page, FOLLOW_UP)
        _answered(page, SECOND_ANSWER)
        expect(page.locator(".message.human")).to_have_text([ASK, FOLLOW_UP])
        calls = ['list_files({"path":"docs"})', 'read_file({"path":"docs/team.md"})']
        expect(page.locator(".tool-call")).to_have_text(calls)
        assert page.evaluate("new URLSearchParams(location.search).get('threadId')") == thread_id
    assert console == [], console


@pytest.mark.parametrize("history", ["1", "0"], ids=["fetchStateHistory", "values-messages-custom"])
@pytest.mark.parametrize(
    ("button", "args", "result"),
    [
        ("approve", None, "archived (tidy up)"),
        ("edit", {"reason": "edited in the page"}, "archived (edited in the page)"),
        ("reject", None, "Not today."),
    ],
)
def test_an_agent_chat_ui_page_answers_an_approval(
    setup: tuple[str, Server], approvals: Server, history: str, button: str, args: Any, result: str
) -> None:
    origin, _ = setup
    with _page() as (page, console):
        page.goto(
            f"{origin}/?page=approvals&history={history}&apiUrl={approvals.url}&assistantId=triggered_phase"
        )
        _send(page, "Archive everything, please.")
        card = page.locator(".interrupt")
        expect(card.locator(".interrupt-call")).to_have_text(
            'archive_everything({"reason":"tidy up"})', timeout=WAIT
        )
        expect(page.locator("body")).to_have_attribute("data-busy", "false", timeout=WAIT)
        if args is not None:
            card.locator("input[name=args]").fill(json.dumps(args))
        card.locator(f"button.{button}").click()
        expect(card).to_have_count(0, timeout=WAIT)
        _answered(page, "Done.")
        expect(page.locator(".message.tool")).to_contain_text([result])
        thread_id = page.locator(".thread-id").text_content()
    runs = httpx.get(f"{approvals.url}/threads/{thread_id}/runs").json()
    assert [r["status"] for r in runs] == ["success", "interrupted"]  # the answer was a run of its own
    assert console == [], console
