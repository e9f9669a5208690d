import os
import socket
import subprocess
import sys
import time

from phasegraph.nodes.events import Paused, PhaseStart, Resumed, TextChunk
from phasegraph.server.runs.recovery import is_orphaned, new_owner_id, owner_gone, replaced_from
from phasegraph.server.storage.records import RequestRecord


def _dead_pid() -> int:
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()
    return process.pid


def test_an_owner_on_this_host_is_gone_when_its_process_is():
    me = new_owner_id()
    host = socket.gethostname()
    assert not owner_gone(me, me)
    assert owner_gone(f"{host}:{_dead_pid()}:abc", me)
    assert owner_gone(f"{host}:{os.getpid()}:older", me)  # a predecessor that had our pid
    assert not owner_gone(f"{host}:{os.getppid()}:abc", me)  # alive
    assert not owner_gone(f"elsewhere:{_dead_pid()}:abc", me)  # other hosts: heartbeats decide
    assert not owner_gone("0123abcd", me)  # ids of older versions carry no pid


def test_a_run_is_orphaned_when_its_driver_is_gone_or_silent():
    me = new_owner_id()
    host = socket.gethostname()

    def record(owner: str, age: float, status: str = "running") -> RequestRecord:
        return RequestRecord(request_id="r", project_id="p", protocol="x", thread_id="r", status=status,
                             owner=owner, heartbeat_at=time.time() - age)  # fmt: skip

    assert is_orphaned(record(f"{host}:{_dead_pid()}:x", 0), me, 5)
    assert is_orphaned(record("elsewhere:1:x", 6), me, 5)
    assert not is_orphaned(record("elsewhere:1:x", 1), me, 5)
    assert not is_orphaned(record(me, 60), me, 5)  # our own runs are never orphans to us
    assert not is_orphaned(record(f"{host}:{_dead_pid()}:x", 60, "paused"), me, 5)
    # a live process of this host is only late (a busy worker): six times the patience before it counts
    alive = f"{host}:{os.getppid()}:x"
    assert not is_orphaned(record(alive, 6), me, 5) and not is_orphaned(record(alive, 29), me, 5)
    assert is_orphaned(record(alive, 31), me, 5)


def test_replaced_from_names_the_first_event_after_the_checkpoint_of_the_current_attempt():
    def at(seq: int, step: int | None, event=TextChunk) -> object:
        fields = {"text": "t"} if event is TextChunk else {}
        return event(seq=seq, graph_step=step, **fields)

    first = [at(1, 1, PhaseStart), at(2, 1), at(3, 3, PhaseStart), at(4, 3)]
    assert replaced_from(first, 2) == 3
    assert replaced_from(first, 3) is None  # nothing ran after the checkpoint
    assert replaced_from(first, None) is None
    resumed = Resumed(seq=5, checkpoint_id="c")
    # After a resume only the new attempt counts; the server's own events carry no step.
    later = [*first, resumed, at(6, 4, PhaseStart), Paused(seq=7, reason="crashed")]
    assert replaced_from(later, 2) == 6
