"""A run manager on memory storage, as the server opens one, for tests of the run engine."""

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from langgraph.checkpoint.memory import InMemorySaver

from phasegraph.nodes.settings import ServerSettings
from phasegraph.server.runs.manager import RunManager
from phasegraph.server.storage.store import RequestStore


@pytest.fixture
async def manager(workspace: Path) -> AsyncIterator[RunManager]:
    settings = ServerSettings(checkpointer="memory", workspace=str(workspace))
    store = RequestStore.for_checkpointer("memory")
    await store.setup()
    manager = RunManager(settings, store, InMemorySaver())
    await manager.open()
    try:
        yield manager
    finally:
        await manager.close()
        await store.close()
