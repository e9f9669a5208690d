"""The pages a newcomer starts from: the home page and the README list every page, every page is in the
site's menu, the HTTP server page shows the Chat tab of three protocols, the figures on Which protocol?
are the ones docs/performance.md records, and the scripted model's format on Models is the one the model
reads, key by key.
"""

import json
import re
from pathlib import Path
from typing import Any

import yaml
from langgraph.checkpoint.memory import InMemorySaver

import phasegraph
from phasegraph.nodes.models import DEMO_WORKSPACE
from phasegraph.nodes.scripted import Script, ScriptToolCall, ScriptTurn

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
PAGES = sorted(p.relative_to(DOCS).as_posix() for p in DOCS.rglob("*.md"))
# [text](target): the target up to whitespace, an anchor or the closing parenthesis
LINK = re.compile(r"\[[^\]]*\]\(([^)\s#]+)")


def nav_pages(nav: list) -> list[str]:
    """Every page file the mkdocs ``nav`` names, sections opened."""
    found = []
    for entry in nav:
        for value in entry.values() if isinstance(entry, dict) else [entry]:
            found += nav_pages(value) if isinstance(value, list) else [value]
    return found


def test_the_home_page_links_every_page() -> None:
    linked = set(LINK.findall((DOCS / "index.md").read_text("utf-8")))
    assert [page for page in PAGES if page != "index.md" and page not in linked] == []


def test_the_readme_links_every_page() -> None:
    linked = set(LINK.findall((ROOT / "README.md").read_text("utf-8")))
    assert [page for page in PAGES if f"docs/{page}" not in linked] == []


def test_every_page_is_in_the_menu() -> None:
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text("utf-8"))
    assert sorted(nav_pages(config["nav"])) == PAGES


def test_the_server_page_shows_the_chat_of_three_protocols() -> None:
    """docs/screenshots.py writes docs/assets/chat-*.png: docs/server.md shows each, each a small PNG."""
    page = DOCS / "server.md"
    shown = {(page.parent / target).resolve() for target in LINK.findall(page.read_text(encoding="utf-8"))}
    made = set((DOCS / "assets").glob("chat-*.png"))
    expected = {"chat-triggered-phase.png", "chat-planner.png", "chat-agent-network.png"}
    assert {p.name for p in made} >= expected
    assert made <= shown, f"not on docs/server.md: {sorted(p.name for p in made - shown)}"
    for image in made:
        assert image.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", image.name
        assert image.stat().st_size < 200 * 1024, f"{image.name} is {image.stat().st_size} bytes"


def test_the_screenshot_script_loads() -> None:
    """`make screenshots` is run by hand, so nothing else would notice a name it imports going away."""
    import runpy

    names = runpy.run_path(str(DOCS / "screenshots.py"), run_name="screenshots")
    assert callable(names["main"]) and callable(names["chat_turns"])


def test_which_protocol_quotes_the_recorded_figures() -> None:
    """Each measured figure (a decimal, or a whole number of three digits or more) is in docs/performance.md.

    When a bench run changes the figures there, the page must be brought up to date with them.
    """
    page = (DOCS / "which-protocol.md").read_text("utf-8")
    measured = page[page.index("## What each one trades") : page.index("## Seed numbers")]
    recorded = (DOCS / "performance.md").read_text("utf-8")
    figures = set(re.findall(r"(?<![\w.])(\d+\.\d+|\d{3,}|\d{1,3}(?:,\d{3})+)(?![\d])", measured))
    assert {"4.59", "0.44", "1633"} <= figures  # the pattern finds the figures
    missing = sorted(f for f in figures if not re.search(rf"(?<![\d.]){re.escape(f)}(?!\d)", recorded))
    assert missing == [], f"on docs/which-protocol.md but not in docs/performance.md: {missing}"


def scripted_section() -> str:
    """The part of docs/models.md about the scripted model."""
    text = (DOCS / "models.md").read_text("utf-8")
    return text[text.index("## The scripted model") :]


def documented_script(tmp_path: Path) -> tuple[dict[str, Any], Path]:
    """The page's example script, and a file holding it."""
    block = re.search(r"```json\n(.*?)```", scripted_section(), re.S)
    assert block is not None
    path = tmp_path / "script.json"
    path.write_text(block.group(1), "utf-8")
    return json.loads(block.group(1)), path


def test_every_key_of_the_script_format_is_described() -> None:
    section = scripted_section()
    described = set(re.findall(r"^\| `(\w+)` \|", section, re.M))  # the first cell of each table row
    assert described == set(Script.model_fields) | set(ScriptTurn.model_fields)
    assert all(f'"{key}"' in section for key in ScriptToolCall.model_fields)


def test_the_example_script_shows_every_key_and_no_other(tmp_path: Path) -> None:
    # Unknown keys are ignored when a script loads, so a misspelt key on the page would load silently.
    data, _ = documented_script(tmp_path)
    assert set(data) == set(Script.model_fields)
    turns = data["turns"] + [turn for part in data["follow_ups"] for turn in part]
    assert {key for turn in turns for key in turn} == set(ScriptTurn.model_fields)
    calls = [call for turn in turns for call in turn.get("tool_calls", [])]
    assert {key for call in calls for key in call} == set(ScriptToolCall.model_fields)


async def test_the_example_script_answers_a_thread_as_the_page_says(tmp_path: Path) -> None:
    data, path = documented_script(tmp_path)
    first, (later,) = data["turns"], data["follow_ups"]  # one follow-up: every later message reads it
    saver = InMemorySaver()
    for message, turns in (("What is in the docs?", first), ("Who is on the team?", later), ("More?", later)):
        result = await phasegraph.run(
            "triggered_phase", message, model=f"scripted:{path}", workspace=str(DEMO_WORKSPACE),
            checkpointer=saver, thread_id="docs",
        )  # fmt: skip
        called = [(e.name, e.args) for e in result.events if isinstance(e, phasegraph.ToolCall)]
        assert called == [(c["name"], c["args"]) for turn in turns for c in turn.get("tool_calls", [])]
        assert result.final is not None and result.final.answer == turns[-1]["content"]
