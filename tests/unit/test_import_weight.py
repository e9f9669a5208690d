"""What each entry point imports, read from ``sys.modules`` of a fresh interpreter (never by timing).

``import phasegraph``, ``phasegraph --help`` and ``phasegraph --version`` load no provider SDK, database
layer, web framework, MCP SDK or OpenTelemetry SDK; a demo run loads what a run needs and none of the
server's libraries.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from phasegraph.server.cli.main import COMMANDS, app
from phasegraph.server.storage.migrate import head_revision

#: Never loaded by ``import phasegraph`` or ``phasegraph --help``.
HEAVY = (
    "openai",
    "anthropic",
    "sqlalchemy",
    "alembic",
    "psycopg",
    "fastapi",
    "uvicorn",
    "mcp",
    "opentelemetry.sdk",
)
#: Not loaded by a run on the scripted model without a project file (LangGraph itself loads the OTel SDK
#: through langsmith, so it is not listed).
SERVER_ONLY = ("openai", "anthropic", "sqlalchemy", "alembic", "psycopg", "fastapi", "uvicorn", "mcp")

_REPORT = "import json, sys; print('\\n' + json.dumps(sorted(sys.modules)))"


def _modules(code: str, *, cwd: str | None = None) -> set[str]:
    """The modules a fresh interpreter holds after running ``code`` (its last output line)."""
    done = subprocess.run(
        [sys.executable, "-c", f"{code}\n{_REPORT}"], capture_output=True, text=True, timeout=120, cwd=cwd
    )
    assert done.returncode == 0, done.stderr
    return set(json.loads(done.stdout.strip().splitlines()[-1]))


def _loaded(modules: set[str], names: tuple[str, ...]) -> list[str]:
    return [name for name in names if any(m == name or m.startswith(f"{name}.") for m in modules)]


def _cli(*args: str) -> str:
    """Code that runs the console script's ``main`` with ``args`` and keeps going after it exits."""
    return (
        f"import sys; sys.argv = ['phasegraph', *{list(args)!r}]\n"
        "from phasegraph.server.cli.main import main\n"
        "try:\n    main()\nexcept SystemExit:\n    pass"
    )


def test_import_phasegraph_loads_nothing_heavy() -> None:
    modules = _modules("import phasegraph")
    assert _loaded(modules, HEAVY) == []
    assert _loaded(modules, ("langgraph", "langchain_core", "pydantic")) == []


def test_the_public_names_still_come_from_phasegraph() -> None:
    modules = _modules(
        "import phasegraph\n"
        "assert phasegraph.protocols[0] == 'triggered_phase', phasegraph.protocols\n"
        "assert callable(phasegraph.run) and phasegraph.Final.__name__ == 'Final'\n"
        "assert set(phasegraph.__all__) <= set(dir(phasegraph))"
    )
    assert _loaded(modules, SERVER_ONLY) == []  # the run API loads LangGraph, and nothing of the server


def test_an_unknown_name_is_an_attribute_error() -> None:
    import phasegraph

    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        _ = phasegraph.nope  # type: ignore[attr-defined]


@pytest.mark.parametrize("option", ["--help", "--version"])
def test_help_and_version_load_typer_only(tmp_path, option: str) -> None:
    modules = _modules(_cli(option), cwd=str(tmp_path))
    assert _loaded(modules, HEAVY) == []
    assert _loaded(modules, ("langgraph", "langchain_core", "pydantic")) == []
    assert sorted(m for m in modules if m.startswith("phasegraph.")) == [
        "phasegraph.server",
        "phasegraph.server.cli",
        "phasegraph.server.cli.main",
    ]


def test_a_demo_run_loads_no_server_library(tmp_path) -> None:
    modules = _modules(_cli("run", "triggered_phase", "Summarise the roadmap"), cwd=str(tmp_path))
    assert "phasegraph.graphs.triggered_phase" in modules  # it did run
    assert _loaded(modules, SERVER_ONLY) == []


def test_the_server_app_loads_no_provider_sdk_or_migrations() -> None:
    # nor what only a scrape (the Prometheus client) or an MCP tool's call (jsonschema) needs
    modules = _modules("import phasegraph.server.app")
    assert _loaded(modules, ("openai", "anthropic", "mcp", "alembic", "psycopg", "uvicorn",
                             "prometheus_client", "jsonschema")) == []  # fmt: skip


def test_the_listing_shows_each_command_s_own_first_line() -> None:
    """The summaries ``--help`` lists without importing a command are the commands' own first lines."""
    import typer

    group = typer.main.get_command(app)
    for name, entry in COMMANDS.items():
        command = entry.load(name)
        assert command.name == name
        assert (command.help or "").strip().splitlines()[0] == entry.summary, name
        assert group.get_command(None, name).short_help == entry.summary  # type: ignore[union-attr, arg-type]


def test_the_head_revision_is_alembic_s() -> None:
    """The file-name shortcut that skips Alembic on an up-to-date database names Alembic's own head."""
    from alembic.script import ScriptDirectory

    from phasegraph.server.storage.migrate import alembic_config

    assert head_revision() == ScriptDirectory.from_config(alembic_config()).get_current_head()


def test_the_server_app_is_imported_and_built_without_collections() -> None:
    # Importing the server and building its app made ~450 young and 3 full collections that found almost
    # no garbage (15% of the import's CPU); none runs now (what start-up made is frozen, so resuming
    # scans none of it), and the collector runs again afterwards.
    code = (
        "import gc, json, sys\n"
        "runs = []\n"
        "def seen(phase, info):  # a collection once the server's libraries began to load\n"
        "    if phase == 'start' and 'fastapi' in sys.modules:\n"
        "        runs.append(info['generation'])\n"
        "gc.callbacks.append(seen)\n"
        "from phasegraph.server.app import app\n"
        "gc.callbacks.remove(seen)\n"
        "print(json.dumps([runs, gc.isenabled() and gc.get_freeze_count() > 100_000]))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    runs, resumed_and_frozen = json.loads(done.stdout.strip().splitlines()[-1])
    assert runs == [] and resumed_and_frozen, (runs, resumed_and_frozen)
