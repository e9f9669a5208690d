"""Double-texting across replicas: a run one replica drives is stopped by a message sent to another.

Two `phasegraph serve` processes on one Postgres, as behind a load balancer with no sticky sessions. A
long run starts on replica A; a second message on its thread reaches replica B with
``multitask_strategy`` ``interrupt`` or ``rollback``, or B is asked to cancel the run with
``action=rollback``. B cannot stop A's task itself: it is told through the store, as a cancel is, and
B's own run starts only once A has stored the stop (one running run per thread).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from langgraph_sdk import get_sync_client
from langgraph_sdk.errors import NotFoundError

from tests.helpers import turn, write_script
from tests.server.conftest import needs_postgres
from tests.server.test_langgraph_api import ASK, _checkpoints_of, _humans, _long_run

pytestmark = needs_postgres


@pytest.fixture
def replicas(servers: Any, tmp_path: Path) -> tuple[Any, Any, dict[str, str]]:
    (tmp_path / "long").mkdir()
    (tmp_path / "quick").mkdir()
    models = {
        "long": write_script(tmp_path / "long", turn(" ".join(["word"] * 400)), chunk_delay_ms=50),
        "quick": write_script(tmp_path / "quick", turn("Quick answer.")),
    }
    env = {
        "PHASEGRAPH_CHECKPOINTER": os.environ["PHASEGRAPH_TEST_POSTGRES_URL"],
        "PHASEGRAPH_ALLOWED_MODELS": ",".join(models.values()),
        "PHASEGRAPH_WORKERS": "1",  # one process each: a run is driven where it was started
    }
    first, second = servers(**env), servers(**env)
    return get_sync_client(url=first.url, timeout=60), get_sync_client(url=second.url, timeout=60), models


def test_interrupt_and_rollback_stop_a_run_another_replica_drives(
    replicas: tuple[Any, Any, dict[str, str]],
) -> None:
    on_a, on_b, models = replicas
    quick = {"model": models["quick"]}

    # interrupt: A's run is cancelled and kept; B's run goes on from its last checkpoint
    thread_id = on_a.threads.create()["thread_id"]
    first = _long_run(on_a, thread_id, models)
    second = on_b.runs.wait(
        thread_id, "triggered_phase", input=ASK, context=quick, multitask_strategy="interrupt"
    )
    assert second["answer"] == "Quick answer."
    assert {run["run_id"]: run["status"] for run in on_a.runs.list(thread_id)}[first] == "interrupted"
    assert _checkpoints_of(on_a, thread_id, first) > 0
    assert _humans(on_a, thread_id) == ["A long one.", ASK["messages"][0]["content"]]

    # rollback: A's run is removed with its checkpoints; the thread holds B's run only
    thread_id = on_a.threads.create()["thread_id"]
    first = _long_run(on_a, thread_id, models)
    second = on_b.runs.wait(
        thread_id, "triggered_phase", input=ASK, context=quick, multitask_strategy="rollback"
    )
    assert second["answer"] == "Quick answer."
    with pytest.raises(NotFoundError):
        on_a.runs.get(thread_id, first)
    assert _checkpoints_of(on_a, thread_id, first) == 0
    assert _humans(on_a, thread_id) == [ASK["messages"][0]["content"]]

    # cancel with rollback, asked of B: the thread is as before the run, on both replicas
    thread_id = on_a.threads.create()["thread_id"]
    run_id = _long_run(on_a, thread_id, models)
    on_b.runs.cancel(thread_id, run_id, action="rollback")
    assert on_a.runs.list(thread_id) == [] and on_a.threads.get_history(thread_id) == []
    assert on_a.threads.get(thread_id)["status"] == "idle"
