"""Debian's headless Chromium, launched once per test process; each page gets a browser context of its own.

Starting Playwright's driver and Chromium costs a second, so the first page starts both and
``close_browser`` (when the session ends) stops them; a context per page keeps tests apart (cookies,
storage, cache).

Playwright's sync API leaves its event loop marked as this thread's running loop between calls, which
makes every later ``asyncio.run`` (and pytest-asyncio) in the process refuse to start. A page is open
only inside ``open_page``: the loop is marked running there and unmarked when the page closes, as
Playwright itself does between its calls.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page, Playwright

CHROMIUM = Path("/usr/bin/chromium")
#: The flags the browser tests run Chromium with (no sandbox as root, no network beyond loopback).
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"]
#: Skips a module when the machine has no Chromium (CI installs it).
needs_chromium = pytest.mark.skipif(
    not CHROMIUM.exists(), reason=f"no Chromium at {CHROMIUM} (CI installs it)"
)

_running: tuple[Playwright, Browser] | None = None


def browser() -> Browser:
    """This process's Chromium, launched at the first call."""
    global _running
    if _running is None:
        from playwright.sync_api import sync_playwright

        playwright = sync_playwright().start()
        _running = playwright, playwright.chromium.launch(executable_path=str(CHROMIUM), args=FLAGS)
    else:
        asyncio._set_running_loop(_running[1]._loop)  # Playwright's calls run on its loop again
    return _running[1]


def close_browser() -> None:
    """Stop the Chromium of this process, if one was launched."""
    global _running
    if _running is not None:
        playwright, launched = _running
        _running = None
        asyncio._set_running_loop(launched._loop)
        launched.close()
        playwright.stop()
        asyncio._set_running_loop(None)


@contextmanager
def open_page(console: list[str] | None = None, **options: Any) -> Iterator[Page]:
    """A fresh page in a context of its own; any uncaught page error fails the test.

    ``console`` collects the page's console errors; ``options`` go to the context (the default viewport
    is 1440x960).
    """
    errors: list[str] = []
    context = browser().new_context(**{"viewport": {"width": 1440, "height": 960}, **options})
    try:
        page = context.new_page()
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        if console is not None:
            page.on("console", lambda msg: console.append(msg.text) if msg.type == "error" else None)
        yield page
    finally:
        context.close()
        asyncio._set_running_loop(None)  # asyncio.run may start loops of its own until the next page
    assert errors == [], errors
