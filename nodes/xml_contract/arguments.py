"""A call's arguments: as text, as JSON or as child elements, checked against the tool's input schema.

``$result_of_step_N`` placeholders are allowed only in ``<sequential>`` blocks and only for an
earlier step; they are replaced when the step runs, so their fields are checked then.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from xml.etree.ElementTree import Element

from jsonschema import Draft202012Validator

PLACEHOLDER = re.compile(r"\$result_of_step_(\d+)")
#: Most schema problems listed for one call.
MAX_PROBLEMS = 4


@dataclass
class ToolSchemas:
    """What the services offer: each tool's input schema, and the services that are down."""

    services: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)
    unavailable: dict[str, str] = field(default_factory=dict)


def read_arguments(
    schemas: ToolSchemas, service: str, tool: Element, index: int, kind: str
) -> tuple[dict[str, Any], list[str]]:
    """The call's arguments and its problems (unknown tool, unreadable or invalid arguments, placeholders)."""
    offered = schemas.services.get(service, {})
    if tool.tag not in offered:
        return {}, [f"unknown tool (tools of {service}: {', '.join(sorted(offered)) or 'none'})"]
    schema = offered[tool.tag]
    args, problem = _raw_arguments(tool, schema)
    if problem:
        return {}, [problem]
    args = {key: _coerce(value, schema.get("properties", {}).get(key, {})) for key, value in args.items()}
    problems = _placeholder_problems(args, index, kind)
    return args, problems or _schema_problems(args, schema)


def _raw_arguments(tool: Element, schema: Mapping[str, Any]) -> tuple[dict[str, Any], str | None]:
    if len(tool):
        return {child.tag: (child.text or "").strip() for child in tool}, None
    text = (tool.text or "").strip()
    if not text:
        return {}, None
    if text.startswith("{"):
        try:
            value = json.loads(text)
        except json.JSONDecodeError as exc:
            return {}, f"the arguments are not valid JSON ({exc.msg})"
        return (value, None) if isinstance(value, dict) else ({}, "JSON arguments must be an object")
    properties, required = list(schema.get("properties", {})), list(schema.get("required", []))
    target = required if len(required) == 1 else properties if len(properties) == 1 else []
    if len(target) != 1:
        return {}, f"give the arguments as elements or JSON: it takes {', '.join(properties) or 'none'}"
    return {target[0]: text}, None


def _coerce(value: Any, spec: Mapping[str, Any]) -> Any:
    """Text from XML read as the type the schema asks for ("500" for an integer is 500)."""
    if not isinstance(value, str) or PLACEHOLDER.search(value):
        return value
    kind = spec.get("type")
    try:
        if kind == "integer":
            return int(value)
        if kind == "number":
            return float(value)
    except ValueError:
        return value
    if kind == "boolean" and value.lower() in ("true", "false"):
        return value.lower() == "true"
    if kind in ("object", "array"):
        try:
            return json.loads(value)
        except json.JSONDecodeError:
            return value
    return value


def _placeholder_problems(args: Mapping[str, Any], index: int, kind: str) -> list[str]:
    problems = []
    for key, value in args.items():
        for match in PLACEHOLDER.finditer(json.dumps(value)):
            step = int(match.group(1))
            if kind != "sequential":
                problems.append(f"{match.group(0)} in {key}: placeholders are for <sequential> blocks only")
            elif step < 1:
                problems.append(f"{match.group(0)} in {key}: steps count from 1")
            elif step >= index:
                problems.append(
                    f"{match.group(0)} in {key} points forward: step {index} can use steps 1 to {index - 1}"
                )
    return problems


def _schema_problems(args: Mapping[str, Any], schema: Mapping[str, Any]) -> list[str]:
    later = {k for k, v in args.items() if PLACEHOLDER.search(json.dumps(v))}  # checked once replaced
    checked = {k: v for k, v in args.items() if k not in later}
    problems = [
        f"{'.'.join(str(p) for p in error.path) or 'arguments'}: {error.message}"
        for error in Draft202012Validator(schema).iter_errors(checked)
        if not (error.validator == "required" and any(f"'{k}'" in error.message for k in later))
    ]
    return problems[:MAX_PROBLEMS]
