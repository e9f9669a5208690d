"""A round-robin TCP proxy on loopback, as a load balancer in front of several servers (tests only).

Each new client connection goes to the next backend in turn; a backend that refuses the connection
(its process is gone) is skipped and the next one is tried. Bytes are copied both ways unchanged, as
they come (no buffering: Server-Sent Events pass through at once). When the backend's side ends, the
client's connection is closed too, as a real balancer does when its upstream dies.

Bounded: loopback addresses only, at most ``max_connections`` open at once (more are closed at once),
and the proxy stops by itself after ``max_seconds`` if nobody stopped it; ``stop()`` closes every
connection it holds. Use it as a context manager::

    with RoundRobinProxy([8001, 8002, 8003]) as proxy:
        httpx.get(f"{proxy.url}/healthz")
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from dataclasses import dataclass, field
from types import TracebackType

#: The one host the proxy listens on and forwards to.
LOOPBACK = "127.0.0.1"
#: How long connecting to one backend may take before the next one is tried.
CONNECT_SECONDS = 2.0
#: Bytes read at a time in either direction.
CHUNK = 65536


@dataclass
class Route:
    """Where one client connection went: the client's port, the backend's index (``None``: none took it)."""

    client_port: int
    backend: int | None


@dataclass
class RoundRobinProxy:
    """Forwards each new connection on ``127.0.0.1:port`` to the next of ``backends`` (loopback ports)."""

    backends: list[int]
    max_connections: int = 64
    max_seconds: float = 300.0
    port: int = 0
    #: Every client connection, in the order they came, and where each went.
    routes: list[Route] = field(default_factory=list)
    #: How many times a backend refused a connection (and the next one was tried).
    refused: int = 0
    _next: int = 0
    _open: int = 0
    _loop: asyncio.AbstractEventLoop | None = None
    _thread: threading.Thread | None = None
    _stopped: asyncio.Event | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def url(self) -> str:
        return f"http://{LOOPBACK}:{self.port}"

    def backend_of(self, client_port: int) -> int | None:
        """The index of the backend that the client connection from ``client_port`` was sent to."""
        with self._lock:
            return next((r.backend for r in reversed(self.routes) if r.client_port == client_port), None)

    def start(self) -> RoundRobinProxy:
        """Listen on a free loopback port (or ``port``) and forward in a thread of its own."""
        assert self.backends and all(0 < p < 65536 for p in self.backends), self.backends
        ready = threading.Event()
        failure: list[BaseException] = []

        def run() -> None:
            try:
                asyncio.run(self._serve(ready))
            except BaseException as exc:  # handed to start() when it happens before ready
                failure.append(exc)
                ready.set()

        self._thread = threading.Thread(target=run, name="rr-proxy", daemon=True)
        self._thread.start()
        if not ready.wait(10) or failure:
            raise RuntimeError(f"the proxy did not start: {failure}")
        return self

    def stop(self) -> None:
        """Close the listener and every connection; wait for the proxy's thread to end."""
        loop, stopped = self._loop, self._stopped
        if loop is not None and stopped is not None and not loop.is_closed():
            with contextlib.suppress(RuntimeError):  # the loop ended meanwhile (max_seconds)
                loop.call_soon_threadsafe(stopped.set)
        if self._thread is not None:
            self._thread.join(10)
            assert not self._thread.is_alive(), "the proxy's thread did not stop"

    def __enter__(self) -> RoundRobinProxy:
        return self.start()

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.stop()

    async def _serve(self, ready: threading.Event) -> None:
        self._loop, self._stopped = asyncio.get_running_loop(), asyncio.Event()
        tasks: set[asyncio.Task[None]] = set()

        async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            task = asyncio.current_task()
            assert task is not None
            tasks.add(task)  # so stop() can cancel it
            task.add_done_callback(tasks.discard)
            # cancelled by stop(): end quietly (asyncio logs a connection task that ends cancelled)
            with contextlib.suppress(asyncio.CancelledError):
                await self._connection(reader, writer)

        server = await asyncio.start_server(handle, LOOPBACK, self.port)
        self.port = server.sockets[0].getsockname()[1]
        ready.set()
        try:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stopped.wait(), self.max_seconds)
        finally:
            server.close()
            for task in list(tasks):
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            await server.wait_closed()

    async def _connection(self, client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        client_port = int(client_w.get_extra_info("peername")[1])
        route = Route(client_port, None)
        with self._lock:
            self.routes.append(route)
        if self._open >= self.max_connections:
            client_w.close()
            return
        self._open += 1
        try:
            upstream = await self._connect(route)
            if upstream is None:
                return
            backend_r, backend_w = upstream
            try:
                await _pipe_both_ways(client_r, client_w, backend_r, backend_w)
            finally:
                backend_w.close()
        finally:
            self._open -= 1
            client_w.close()

    async def _connect(self, route: Route) -> tuple[asyncio.StreamReader, asyncio.StreamWriter] | None:
        """A connection to the next backend that takes one (each is tried once); ``None`` if none does."""
        for _ in range(len(self.backends)):
            index = self._next % len(self.backends)
            self._next += 1
            try:
                upstream = await asyncio.wait_for(
                    asyncio.open_connection(LOOPBACK, self.backends[index]), CONNECT_SECONDS
                )
            except (OSError, TimeoutError):
                with self._lock:
                    self.refused += 1
                continue
            with self._lock:
                route.backend = index
            return upstream
        return None


async def _pipe_both_ways(
    client_r: asyncio.StreamReader,
    client_w: asyncio.StreamWriter,
    backend_r: asyncio.StreamReader,
    backend_w: asyncio.StreamWriter,
) -> None:
    """Copy both ways until the backend's side ends (or either side fails)."""

    async def copy(source: asyncio.StreamReader, sink: asyncio.StreamWriter, half_close: bool) -> None:
        while chunk := await source.read(CHUNK):
            sink.write(chunk)
            await sink.drain()
        if half_close and sink.can_write_eof():
            sink.write_eof()  # the client sent all it will send: the backend may still answer
            await asyncio.Future()  # wait here: the answer ends the connection

    upward = asyncio.create_task(copy(client_r, backend_w, half_close=True))
    downward = asyncio.create_task(copy(backend_r, client_w, half_close=False))
    try:
        await asyncio.wait({upward, downward}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in (upward, downward):
            task.cancel()
        await asyncio.gather(upward, downward, return_exceptions=True)
