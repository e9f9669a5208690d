"""The "Debugging a run" page: its screenshots exist and are small, its labels and routes are real.

UI labels are written in bold on the page (and nothing else is), so every bold span must be text the page's
static files hold; every route the page names as ``METHOD /path`` must be an operation of the app's OpenAPI.
"""

import re

import pytest

from phasegraph.nodes.settings import ServerSettings
from phasegraph.server.app import create_app
from tests.test_docs import LINK, ROOT

PAGE = ROOT / "docs" / "debugging.md"
IMAGES = ROOT / "docs" / "assets"
STATIC = ROOT / "server" / "http" / "static"
PNG = b"\x89PNG\r\n\x1a\n"
MAX_BYTES = 150 * 1024
BOLD = re.compile(r"\*\*(.+?)\*\*")
ROUTE = re.compile(r"`(GET|POST|PUT|PATCH|DELETE) (/[^`?\s]*)")
PARAM = re.compile(r"\{[^}]*\}")


def page_text() -> str:
    return PAGE.read_text(encoding="utf-8")


def images() -> list[str]:
    return [target for target in LINK.findall(page_text()) if target.endswith(".png")]


def static_text() -> str:
    files = [*sorted(STATIC.glob("*.js")), STATIC / "index.html"]
    return "\n".join(path.read_text(encoding="utf-8") for path in files)


def shown_by_page(label: str, text: str) -> bool:
    """Whether the page's static files hold ``label`` (HTML's whitespace is one space)."""
    return label in text or label in re.sub(r"\s+", " ", text)


def test_every_image_the_page_names_is_a_small_png() -> None:
    named = images()
    assert len(named) >= 4, named
    for target in named:
        path = (PAGE.parent / target).resolve()
        assert path.is_file(), f"{target} is not in docs/"
        assert path.read_bytes()[:8] == PNG, f"{target} is not a PNG"
        assert path.stat().st_size < MAX_BYTES, f"{target} is {path.stat().st_size} bytes"


def test_every_debugger_image_is_on_the_page() -> None:
    named = {(PAGE.parent / target).resolve() for target in images()}
    made = set(IMAGES.glob("debugger-*.png"))
    assert made, "docs/assets has no debugger-*.png"
    assert made <= named, f"not on the page: {sorted(p.name for p in made - named)}"


def test_the_labels_the_page_names_are_the_pages() -> None:
    labels = set(BOLD.findall(page_text()))
    for wanted in ("Continue from here", "Replay from here", "Save as a new checkpoint", "Expand subgraphs"):
        assert wanted in labels, f"the page does not name {wanted!r}"
    text = static_text()
    missing = sorted(label for label in labels if not shown_by_page(label, text))
    assert missing == [], f"the page names labels the web page does not have: {missing}"


def test_a_label_the_web_page_lacks_is_caught() -> None:
    assert not shown_by_page("Rewind to here", static_text())


@pytest.fixture(scope="module")
def operations() -> set[tuple[str, str]]:
    """The app's operations as (METHOD, path with every {parameter} as {})."""
    spec = create_app(ServerSettings()).openapi()
    return {
        (method.upper(), PARAM.sub("{}", path)) for path, item in spec["paths"].items() for method in item
    }


def served(route: tuple[str, str], operations: set[tuple[str, str]]) -> bool:
    """Whether the app has ``route``: the same path, or one per protocol where the page writes {protocol}."""
    method, path = route
    pattern = re.compile("[^/]+".join(re.escape(part) for part in path.split("{}")))
    return any(verb == method and (known == path or pattern.fullmatch(known)) for verb, known in operations)


def test_the_routes_the_page_lists_are_the_servers(operations: set[tuple[str, str]]) -> None:
    named = {(method, PARAM.sub("{}", path)) for method, path in ROUTE.findall(page_text())}
    assert len(named) >= 8, named
    assert ("GET", "/assistants/{}/graph") in named and ("POST", "/api/runs/{}/stream") in named
    unknown = sorted(route for route in named if not served(route, operations))
    assert unknown == [], f"the page names routes the server does not have: {unknown}"


def test_a_route_the_server_lacks_is_caught(operations: set[tuple[str, str]]) -> None:
    assert served(("POST", "/api/runs/{}/stream"), operations)
    assert not served(("GET", "/threads/{}/rewind"), operations)
    assert not served(("GET", "/api/runs/{}/stream"), operations)  # the method counts too
