"""The FastAPI app: what opens and closes with it, and the routers it is made of.

Each surface is one router module in ``server/http`` (native streams, requests, checkpoints,
networks, planner, AG-UI, the LangGraph Server API, metrics, the page); runs go through the one run
manager (``server/runs``); everything kept lives in the database (``server/storage``).
"""

import asyncio
import multiprocessing
import os
import signal
import threading
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from types import FrameType
from typing import Annotated, Any

from phasegraph.nodes.collector import collector_paused

# The server's libraries and modules, imported without collections (phasegraph.nodes.collector).
with collector_paused():
    from fastapi import FastAPI, Query, Request
    from fastapi.staticfiles import StaticFiles
    from starlette.middleware.cors import CORSMiddleware
    from starlette.types import ASGIApp

    from phasegraph.nodes.settings import ServerSettings
    from phasegraph.server.http.ag_ui import ag_ui_routes
    from phasegraph.server.http.auth import Access, access_for, parse_tokens
    from phasegraph.server.http.bodies import PROJECT_PARAM
    from phasegraph.server.http.checkpoints import checkpoint_routes
    from phasegraph.server.http.errors import install_error_handlers
    from phasegraph.server.http.langgraph_api import langgraph_routes
    from phasegraph.server.http.metrics import CountStreams, metrics_routes
    from phasegraph.server.http.networks import network_routes
    from phasegraph.server.http.page import STATIC, page_routes
    from phasegraph.server.http.planner import planner_routes
    from phasegraph.server.http.requests import request_routes
    from phasegraph.server.http.responses import ID_PATTERN, DeclaredTooLarge, document_settings
    from phasegraph.server.http.streams import stream_routes
    from phasegraph.server.runs.manager import RunManager
    from phasegraph.server.runs.preflight import check_settings
    from phasegraph.server.storage.persistence import open_checkpointer
    from phasegraph.server.storage.retention import Retention
    from phasegraph.server.storage.store import RequestStore
    from phasegraph.tools.networks import open_network_store
    from phasegraph.tools.planning import open_planning

#: Headers pages read: where a run lives (``Content-Location``, as the LangGraph JS SDK reads it) and
#: the pagination headers of its searches.
CORS_EXPOSED_HEADERS = ["content-location", "location", "x-pagination-total", "x-pagination-next"]


def create_app(settings: ServerSettings | None = None) -> FastAPI:
    """Build the app; the checkpointer and request store open and close with it."""
    settings = settings or ServerSettings()
    tokens = parse_tokens(settings.api_tokens.get_secret_value()) if settings.api_tokens else {}

    def caller(
        request: Request,
        project_id: Annotated[
            str | None, Query(alias="projectId", pattern=ID_PATTERN, description=PROJECT_PARAM)
        ] = None,
    ) -> Access:
        access = access_for(request, tokens)
        if project_id is None:
            return access
        access.require(project_id)
        return Access(projects=frozenset({project_id}), named=project_id)

    # FastAPI refuses a larger body with 413 while it streams in, before anything parses it.
    app = _App(title="phasegraph", lifespan=_lifespan(settings), max_body_size=settings.max_body_bytes)
    app.state.settings = settings
    install_error_handlers(app)
    for router in (
        stream_routes(caller), request_routes(caller), checkpoint_routes(caller), network_routes(caller),
        planner_routes(caller), ag_ui_routes(caller), *langgraph_routes(caller), metrics_routes(tokens),
        page_routes(),
    ):  # fmt: skip
        app.include_router(router)
    app.add_middleware(CountStreams)
    app.mount("/static", StaticFiles(directory=STATIC), name="static")
    return app


def _lifespan(settings: ServerSettings) -> Any:
    """Open the checkpointer, the stores and the run manager with the app; pause and close at its end."""

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        retention = check_settings(settings)
        _stop_with_supervisor()
        async with open_checkpointer(settings.checkpointer) as saver:
            store = RequestStore.for_checkpointer(settings.checkpointer)
            await store.setup()
            manager = RunManager(settings, store, saver)
            app.state.manager = manager
            app.state.networks = open_network_store(settings.checkpointer)
            app.state.planning = open_planning(settings.checkpointer)
            await app.state.planning.ensure_schema()
            await manager.open()
            pruning = Retention(retention, settings.retention_interval_seconds, saver, store).start()
            restore_signals = _pause_runs_on_stop_signals(manager)
            try:
                yield
            finally:
                restore_signals()
                await pruning.stop()
                await manager.close()
                await app.state.networks.close()
                await app.state.planning.close()
                await store.close()

    return lifespan


def _pause_runs_on_stop_signals(manager: RunManager) -> Callable[[], None]:
    """SIGTERM and SIGINT pause this process's runs at once, then the HTTP server's own stop goes on.

    Uvicorn stops on these signals by waiting for every open answer to end before the app's
    shutdown, and an event stream ends only with its run: a client streaming a run would keep it
    going to its end (or until a deployment's grace period kills the process). So the handler
    uvicorn installed is chained: the runs pause (``shutdown``) and streams of runs driven elsewhere
    end, which lets those answers end. Returns what puts the handlers back.
    """
    if threading.current_thread() is not threading.main_thread():  # a test's app: no signals here
        return lambda: None
    loop = asyncio.get_running_loop()
    chained: dict[int, Any] = {number: signal.getsignal(number) for number in (signal.SIGTERM, signal.SIGINT)}

    def on_signal(number: int, frame: FrameType | None) -> None:
        loop.call_soon_threadsafe(manager.stop_soon)
        then = chained[number]
        if callable(then):
            then(number, frame)

    installed = [number for number, then in chained.items() if callable(then)]  # uvicorn's, not SIG_DFL
    for number in installed:
        signal.signal(number, on_signal)

    def restore() -> None:
        for number in installed:
            signal.signal(number, chained[number])

    return restore


def _stop_with_supervisor() -> None:
    """A worker process shuts down (pausing its runs) when its supervisor dies, even by SIGKILL.

    A worker left running would keep serving the port nobody manages any more; the parent's
    sentinel, which ``multiprocessing`` hands every child it starts, becomes readable when it dies.
    """
    parent = multiprocessing.parent_process()
    if parent is None or parent.sentinel is None:  # not a worker: a single server, or a test's app
        return
    sentinel = parent.sentinel

    def parent_died() -> None:
        asyncio.get_running_loop().remove_reader(sentinel)
        os.kill(os.getpid(), signal.SIGTERM)  # uvicorn's own graceful shutdown

    asyncio.get_running_loop().add_reader(sentinel, parent_died)


class _App(FastAPI):
    """FastAPI whose schema states this server's settings, and whose oversized bodies get JSON 413s."""

    def openapi(self) -> dict[str, Any]:
        """The schema, with what the settings decide (tokens, models, message size) written in."""
        if self.openapi_schema is None:
            self.openapi_schema = document_settings(super().openapi(), self.state.settings)
        return self.openapi_schema

    def build_middleware_stack(self) -> ASGIApp:
        """Starlette's stack, behind the JSON answer to a declared oversized body, behind CORS if set.

        CORS comes first, so that every answer a browser page gets (a 401, a 413, a 500 too) carries
        its headers and the page can read it, and a preflight is answered before any token is asked.
        Any request header may be sent (``Authorization``, ``X-Phasegraph-Project``, ``Last-Event-ID``,
        the SDKs' ``x-api-key`` and ``Prefer``, and whatever Studio adds): the origins are the guard.
        """
        settings = self.state.settings
        stack = DeclaredTooLarge(super().build_middleware_stack(), settings.max_body_bytes)
        origins = settings.cors_origin_list()
        if not origins:
            return stack
        return CORSMiddleware(
            stack, allow_origins=origins, allow_methods=["*"], allow_headers=["*"],
            expose_headers=CORS_EXPOSED_HEADERS,
        )  # fmt: skip


with collector_paused():  # building the routes makes long-lived objects too
    app = create_app()
