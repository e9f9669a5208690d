"""``phasegraph serve``: one process, or worker processes sharing one port and one durable database.

Each worker is a whole server (its own run manager, owner id and wake-ups); they coordinate through
the database exactly as replicas do, so any worker may answer any request. The settings are checked
before uvicorn starts, however many workers: a refusal is exit code 2 with its problems, as ``run``'s
(a worker that could not start would be restarted forever; a single server refused inside uvicorn's
lifespan exited 3). With several workers the supervisor also migrates the database once before it
starts them (workers migrating the same sqlite file at once would trip over each other), and makes the
private folder they share their metrics in, so that whichever worker answers ``GET /metrics`` counts
them all (``phasegraph.nodes.telemetry.shared``); it removes the folder as it ends.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import tempfile
from collections.abc import Iterator
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console

from phasegraph.nodes.errors import ConfigurationError
from phasegraph.server.cli.project_file import ConfigOption, use_project

if TYPE_CHECKING:
    from phasegraph.nodes.settings import ServerSettings

APP = "phasegraph.server.app:app"
#: Where the workers share their metrics (prometheus_client's multiprocess mode reads it too).
METRICS_FOLDER = "PROMETHEUS_MULTIPROC_DIR"
#: How long the supervisor waits for a worker to answer its health check before it replaces the worker: a
#: starting worker imports LangChain and LangGraph first (over uvicorn's 5 s on a busy machine).
HEALTH_CHECK_SECONDS = 30


def serve_command(
    host: Annotated[str, typer.Option(help="Interface to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to listen on.")] = 8000,
    workers: Annotated[
        int | None,
        typer.Option(
            min=1,
            help="Worker processes on the one port, sharing the database (PHASEGRAPH_WORKERS). "
            "Default: one per CPU; one with the memory checkpointer.",
        ),
    ] = None,
    config: ConfigOption = None,
) -> None:
    """Serve the HTTP API and web page (settings from PHASEGRAPH_* variables).

    The project file (--config, PHASEGRAPH_CONFIG or ./phasegraph.toml) is checked first: a
    malformed one is refused with exit code 2, every problem listed.
    """
    from pydantic import ValidationError

    use_project(config)
    try:
        serve(host, port, workers, _log_config())
    except (ConfigurationError, ValidationError) as exc:
        Console(stderr=True, soft_wrap=True).print(f"[red]error:[/] {exc}", highlight=False)
        raise typer.Exit(2) from None


def _log_config() -> dict[str, Any]:
    """Uvicorn's logging in PHASEGRAPH_LOG_FORMAT, our own loggers on its handler, secrets masked on each."""
    from uvicorn.config import LOGGING_CONFIG

    from phasegraph.nodes.logs import dict_config

    config = dict_config(LOGGING_CONFIG)
    config["root"] = {"handlers": ["default"], "level": "WARNING"}
    # what each retention round removed
    config["loggers"]["phasegraph.server.storage.retention"] = {"level": "INFO"}
    return config


def worker_count(settings: ServerSettings, asked: int | None) -> int:
    """How many workers to run: ``asked``, else ``PHASEGRAPH_WORKERS``, else one per CPU when they can share.

    Raises:
        ConfigurationError: several workers asked for on the ``memory`` checkpointer.
    """
    count = asked or settings.workers
    if settings.checkpointer == "memory":
        if count is not None and count > 1:
            raise ConfigurationError(
                f"{count} workers cannot share the memory checkpointer (each process would have its "
                "own): use PHASEGRAPH_CHECKPOINTER=sqlite:PATH or postgresql://..., or one worker"
            )
        return 1
    return count or usable_cpus()


def usable_cpus() -> int:
    """The CPUs this process may run on (its affinity, which a container's cpuset limits), not the host's."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except AttributeError:  # no affinity on this platform (macOS)
        return os.cpu_count() or 1


def serve(host: str, port: int, workers: int | None, log_config: dict[str, Any]) -> None:
    """Serve the app on ``host:port`` with the worker processes ``worker_count`` decides."""
    import uvicorn

    from phasegraph.nodes.settings import ServerSettings
    from phasegraph.server.runs.preflight import check_settings, prepare_database

    settings = ServerSettings()
    count = worker_count(settings, workers)
    # before uvicorn, however many workers: refused inside its lifespan, a single server exits 3
    check_settings(settings)
    if count > 1:  # a single server migrates as it starts
        asyncio.run(prepare_database(settings))
    with shared_metrics() if count > 1 else contextlib.nullcontext():
        uvicorn.run(APP, host=host, port=port, workers=count, log_level="info", log_config=log_config,
                    timeout_worker_healthcheck=HEALTH_CHECK_SECONDS)  # fmt: skip


@contextlib.contextmanager
def shared_metrics() -> Iterator[None]:
    """A fresh private folder the workers started meanwhile share their metrics in, removed at the end.

    Fresh at each start: the files of an earlier server would add to this one's counts. The workers
    learn it from ``PROMETHEUS_MULTIPROC_DIR``, the variable prometheus_client itself reads.
    """
    with tempfile.TemporaryDirectory(prefix="phasegraph-metrics-") as folder:
        before = os.environ.get(METRICS_FOLDER)
        os.environ[METRICS_FOLDER] = folder
        try:
            yield
        finally:
            if before is None:
                del os.environ[METRICS_FOLDER]
            else:
                os.environ[METRICS_FOLDER] = before
