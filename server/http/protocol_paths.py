"""One documented path per protocol for the routes whose body depends on the protocol in their path.

``/api/runs/{protocol}/stream`` takes the protocol's client settings (``settings``) and
``/ag-ui/{protocol}`` the same as ``forwardedProps``; a setting of another protocol is refused. One
template with a protocol parameter can only document the settings of every protocol together, so
its schema called requests valid that the server refuses. Each protocol's path documents exactly
the settings that protocol takes (the shared body stays in the components, as what they copy);
the routes themselves stay one template each (an unknown protocol is 404, as for any path the
schema does not list).
"""

from __future__ import annotations

import copy
from typing import Any

from phasegraph.graphs.registry import PROTOCOLS, ProtocolSpec

#: Route template -> (its body's schema name, the body field holding the protocol's settings).
BY_PROTOCOL = {
    "/api/runs/{protocol}/stream": ("RunRequest", "settings"),
    "/ag-ui/{protocol}": ("AgUiInput", "forwardedProps"),
}
#: Chat routes that run one protocol each: their breakpoints name that protocol's nodes.
CHAT_ROUTES = {"/api/chat/messages": "unified", "/api/chat/messages_two_stage": "triggered_phase"}
#: Body fields naming nodes of the protocol (breakpoints).
STOPS = ("interruptBefore", "interruptAfter")


def document_by_protocol(schema: dict[str, Any]) -> None:
    """Replace each template of :data:`BY_PROTOCOL` with one path per protocol, each with its own body."""
    paths, bodies = schema["paths"], schema["components"]["schemas"]
    for template, (body_name, field) in BY_PROTOCOL.items():
        operations = paths.pop(template)
        for spec in PROTOCOLS.values():
            name = f"{body_name}_{spec.id}"
            bodies[name] = _body_of(bodies[body_name], field, spec)
            paths[template.replace("{protocol}", spec.id)] = _operations_of(operations, spec.id, name)
    for path, protocol in CHAT_ROUTES.items():
        name = f"ChatRequest_{protocol}"
        bodies[name] = _with_stops(copy.deepcopy(bodies["ChatRequest"]), PROTOCOLS[protocol])
        bodies[name]["title"] = f"ChatRequest ({protocol})"
        for operation in paths[path].values():
            operation["requestBody"]["content"]["application/json"]["schema"] = {
                "$ref": f"#/components/schemas/{name}"
            }


def _with_stops(body: dict[str, Any], spec: ProtocolSpec) -> dict[str, Any]:
    """The body with its breakpoint fields limited to ``spec``'s nodes (any other is refused)."""
    for field in STOPS:
        if field in body["properties"]:
            listed = next(part for part in body["properties"][field]["anyOf"] if part.get("type") == "array")
            listed["items"] = {"type": "string", "enum": list(spec.node_names())}
    return body


def _body_of(body: dict[str, Any], field: str, spec: ProtocolSpec) -> dict[str, Any]:
    """The body schema with only ``spec``'s settings in ``field`` (which stays nullable if it was)."""
    own = copy.deepcopy(body)
    nullable = {"type": "null"} in own["properties"][field].get("anyOf", [])
    schema = spec.client_settings_schema()
    settable = ", ".join(schema["properties"]) or "none"
    own["properties"][field] = {
        **({"anyOf": [schema, {"type": "null"}]} if nullable else schema),
        "description": f"The settings {spec.id} lets clients choose ({settable}); any other is refused.",
    }
    own["title"] = f"{own.get('title', '')} ({spec.id})".strip()
    return _with_stops(own, spec)


def _operations_of(operations: dict[str, Any], protocol: str, body_name: str) -> dict[str, Any]:
    """The template's operations for one protocol: no protocol parameter, the protocol's own body."""
    own = copy.deepcopy(operations)
    for operation in own.values():
        operation["operationId"] = f"{operation['operationId']}_{protocol}"
        operation["parameters"] = [p for p in operation.get("parameters", []) if p["name"] != "protocol"]
        operation["requestBody"]["content"]["application/json"]["schema"] = {
            "$ref": f"#/components/schemas/{body_name}"
        }
    return own
