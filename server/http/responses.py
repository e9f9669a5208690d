"""What the routes answer besides success, written down for ``/openapi.json``.

Every refusal but request validation has one JSON shape, :class:`ErrorBody`; validation failures keep
FastAPI's ``{"detail": [...]}``. Routes list the statuses they can produce with :func:`errors`, so the
schema says exactly which answers a client has to handle.
"""

from __future__ import annotations

import json
from http import HTTPStatus
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel
from starlette.datastructures import Headers
from starlette.types import ASGIApp, Receive, Scope, Send

from phasegraph.graphs.registry import client_settings_schema
from phasegraph.nodes.models import public_spec
from phasegraph.nodes.settings import ServerSettings
from phasegraph.server.http.protocol_paths import document_by_protocol

#: What ``str.strip()`` removes: the message check below must agree with the server's own test,
#: and an explicit class means the same in the schema's ECMA regex, pydantic's and Python's.
_BLANK = r"\u0009-\u000d\u001c-\u0020\u0085\u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000"
#: A message has something besides whitespace.
NOT_BLANK = f"^[{_BLANK}]*[^{_BLANK}]"


def whole(value: Any) -> Any:
    """A whole float as the integer it is (a BeforeValidator of strict integer fields)."""
    # JSON Schema counts 3.0 as an integer, so the strict body does too (but not "3" or true).
    return int(value) if isinstance(value, float) and value.is_integer() else value


class ErrorBody(BaseModel):
    """Body of every error answer except request validation (see :class:`ValidationFailure`)."""

    error: str = Field(
        description="What went wrong, for programs: not_found, conflict, too_large, configuration, ...",
        examples=["not_found"],
    )
    message: str = Field(description="What went wrong, for people.")
    fallback: str | None = Field(
        default=None,
        description="Only on the 404 of a disabled two-stage route: the route to use instead.",
        examples=["/api/chat/messages"],
    )
    problems: list[str] | None = Field(
        default=None, description="Only on a refused network: every rule it breaks, each a sentence."
    )


class ValidationIssue(BaseModel):
    """One problem pydantic found in the request."""

    loc: list[str | int] = Field(description="Where: body, path, header, then the field names.")
    msg: str
    type: str


class ValidationFailure(BaseModel):
    """Body of a 422 for a request that does not match this schema."""

    detail: list[ValidationIssue]


#: The kinds HTTP-level refusals (FastAPI's and Starlette's own) carry in ``ErrorBody.error``.
HTTP_KINDS = {401: "unauthorized", 403: "forbidden", 404: "not_found", 413: "too_large"}

_WHY = {
    400: "The body is not JSON, or names a model, script or setting this server cannot use.",
    401: "No bearer token, or an unknown one (only when the server has tokens).",
    403: "The token does not cover the project.",
    404: "The request, thread, checkpoint or protocol does not exist (or is not visible to the caller).",
    409: "The request is in a state that does not allow this (cancelled, running, finished, ...).",
    413: "The body or the message is larger than this server accepts.",
}


def http_kind(status: int) -> str:
    """The ``error`` kind of an HTTP-level refusal: ``bad_request``, ``method_not_allowed``, ..."""
    return HTTP_KINDS.get(status) or HTTPStatus(status).name.lower()


def errors(*statuses: int, invalid_input: str | None = None) -> dict[int | str, dict[str, Any]]:
    """OpenAPI ``responses`` for the error statuses a route can produce (422 is always included).

    Args:
        statuses: the statuses besides 422, each answered with an :class:`ErrorBody`.
        invalid_input: when the route also answers 422 with an :class:`ErrorBody` for a request that
            matches the schema but names something impossible, what that is.
    """
    responses: dict[int | str, dict[str, Any]] = {
        status: {"model": ErrorBody, "description": _WHY[status]} for status in statuses
    }
    if invalid_input is None:
        responses[422] = {
            "model": ValidationFailure,
            "description": "The request does not match this schema.",
        }
    else:
        responses[422] = {
            "model": ValidationFailure | ErrorBody,
            "description": f"The request does not match this schema ({{detail}}), or {invalid_input}.",
        }
    return responses


#: What a route that starts a run can refuse with (with tokens, every ``/api`` route adds 401).
STARTS = (400, 403, 404, 409, 413)


class _Wire(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True)


class RequestStatus(_Wire):
    """``GET /api/requests/{id}``: where a request stands."""

    request_id: str
    project_id: str
    protocol: str
    thread_id: str
    status: Literal["running", "paused", "cancelled", "completed", "failed", "superseded"] = Field(
        description="superseded: it was paused when a later request started on its thread (it is not resumed)"
    )
    last_seq: int = Field(description="seq of the request's last event")
    model: str = Field(description="the model spec, as clients see it")
    created_at: float = Field(description="Unix time")
    updated_at: float = Field(description="Unix time")


class ControlAnswer(_Wire):
    """Answer of pause and cancel."""

    request_id: str
    status: Literal["pausing", "cancelled"]


class ProtocolInfo(BaseModel):
    """One entry of ``GET /api/protocols``."""

    id: str
    seed: str
    summary: str
    route: str = Field(description="its streaming route")


def document_settings(schema: dict[str, Any], settings: ServerSettings) -> dict[str, Any]:
    """Write what this server's settings decide into its schema: tokens, models, message size and count.

    These depend on the process's environment, so the request models cannot carry them. Errors of
    streaming routes are JSON, not events (they are answered before any stream starts).
    """
    for operations in schema["paths"].values():
        for operation in operations.values():
            for status, response in operation["responses"].items():
                content = response.get("content", {})
                if not status.startswith("2") and "text/event-stream" in content:
                    content["application/json"] = content.pop("text/event-stream")
    bodies = schema["components"]["schemas"]
    names = sorted({public_spec(spec) for spec in settings.models()})
    for name, text in (
        ("ChatRequest", "message"),
        ("RunRequest", "message"),
        ("NetworkRunRequest", "user_message"),
        ("AgentStreamRequest", "message"),
    ):
        fields = bodies[name]["properties"]
        fields[text]["maxLength"] = settings.max_message_chars
        fields["model"]["anyOf"] = [{"type": "string", "enum": names}, {"type": "null"}]
        fields["model"]["description"] = "A model this server allows (the default when omitted)."
    # Every message a request carries is converted, checkpointed and sent to the model: a bounded count.
    bodies["AgUiInput"]["properties"]["messages"]["maxItems"] = settings.max_input_messages
    for name in ("RunBody", "ThreadRunBody"):
        run_input = bodies[name]["properties"]["input"]["anyOf"][0]
        run_input["properties"] = {"messages": {"maxItems": settings.max_input_messages}}
    described = bodies["RunRequest"]["properties"]["settings"]
    bodies["RunRequest"]["properties"]["settings"] = {
        **client_settings_schema(),
        "description": described["description"],
    }
    document_by_protocol(schema)  # after the shared bodies are complete: each protocol's path copies them
    if settings.api_tokens is not None:
        schema["components"]["securitySchemes"] = {"bearer": {"type": "http", "scheme": "bearer"}}
        body = {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorBody"}}}
        for path, operations in schema["paths"].items():
            if path.startswith(GUARDED) or path == "/run":
                for operation in operations.values():
                    operation["security"] = [{"bearer": []}]
                    operation["responses"]["401"] = {"description": _WHY[401], "content": body}
                    # Every /api route takes ?projectId=, which a token must cover.
                    operation["responses"]["403"] = {"description": _WHY[403], "content": body}
    return schema


#: Every id a client names (project, request, thread, run): letters, digits and ``._:-``.
ID_PATTERN = r"^[A-Za-z0-9._:-]{1,200}$"

#: Paths whose routes need a token when the server has tokens: phasegraph's own, the LangGraph
#: Server API's (its /ok and /info stay open, as on the reference server) and AG-UI's.
GUARDED = ("/api/", "/assistants", "/threads", "/runs", "/ag-ui/")


class DeclaredTooLarge:
    """Answer a body whose Content-Length is over the limit with a JSON 413 before anything reads it.

    Starlette's own limit answers such bodies in plain text, whatever the app's handlers say; this
    sits outside it, so the answer has the same :class:`ErrorBody` shape as every other refusal.
    """

    def __init__(self, app: ASGIApp, max_body_bytes: int) -> None:
        self.app, self.max_body_bytes = app, max_body_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Refuse a declared oversized body; pass everything else on."""
        if scope["type"] == "http":
            declared = Headers(scope=scope).get("content-length", "")
            if declared.isdigit() and int(declared) > self.max_body_bytes:
                await _send_json(send, 413, {"error": "too_large", "message": (
                    f"the body has {int(declared)} bytes; this server accepts at most {self.max_body_bytes}"
                )})  # fmt: skip
                return
        await self.app(scope, receive, send)


async def _send_json(send: Send, status: int, body: dict[str, Any]) -> None:
    payload = json.dumps(body).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(payload)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": payload})
