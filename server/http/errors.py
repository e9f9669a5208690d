"""How every refusal reaches a client: one JSON shape, and the status each error kind maps to.

Our own errors (``PhasegraphError``) and FastAPI's and Starlette's refusals (401, 403, 405, an
unparseable body) answer ``{"error": <kind>, "message": ...}``; request validation keeps FastAPI's
``{"detail": [...]}``, ASCII-escaped so that input holding lone surrogates can be echoed.
"""

import json
from typing import Any

from fastapi import FastAPI, Request
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from starlette.exceptions import HTTPException
from starlette.routing import Match, compile_path

from phasegraph.nodes.errors import (
    ConfigurationError,
    ConflictError,
    InvalidInputError,
    NotFoundError,
    PhasegraphError,
    ScriptError,
    TooLargeError,
)
from phasegraph.server.http.networks import InvalidNetwork
from phasegraph.server.http.responses import http_kind
from phasegraph.server.http.streams import FALLBACK_ROUTE, TwoStageDisabled
from phasegraph.server.runs.engine import ServerStopping

_STATUS = {
    ConfigurationError: 400,
    ScriptError: 400,
    NotFoundError: 404,
    ConflictError: 409,
    TooLargeError: 413,
    InvalidInputError: 422,
    ServerStopping: 503,
}


def install_error_handlers(app: FastAPI) -> None:
    """Answer every refusal of ``app`` in the one JSON shape."""
    app.add_exception_handler(PhasegraphError, _phasegraph_error)  # type: ignore[arg-type]
    app.add_exception_handler(HTTPException, _http_error)  # type: ignore[arg-type]
    app.add_exception_handler(RequestValidationError, _invalid)  # type: ignore[arg-type]


async def _phasegraph_error(request: Request, exc: PhasegraphError) -> JSONResponse:
    status = next((code for kind, code in _STATUS.items() if isinstance(exc, kind)), 500)
    body: dict[str, Any] = {"error": exc.kind, "message": str(exc)}
    if isinstance(exc, TwoStageDisabled):
        body["fallback"] = FALLBACK_ROUTE  # the one switch: clients move to this route
    if isinstance(exc, InvalidNetwork):
        body["problems"] = exc.problems
    return JSONResponse(body, status_code=status)


async def _http_error(request: Request, exc: HTTPException) -> JSONResponse:
    """FastAPI's and Starlette's own refusals (401, 403, 405, unparseable body, ...) in the same shape."""
    body = {"error": http_kind(exc.status_code), "message": str(exc.detail)}
    headers = exc.headers
    if exc.status_code == 405:  # Starlette names the first route of the path only; a path may have several
        headers = {**(headers or {}), "Allow": ", ".join(_methods(request))}
    return JSONResponse(body, status_code=exc.status_code, headers=headers)


async def _invalid(request: Request, exc: RequestValidationError) -> Response:
    """The errors echo the input, which may hold lone surrogates: ASCII-escaped JSON carries them."""
    body = json.dumps({"detail": jsonable_encoder(exc.errors())}, ensure_ascii=True)
    return Response(body, status_code=422, media_type="application/json")


#: The methods a 405's ``Allow`` header may name.
METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS")


def _methods(request: Request) -> list[str]:
    """The methods the schema documents for the path the request addressed.

    Of the documented path templates that match, the most specific one (fewest parameters) is the
    resource: ``/threads/search`` is that path (POST), not ``/threads/{thread_id}`` (GET, DELETE). A
    path the schema leaves out (the page's own routes) gets the methods some route answers there.
    """
    path = request.url.path
    paths: dict[str, dict[str, Any]] = request.app.openapi()["paths"]
    matching = [template for template in paths if compile_path(template)[0].match(path)]
    if matching:
        template = min(matching, key=lambda template: template.count("{"))
        return sorted(method.upper() for method in paths[template] if method.upper() in METHODS)
    return [
        method
        for method in METHODS
        if any(
            route.matches({**request.scope, "method": method})[0] == Match.FULL
            for route in request.app.routes
        )
    ]
