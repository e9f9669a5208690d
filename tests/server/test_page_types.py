"""The page's own JavaScript modules are type-checked: each asks for it, and tsc finds no error in them."""

from __future__ import annotations

import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
STATIC = ROOT / "server" / "http" / "static"
JS = ROOT / "tests" / "js"
#: the typescript tests/js/package.json pins
TSC = JS / "node_modules" / ".bin" / "tsc"
CONFIG = JS / "tsconfig.page.json"


def first_line(path: Path) -> str:
    return path.read_text(encoding="utf-8").partition("\n")[0]


def test_every_module_of_the_page_asks_to_be_checked() -> None:
    """Each starts with `// @ts-check`, so an editor checks it even without tests/js's config."""
    modules = sorted(STATIC.glob("*.js"))  # vendor/'s files are npm's, not ours
    unchecked = ", ".join(p.name for p in modules if first_line(p) != "// @ts-check")
    assert modules and not unchecked, f"these modules do not start with `// @ts-check`: {unchecked}"


def test_tsc_finds_no_type_error_in_the_page() -> None:
    """`tsc -p tests/js/tsconfig.page.json` passes: the modules agree with the DOM's and libraries' types."""
    assert TSC.exists(), f"{TSC} is missing: `make test` runs npm ci in tests/js first"
    checked = subprocess.run(
        [str(TSC), "-p", str(CONFIG.relative_to(ROOT)), "--pretty", "false"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert checked.returncode == 0, f"tsc exited {checked.returncode}:\n{checked.stdout}{checked.stderr}"
