"""How a run the server drives ends in its trace and metrics, whatever ends it: the root's outcome,
the spans still open, a fork's own trace parent. Spans and metrics read back in process."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from phasegraph.server.runs.eventlog import Superseded
from phasegraph.server.runs.manager import RunManager
from phasegraph.server.storage.checkpoints import thread_config
from phasegraph.server.storage.records import RequestRecord
from tests.helpers import metric_points, turn, write_script

WAIT = 20


async def _start(manager: RunManager, request_id: str, **options: Any) -> RequestRecord:
    return await manager.start(
        manager.protocol("triggered_phase"), "Summarise the roadmap", project_id="p", request_id=request_id,
        thread_id=options.pop("thread_id", "t"), model=options.pop("model", None), show_tool_outputs=False,
        **options,
    )  # fmt: skip


async def _root(spans: InMemorySpanExporter, request_id: str) -> ReadableSpan:
    """The root span of the request's (last) run, once it has ended."""
    for _ in range(WAIT * 10):
        roots = [s for s in spans.get_finished_spans() if s.parent is None
                 and (s.attributes or {}).get("phasegraph.request_id") == request_id]  # fmt: skip
        if roots:
            return roots[-1]
        await asyncio.sleep(0.1)
    raise AssertionError(f"no root span of {request_id}")


async def _ended(manager: RunManager, record: RequestRecord) -> None:
    async def follow() -> None:
        async for _ in manager.follow(record):
            pass

    await asyncio.wait_for(follow(), WAIT)


def _ended_counts(reader: InMemoryMetricReader) -> dict[str, float]:
    counts: dict[str, float] = {}
    for point in metric_points(reader).get("phasegraph.runs.ended", []):
        outcome = str(point.attributes["phasegraph.outcome"])
        counts[outcome] = counts.get(outcome, 0) + point.value
    return counts


async def test_a_run_left_with_nothing_to_run_ends_failed(manager: RunManager, spans, reader):
    await _ended(manager, await _start(manager, "first"))
    going_on = await _start(manager, "going-on", graph_input=None)  # on from a thread that is done
    await _ended(manager, going_on)
    root = await _root(spans, "going-on")
    assert (root.attributes or {})["phasegraph.outcome"] == "failed"
    assert root.status.status_code == StatusCode.ERROR
    assert _ended_counts(reader) == {"completed": 1, "failed": 1}


@pytest.mark.parametrize(("failure", "outcome"), [(Superseded("taken over"), "superseded"),
                                                  (OSError("database down"), "failed")])  # fmt: skip
async def test_a_run_whose_event_log_write_fails_ends_as_it_stops(
    manager: RunManager, spans, reader, monkeypatch, failure: Exception, outcome: str
):
    real, calls = manager.engine.log.append, []

    async def append(*args: Any, **kwargs: Any) -> asyncio.Future[None]:
        calls.append(1)
        if len(calls) == 3:
            failed: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            failed.set_exception(failure)
            return failed
        return await real(*args, **kwargs)

    monkeypatch.setattr(manager.engine.log, "append", append)
    await _start(manager, "r")
    root = await _root(spans, "r")
    assert (root.attributes or {})["phasegraph.outcome"] == outcome
    assert (root.status.status_code == StatusCode.ERROR) is (outcome == "failed")
    assert _ended_counts(reader) == {outcome: 1}


@pytest.mark.parametrize(("stop", "outcome"), [("cancel", "cancelled"), ("shutdown", "paused")])
async def test_a_run_stopped_mid_node_ends_its_spans_without_errors(
    manager: RunManager, spans, tmp_path: Path, stop: str, outcome: str
):
    model = write_script(tmp_path, turn("a long answer " * 40), chunk_delay_ms=30)
    manager.engine.settings.allowed_models = model
    record = await _start(manager, "r", model=model)
    for _ in range(WAIT * 10):  # the model is streaming its answer
        if any(s.name == "start_turn" for s in spans.get_finished_spans()):
            break
        await asyncio.sleep(0.1)
    await asyncio.sleep(0.3)
    await (manager.cancel(record) if stop == "cancel" else manager.shutdown())
    root = await _root(spans, "r")
    assert (root.attributes or {})["phasegraph.outcome"] == outcome
    stopped = [s for s in spans.get_finished_spans() if s.name in ("action_phase", "chat script.json")]
    assert stopped and all(s.status.status_code != StatusCode.ERROR for s in stopped)
    assert any("phasegraph.cancelled" in [e.name for e in s.events] for s in stopped)


async def test_a_fork_keeps_its_own_trace_parent_and_links_to_its_origin(manager: RunManager, spans):
    origin = await _start(manager, "origin")
    await _ended(manager, origin)
    served = manager.protocol("triggered_phase")
    history = [s async for s in served.graph.aget_state_history(thread_config(origin.thread_key))]
    checkpoint = next(s for s in history if s.next).config["configurable"]["checkpoint_id"]
    fork = await manager.fork(origin, checkpoint)
    await _ended(manager, fork)
    first, forked = await _root(spans, "origin"), await _root(spans, fork.request_id)
    stored = await manager.store.get(fork.request_key)
    assert stored is not None and stored.settings["trace_parent"].split("-")[1:3] == [
        f"{forked.context.trace_id:032x}", f"{forked.context.span_id:016x}",
    ]  # fmt: skip
    kept = await manager.store.get(origin.request_key)
    assert (
        kept is not None and kept.settings["trace_parent"].split("-")[1] == f"{first.context.trace_id:032x}"
    )
    assert [link.context.span_id for link in forked.links] == [first.context.span_id]
    assert (forked.attributes or {})["phasegraph.resumed"] is True
