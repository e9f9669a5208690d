"""The MCP sessions of one run: opened once, called from any task, each closed by the task that opened it.

An MCP client session is a stack of anyio task groups, which must be exited by the task that entered
them. LangGraph runs each node in a task of its own and the run's driver closes the run from yet
another, so a dedicated "holder" task per service enters its session, waits for ``close()`` and
exits the session itself. Calls only send and receive on the session's streams, which any task of
the loop may do.

One holder per service, not one for all: a transport that fails mid-run (an HTTP server that went
away) cancels the task holding its session, and with a single holder that took every other
service's session down with it.
"""

from __future__ import annotations

import asyncio
import io
import json
import logging
import sys
import time
from collections.abc import Mapping
from contextlib import AsyncExitStack
from dataclasses import dataclass
from typing import Any, cast

import anyio
import httpx
from langchain_mcp_adapters.client import MultiServerMCPClient
from langchain_mcp_adapters.sessions import Connection
from mcp import ClientSession, McpError
from mcp.client import stdio
from mcp.types import CONNECTION_CLOSED, CallToolResult, EmbeddedResource, TextContent, TextResourceContents

from phasegraph.tools.mcp.tether import tethered
from phasegraph.tools.runner import ToolResult

logger = logging.getLogger(__name__)


class _ServiceLost(Exception):
    """The service's session ended while a call was waiting for its answer."""


@dataclass(frozen=True)
class ToolSpec:
    """One tool a service offers, as the model is shown it."""

    name: str
    description: str
    input_schema: dict[str, Any]  # the MCP tool's JSON schema for its arguments


class McpServices:
    """Open sessions to the configured services; one that cannot be reached is listed in ``unavailable``.

    A service is either in ``catalogue()`` or in ``unavailable`` (with a one-line reason); one whose
    connection is lost mid-run moves from the first to the second.
    """

    def __init__(self) -> None:
        self.unavailable: dict[str, str] = {}
        self._sessions: dict[str, ClientSession] = {}
        self._catalogue: dict[str, dict[str, ToolSpec]] = {}
        self._holders: dict[str, asyncio.Task[None]] = {}
        self._opened: dict[str, asyncio.Event] = {}  # set once the service is open or has failed to
        self._stop = asyncio.Event()

    @classmethod
    async def open(cls, connections: Mapping[str, Connection], *, timeout: float = 20) -> McpServices:
        """Connect to every service at once and list its tools; each may take up to ``timeout`` seconds."""
        services = cls()
        give_stdio_servers_a_real_stderr()
        # a stdio service dies with this process: killed, it must not finish calls a resume makes again
        # tethered() looks commands up on disk: in a thread (langgraph dev refuses blocking calls there)
        tied = await asyncio.to_thread(lambda: {n: tethered(c) for n, c in connections.items()})
        client = MultiServerMCPClient({n: cast(Connection, c) for n, c in tied.items()})
        for name in client.connections:
            services._opened[name] = asyncio.Event()
            holder = services._hold(client, name, timeout)
            services._holders[name] = asyncio.create_task(holder, name=f"mcp-service-{name}")
        try:
            await asyncio.gather(*(opened.wait() for opened in services._opened.values()))
        except BaseException:  # cancelled while opening: nothing may outlive the run
            await services.close()
            raise
        return services

    def catalogue(self) -> dict[str, dict[str, ToolSpec]]:
        """The tools of every open service: ``{service: {tool: ToolSpec}}``."""
        return {
            service: dict(tools) for service, tools in self._catalogue.items() if service in self._sessions
        }

    async def call(self, service: str, tool: str, args: dict[str, Any], *, timeout: float) -> ToolResult:
        """Call ``tool`` on ``service``; every failure (a timeout, a lost service) becomes an error result."""
        started = time.perf_counter()
        error = self._problem(service, tool, args)
        if error is None:
            try:
                result = await self._call(service, tool, args, timeout)
            except TimeoutError:
                error = f"{service}.{tool} gave no answer within {timeout:g} s"
            except _ServiceLost as exc:
                error = f"service {service!r} is no longer connected: {exc}"
            except (anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream):
                error = f"service {service!r} is no longer connected"
            except Exception as exc:  # a transport may raise anything; the model must still read it
                error = f"{service}.{tool} failed: {describe(exc)}"
            else:
                text = _text(result)
                if not result.isError:
                    return ToolResult(status="ok", output=text, duration_ms=_ms(started))
                error = text or f"{service}.{tool} reported an error"
        return ToolResult(status="error", error=error, duration_ms=_ms(started))

    async def close(self) -> None:
        """Close every session, from whichever task calls this, and wait until they are closed."""
        self._sessions.clear()  # new calls are refused from now on
        self._stop.set()
        for name, holder in self._holders.items():
            if not self._opened[name].is_set():
                holder.cancel()  # still opening: do not wait for a slow service
        if self._holders:
            await asyncio.wait(self._holders.values())  # not gather: a holder's cancellation is not ours

    def _problem(self, service: str, tool: str, args: Any) -> str | None:
        if service in self.unavailable:
            return f"service {service!r} is unavailable: {self.unavailable[service]}"
        if service not in self._sessions:
            known = ", ".join(sorted(self._sessions)) or "none (closed)"
            return f"unknown service {service!r}; open services: {known}"
        if tool not in self._catalogue[service]:
            return (
                f"service {service!r} has no tool {tool!r}; its tools: {', '.join(self._catalogue[service])}"
            )
        if not isinstance(args, dict):
            return f"arguments for {service}.{tool} must be a JSON object, got {type(args).__name__}"
        return None

    async def _call(self, service: str, tool: str, args: dict[str, Any], timeout: float) -> CallToolResult:
        """The call's result, raced against its service's holder: a lost session fails it at once.

        A session torn down by a transport error never answers its pending requests, so waiting on
        the call alone would last until the timeout.
        """
        holder = self._holders[service]
        call = asyncio.ensure_future(self._sessions[service].call_tool(tool, args))
        try:
            await asyncio.wait({call, holder}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
        finally:
            if not call.done():
                call.cancel()
                await asyncio.wait({call})
        if call.cancelled():
            if holder.done():
                raise _ServiceLost(self.unavailable.get(service, "the services were closed"))
            raise TimeoutError
        return call.result()

    async def _hold(self, client: MultiServerMCPClient, name: str, timeout: float) -> None:
        """The holder task of one service: open its session, wait for ``close()``, close it right here."""
        try:
            async with AsyncExitStack() as stack:
                async with asyncio.timeout(timeout):
                    session = await stack.enter_async_context(client.session(name))
                    self._catalogue[name] = await _list_tools(session)
                self._sessions[name] = session
                self._opened[name].set()
                await self._stop.wait()
        except Exception as exc:  # any transport failure makes the service unavailable, never fails the run
            self._record_failure(name, exc, timeout)
        finally:
            self._sessions.pop(name, None)
            self._opened[name].set()

    def _record_failure(self, name: str, exc: Exception, timeout: float) -> None:
        if self._stop.is_set():
            logger.warning("closing MCP service %r failed: %s", name, describe(exc))
        elif not self._opened[name].is_set():
            self.unavailable[name] = (
                f"no answer within {timeout:g} s" if isinstance(exc, TimeoutError) else describe(exc)
            )
        else:
            self.unavailable[name] = f"connection lost: {describe(exc)}"


async def _list_tools(session: ClientSession) -> dict[str, ToolSpec]:
    tools: dict[str, ToolSpec] = {}
    cursor: str | None = None
    while True:
        listed = await session.list_tools(cursor) if cursor else await session.list_tools()
        for tool in listed.tools:
            tools[tool.name] = ToolSpec(tool.name, tool.description or "", dict(tool.inputSchema))
        cursor = listed.nextCursor
        if not cursor:
            return tools


def describe(exc: BaseException | None) -> str:
    """One line saying what went wrong, without a traceback (the first error of a group)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    if isinstance(exc, McpError) and exc.error.code == CONNECTION_CLOSED:
        return "the server closed the connection (did it exit? its stderr may say why)"
    if isinstance(exc, McpError):
        return exc.error.message
    if isinstance(exc, FileNotFoundError):
        return f"command not found: {exc.filename}" if exc.filename else "command not found"
    if isinstance(exc, OSError) and exc.strerror:
        return f"{exc.strerror}: {exc.filename}" if exc.filename else exc.strerror
    if isinstance(exc, httpx.TransportError):
        return f"cannot connect ({str(exc) or type(exc).__name__})"
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__


def _text(result: CallToolResult) -> str:
    parts: list[str] = []
    for item in result.content:
        if isinstance(item, TextContent):
            parts.append(item.text)
        elif isinstance(item, EmbeddedResource) and isinstance(item.resource, TextResourceContents):
            parts.append(item.resource.text)
        else:
            parts.append(f"[{item.type} content omitted]")
    if not parts and result.structuredContent is not None:
        parts.append(json.dumps(result.structuredContent, ensure_ascii=False))
    return "\n".join(parts)


def _ms(started: float) -> float:
    return round((time.perf_counter() - started) * 1000, 3)


def give_stdio_servers_a_real_stderr() -> None:
    """Let stdio servers start where ``sys.stderr`` is no file (a Jupyter kernel under a runner, say).

    MCP's stdio client hands a server the ``sys.stderr`` of the moment it was imported, and the
    adapter offers no way to pass another; one without a file descriptor cannot be given to a
    subprocess, and every stdio service would be unavailable. The process's own stderr then takes
    its place.
    """
    client = getattr(stdio.stdio_client, "__wrapped__", stdio.stdio_client)  # under @asynccontextmanager
    defaults = client.__defaults__ or ()
    try:
        if defaults:
            defaults[0].fileno()
    except (AttributeError, OSError, io.UnsupportedOperation):
        client.__defaults__ = (sys.__stderr__,)
