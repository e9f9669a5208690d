"""The "Bring your own tools and model" page: its phasegraph.toml is valid and shown word for word."""

from collections.abc import Iterator
from pathlib import Path

import pytest

from phasegraph.graphs.registry import PROTOCOLS
from phasegraph.nodes.project import load_project, project_problems
from phasegraph.nodes.settings import provider_settings

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "docs" / "examples" / "phasegraph.toml"
PAGE = ROOT / "docs" / "your-tools.md"


def test_the_example_project_file_has_no_problem() -> None:
    assert project_problems(EXAMPLE) == []


def test_the_page_shows_the_example_word_for_word() -> None:
    assert f"```toml\n{EXAMPLE.read_text(encoding='utf-8')}```" in PAGE.read_text(encoding="utf-8")


def test_the_readme_links_the_page_on_its_first_screen() -> None:
    first_screen = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()[:40]
    assert any("(docs/your-tools.md)" in line for line in first_screen)


@pytest.fixture
def openai_key(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The example names openai: models, which need a key to be built (never used: nothing runs)."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-used")
    provider_settings.cache_clear()  # read once per process: an earlier test may have read it unset
    yield
    provider_settings.cache_clear()


@pytest.mark.parametrize("protocol", ["triggered_phase", "unified", "xml_contract"])
@pytest.mark.usefixtures("openai_key")
def test_every_protocol_setting_of_the_example_applies(protocol: str) -> None:
    project = load_project(EXAMPLE)
    assert project is not None
    context = PROTOCOLS[protocol].make_context(project_file=str(EXAMPLE))
    for key, value in project.file.protocols.get(protocol, {}).items():
        assert getattr(context, key) == value
    assert context.model == "openai:gpt-4.1-mini"
    assert context.workspace == str(EXAMPLE.parent)
