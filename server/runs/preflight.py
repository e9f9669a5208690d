"""What a server checks and prepares before it serves: its settings, and the database's tables.

A single server does both as it starts; ``phasegraph serve --workers N`` does them once, in the
supervisor, before it starts the workers.
"""

from __future__ import annotations

from pathlib import Path

from phasegraph.nodes.errors import ConfigurationError
from phasegraph.nodes.settings import ServerSettings
from phasegraph.server.runs.protocols import project_refusals
from phasegraph.server.storage.persistence import open_checkpointer
from phasegraph.server.storage.retention import RetentionPolicy, parse_retention
from phasegraph.server.storage.store import RequestStore
from phasegraph.tools.planning import open_planning


def check_settings(settings: ServerSettings) -> RetentionPolicy | None:
    """Refuse to start on an operator's mistake (not per request); the retention policy in force."""
    if settings.workspace and not Path(settings.workspace).is_dir():
        raise ConfigurationError(f"PHASEGRAPH_WORKSPACE {settings.workspace!r} is not a folder")
    retention = parse_retention(settings.retention)  # a malformed policy refuses to start, too
    refusals = project_refusals(settings)  # and so does a malformed project file
    if refusals:
        raise ConfigurationError("the project file cannot be used:\n  " + "\n  ".join(refusals))
    return retention


async def prepare_database(settings: ServerSettings) -> None:
    """Create or migrate every table the server uses, once, before worker processes share the database."""
    async with open_checkpointer(settings.checkpointer):
        store = RequestStore.for_checkpointer(settings.checkpointer)
        try:
            await store.setup()
        finally:
            await store.close()
        planning = open_planning(settings.checkpointer)
        try:
            await planning.ensure_schema()
        finally:
            await planning.close()
