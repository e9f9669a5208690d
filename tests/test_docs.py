"""The README front page and the docs site: the strict mkdocs build passes, and can fail.

The README is a front page that links into docs/; every page is built with ``mkdocs build --strict``
(mkdocs.yml makes broken links and anchors warnings, so strict makes them errors).
"""

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
SETUP_BLOCK = """```bash
make demo   # creates .venv, installs, runs the triggered-phase protocol offline on the bundled script
make test   # creates .venv (dev and bench extras) and .venv-studio (langgraph dev), runs the whole suite
```"""
# [text](target) and ![alt](target); the target stops at whitespace or the closing parenthesis
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")


def build(config: Path, site: Path) -> subprocess.CompletedProcess[str]:
    """``mkdocs build --strict`` of ``config`` into ``site``, its output captured."""
    return subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(config), "--site-dir", str(site)],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )


def test_docs_build_strict(tmp_path: Path) -> None:
    result = build(ROOT / "mkdocs.yml", tmp_path / "site")
    assert result.returncode == 0, result.stdout + result.stderr
    assert (tmp_path / "site" / "protocols" / "planner" / "index.html").is_file()


def test_broken_link_or_anchor_fails_the_build(tmp_path: Path) -> None:
    shutil.copytree(ROOT / "docs", tmp_path / "docs")  # symlinked files are copied as files
    shutil.copy(ROOT / "mkdocs.yml", tmp_path / "mkdocs.yml")
    page = tmp_path / "docs" / "models.md"
    page.write_text(
        page.read_text("utf-8") + "\n[gone](no-such-page.md) and [moved](events.md#no-such-heading)\n",
        "utf-8",
    )

    result = build(tmp_path / "mkdocs.yml", tmp_path / "site")

    output = result.stdout + result.stderr
    assert result.returncode != 0, output
    assert "no-such-page.md" in output
    assert "#no-such-heading" in output


def test_readme_is_a_front_page() -> None:
    text = README.read_text("utf-8")
    assert len(text.splitlines()) <= 300
    first_block = text[text.index("```") :]
    assert first_block.startswith(SETUP_BLOCK)
    assert text.index("```") < text.index("## ")  # the commands come before any section
    assert "Both need only Python 3.11 or newer and network access to PyPI" in text
    assert "make PYTHON=/path/to/python3.12 demo" in text  # the override, for a machine without python3.11


def test_readme_links_point_at_files() -> None:
    targets = LINK.findall(README.read_text("utf-8"))
    assert any(t.startswith("docs/") for t in targets)
    for target in targets:
        if re.match(r"[a-z]+:", target):  # http:, https:, mailto:
            continue
        path = target.split("#", 1)[0]
        assert path, f"README links to an anchor of its own ({target}); the sections live in docs/"
        assert (ROOT / path).exists(), f"README links to {target}, which does not exist"


def test_readme_python_example_prints_what_it_says(tmp_path: Path) -> None:
    blocks = re.findall(r"```(\w*)\n(.*?)```", README.read_text("utf-8"), re.S)
    index = next(i for i, (lang, _) in enumerate(blocks) if lang == "python")
    code, printed = blocks[index][1], blocks[index + 1][1]
    (tmp_path / "example.py").write_text(code, "utf-8")

    result = subprocess.run(
        [sys.executable, "example.py"], cwd=tmp_path, capture_output=True, text=True, timeout=120
    )

    assert result.returncode == 0, result.stderr
    assert result.stdout == printed
