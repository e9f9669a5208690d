"""docs/clients.md "Use it from a frontend" shows the code the tests run: each snippet there is a file of
tests/js, word for word, and the SDK and AG-UI examples print a two-turn conversation against a real server
(the useStream component runs in test_js_use_stream.py, the CopilotKit runtime in test_js_copilotkit.py)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.server.conftest import Server, demo_server
from tests.server.js import JS, node

DOC = Path(__file__).resolve().parents[2] / "docs" / "clients.md"
SNIPPETS = ("examples/sdk.mjs", "page/Chat.jsx", "examples/ag-ui.mjs", "examples/copilotkit-runtime.mjs")
ANSWER = "The roadmap has two milestones."
TEAM = "Three people work on the project:"


def _section() -> str:
    text = DOC.read_text("utf-8")
    start = text.index("## Use it from a frontend\n")
    return text[start : text.index("\n## ", start + 1)]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    with demo_server(tmp_path_factory, "js-examples") as started:
        yield started


def test_the_docs_snippets_are_the_tested_files() -> None:
    blocks = re.findall(r"```(?:js|jsx)\n(.*?)```", _section(), re.S)
    assert blocks == [(JS / name).read_text("utf-8") for name in SNIPPETS]
    assert "PHASEGRAPH_CORS_ORIGINS=" in _section()


def test_the_sdk_example_holds_a_two_turn_conversation(server: Server) -> None:
    out = node("examples/sdk.mjs", env={"PHASEGRAPH_URL": server.url}, timeout=300).stdout
    streamed, thread = out.split("\nhuman: ", 1)
    assert streamed.startswith(".") and ANSWER in streamed and TEAM in streamed  # partials, then finals
    lines = ("human: " + thread).splitlines()
    assert [line for line in lines if line.startswith("human: ")] == [
        "human: Summarise the roadmap in the docs folder.",
        "human: Who is on the team?",
    ]
    assert 'ai: Let me see what is in the docs folder. list_files({"path":"docs"})' in lines
    assert "tool: list_files success" in lines
    assert lines[-1].startswith(f"ai: {TEAM}")


def test_the_ag_ui_example_holds_a_two_turn_conversation(server: Server) -> None:
    lines = node("examples/ag-ui.mjs", env={"PHASEGRAPH_URL": server.url}, timeout=300).stdout.splitlines()
    assert lines[0] == "Let me see what is in the docs folder." and 'list_files({"path":"docs"})' in lines
    assert any(line.startswith(ANSWER) for line in lines) and any(line.startswith(TEAM) for line in lines)
    roles = lines[-1].split()
    assert roles.count("user") == 2 and roles[-1] == "assistant" and "tool" in roles
