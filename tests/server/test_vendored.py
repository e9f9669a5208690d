"""The libraries the page ships (server/http/static/vendor) are the npm packages tests/js pins, exactly."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
VENDOR = ROOT / "server" / "http" / "static" / "vendor"
MODULES = ROOT / "tests" / "js" / "node_modules"

#: each vendored file and the file of the installed package it must equal
SHIPPED = {
    "dagre.esm.js": "@dagrejs/dagre/dist/dagre.esm.js",
    "dagre.LICENSE": "@dagrejs/dagre/LICENSE",
    "marked.esm.js": "marked/lib/marked.esm.js",
    "marked.LICENSE": "marked/LICENSE",
    "purify.es.mjs": "dompurify/dist/purify.es.mjs",
    "dompurify.LICENSE": "dompurify/LICENSE",
    **{
        f"json-schema/{name.name}": f"@cfworker/json-schema/dist/esm/{name.name}"
        for name in sorted((VENDOR / "json-schema").glob("*.js"))
    },
}


@pytest.mark.parametrize("shipped", sorted(SHIPPED))
def test_vendored_file_is_the_pinned_package(shipped: str) -> None:
    installed = MODULES / SHIPPED[shipped]
    assert installed.exists(), f"{installed} is missing: `make test` runs npm ci in tests/js first"
    assert (VENDOR / shipped).read_bytes() == installed.read_bytes(), f"{shipped} differs from {installed}"


def test_every_module_of_the_schema_package_is_shipped() -> None:
    """The validator's index imports its siblings: a missing one would break the page's import."""
    published = {p.name for p in (MODULES / "@cfworker/json-schema/dist/esm").glob("*.js")}
    assert published and published == {p.name for p in (VENDOR / "json-schema").glob("*.js")}
