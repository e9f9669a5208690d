"""The model a server's run uses when its request names none, and the models a request may name."""

from __future__ import annotations

from pathlib import Path

import pytest

from phasegraph.nodes.settings import ServerSettings
from tests.tool_projects import write_project, write_script


@pytest.fixture
def scripts(tmp_path: Path) -> dict[str, str]:
    return {name: f"scripted:{write_script(tmp_path, [{'content': name}], f'{name}.json')}"
            for name in ("main", "planner", "xml")}  # fmt: skip


@pytest.fixture
def project(tmp_path: Path, scripts: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> Path:
    path = write_project(tmp_path, {
        "model": scripts["main"],
        "models": {"planner": scripts["planner"]},
        "protocols": {"xml_contract": {"model": scripts["xml"]}},
    })  # fmt: skip
    monkeypatch.setenv("PHASEGRAPH_CONFIG", str(path))
    monkeypatch.delenv("PHASEGRAPH_MODEL", raising=False)
    monkeypatch.delenv("PHASEGRAPH_ALLOWED_MODELS", raising=False)
    return path


def test_without_a_project_file_the_default_is_the_demo_model(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv("PHASEGRAPH_MODEL", raising=False)
    monkeypatch.delenv("PHASEGRAPH_CONFIG", raising=False)
    settings = ServerSettings(allowed_models="openai:gpt-4o")
    assert settings.default_model("unified") == "scripted:demo"
    assert settings.models("unified") == {"scripted:demo", "openai:gpt-4o"}


def test_the_project_file_gives_each_protocol_its_model(project: Path, scripts: dict[str, str]):
    settings = ServerSettings()
    assert settings.default_model("unified") == scripts["main"]
    assert settings.default_model("planner") == scripts["planner"]  # [models]
    assert settings.default_model("xml_contract") == scripts["xml"]  # [protocols.xml_contract] model
    # a request may name its protocol's default (or an allowed one), not another protocol's
    assert settings.models("planner") == {scripts["planner"]}
    assert scripts["planner"] in settings.models()  # what the schema lists: any protocol's


def test_the_operators_model_wins_over_the_project_file(
    project: Path, scripts: dict[str, str], monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setenv("PHASEGRAPH_MODEL", "openai:gpt-4o")
    settings = ServerSettings()
    assert settings.default_model("planner") == "openai:gpt-4o"
    assert settings.models("planner") == {"openai:gpt-4o"}
