"""``GET /metrics``: phasegraph's metrics as Prometheus text, and the count of open event streams.

The metrics are the OpenTelemetry instruments of ``phasegraph.nodes.telemetry.metrics``, read at
each scrape from the Prometheus reader's registry; on a server of several workers, from the files
they all write (``phasegraph.nodes.telemetry.shared``), so whichever worker answers counts the whole
server. They add up every project's runs, so when the server has tokens only a token for every
project (``*``) reads them: a project's token would learn of the other projects' tools and runs.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, HTTPException, Request
from fastapi.responses import PlainTextResponse, Response
from opentelemetry.metrics import UpDownCounter
from starlette.datastructures import Headers
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from phasegraph.nodes import telemetry
from phasegraph.nodes.telemetry.metrics import instruments
from phasegraph.server.http.auth import Access, access_for

#: What a scraper reads (``text/plain`` in the schema; the answer names the exposition format's version).
_TEXT = {
    "description": "Every metric in the Prometheus text exposition format.",
    "content": {"text/plain": {"schema": {"type": "string"}}},
}
#: The refusals of a server with tokens, in JSON like every refusal (the route's own type is text).
_ERROR = {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorBody"}}}
_REFUSALS: dict[int | str, dict[str, Any]] = {
    401: {"description": "No bearer token, or an unknown one.", "content": _ERROR},
    403: {"description": "The token does not cover every project ('*').", "content": _ERROR},
}


def metrics_routes(tokens: dict[str, Access]) -> APIRouter:
    """``GET /metrics``; with tokens, for a token of every project only."""
    router = APIRouter()

    def every_project(request: Request) -> None:
        if access_for(request, tokens).projects is not None:
            raise HTTPException(403, "the metrics count every project's runs: they need a token for '*'")

    @router.get(
        "/metrics",
        response_class=PlainTextResponse,
        responses={200: _TEXT, **(_REFUSALS if tokens else {})},
        openapi_extra={"security": [{"bearer": []}]} if tokens else None,
        dependencies=[Depends(every_project)],
    )
    def metrics() -> Response:  # not async: a scrape reads every instrument, in a thread of its own
        """Every metric of this server in the Prometheus text format: a scraper's target."""
        from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

        instruments()  # made in this worker too: the shared files' buckets are written as its histograms say
        return Response(generate_latest(telemetry.prometheus_registry()), media_type=CONTENT_TYPE_LATEST)

    return router


class CountStreams:
    """ASGI middleware: ``phasegraph.streams.active`` goes up when an event stream's answer starts.

    It goes down when the answer ends however it ends (the stream's end, the client gone, a failure,
    the server stopping). Every streaming route answers ``text/event-stream`` (the native routes,
    the LangGraph Server API's, AG-UI's), so one place counts them all, by route (``http.route``).
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Pass the request on; count its answer while it streams events."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        # The counter counted on, kept: a test may install another meter provider meanwhile.
        opened: list[tuple[UpDownCounter, dict[str, str]]] = []

        async def counting(message: Message) -> None:
            if message["type"] == "http.response.start" and _is_stream(message):
                route = getattr(scope.get("route"), "path", None) or "unmatched"
                opened.append((instruments().streams, {"http.route": route}))
                opened[0][0].add(1, opened[0][1])
            await send(message)

        try:
            await self.app(scope, receive, counting)
        finally:
            for counter, attributes in opened:
                counter.add(-1, attributes)


def _is_stream(start: Message) -> bool:
    """True for the start of an answer in ``text/event-stream``."""
    kind = Headers(raw=list(start.get("headers", []))).get("content-type", "")
    return kind.split(";")[0].strip().lower() == "text/event-stream"
