"""Crash recovery helpers: who drives a run, whether that process is gone, what a re-run replaces.

A replica that dies mid-run (``kill -9``, OOM, power) leaves its requests ``running``. Another
replica, or the same server restarted, takes them over; these functions tell when it may and
which earlier events the re-run makes obsolete.
"""

from __future__ import annotations

import os
import socket
import time
from typing import Literal
from uuid import uuid4

from langchain_core.messages import HumanMessage
from langgraph.types import StateSnapshot

from phasegraph.nodes.events import Event, Resumed
from phasegraph.server.storage.checkpoints import can_go_on
from phasegraph.server.storage.records import RequestRecord

#: Where a request started as a user's turn keeps its message (``RequestRecord.options``).
TURN_MESSAGE = "turn_message"

#: How many times ``orphan_after_seconds`` a live process on this host may stay silent before its runs are
#: taken over (a worker busy with hundreds of runs heartbeats late; a process that is gone is seen at once).
LOCAL_PATIENCE = 6


def new_owner_id() -> str:
    """An id for this process's runs: host and pid (so a restart can tell its predecessor died)."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid4().hex[:12]}"


def owner_gone(owner: str | None, me: str) -> bool:
    """True when ``owner`` was a process on this host that no longer runs.

    A restarted server often gets the pid its predecessor had (pid 1 in a container), so an
    owner with our host and pid that is not us is a dead predecessor too. Owners on other hosts
    cannot be checked here: their heartbeats decide.
    """
    return _local_state(owner, me) == "gone"


def _local_state(owner: str | None, me: str) -> Literal["gone", "alive", "unknown"]:
    """Whether ``owner`` is a process of this host that is gone, or alive; ``unknown`` elsewhere."""
    if not owner or owner == me:
        return "unknown"
    host, _, rest = owner.partition(":")
    pid_text = rest.partition(":")[0]
    if host != socket.gethostname() or not pid_text.isdecimal():
        return "unknown"
    pid = int(pid_text)
    if pid == os.getpid():
        return "gone"
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return "gone"
    except PermissionError:  # alive, another user's process
        return "alive"
    return "alive"


def is_orphaned(record: RequestRecord, me: str, stale_after: float) -> bool:
    """A running request whose driver is gone, or silent for longer than ``stale_after`` seconds.

    A driver on this host whose process is alive gets ``LOCAL_PATIENCE`` times as long: a loaded
    worker's heartbeat runs late (its event loop is busy with its runs), and taking its runs over
    would stop them; only one silent that long is taken to hang.
    """
    if record.status != "running" or record.owner == me:
        return False
    state = _local_state(record.owner, me)
    if state == "gone":
        return True
    silence = time.time() - (record.heartbeat_at or 0)
    return silence > stale_after * (LOCAL_PATIENCE if state == "alive" else 1)


def replaced_from(events: list[Event], checkpoint_step: int | None) -> int | None:
    """The first seq of the attempt a re-run from a checkpoint repeats, if it emitted anything.

    ``events`` are the request's events; only those after its last ``resumed`` event belong to
    the current attempt. Those emitted by graph steps after ``checkpoint_step`` will be emitted
    again by the re-run.
    """
    if checkpoint_step is None:
        return None
    start = max((e.seq for e in events if isinstance(e, Resumed)), default=0)
    repeated = [
        e.seq for e in events if e.seq > start and e.graph_step is not None and e.graph_step > checkpoint_step
    ]
    return min(repeated, default=None)


def unsaved_turn(record: RequestRecord, snapshot: StateSnapshot) -> dict[str, list[HumanMessage]] | None:
    """The input of a user's turn whose run saved nothing before its server died, to run it from its start.

    Checkpoints name the request that saved them (``run_id``). A turn's first checkpoint (its input) is
    written while its first step runs, so a server killed at once leaves the thread as it was before the
    turn: nothing to go on from, yet the turn is kept with its request, which re-runs it whole. ``None``
    for a request that is no turn (its input is not kept), that saved a checkpoint, or whose thread has
    something to go on with, and for a request that ended (a finished turn is never run again).
    """
    message = record.options.get(TURN_MESSAGE)
    if record.status not in ("running", "paused") or not isinstance(message, str) or can_go_on(snapshot):
        return None
    if (snapshot.metadata or {}).get("run_id") == record.request_id:
        return None  # it saved its steps: it ran to its end, or its last step's writes are what was lost
    return {"messages": [HumanMessage(message)]}
