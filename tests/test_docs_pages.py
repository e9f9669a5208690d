"""The pages a newcomer starts from: the home page and the README list every page, every page is in the
site's menu, and the figures on Which protocol? are the ones docs/performance.md records.
"""

import re
from pathlib import Path

import yaml

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
