"""Helpers for building scripts and reading results. Nothing here reaches the network."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from opentelemetry.sdk.metrics.export import InMemoryMetricReader

from phasegraph.graphs.run import RunResult
from phasegraph.nodes.scripted import Script, ScriptedChatModel


def turn(content: str = "", *calls: tuple[str, dict[str, Any]]) -> dict[str, Any]:
    """One script turn: text plus tool calls given as (name, args)."""
    return {"content": content, "tool_calls": [{"name": n, "args": a} for n, a in calls]}


def scripted(*turns: dict[str, Any], **options: Any) -> ScriptedChatModel:
    """A scripted model instance (so a test can read its stats and prompts)."""
    return ScriptedChatModel(script=Script.model_validate({"turns": list(turns), **options}))


def write_script(directory: Path, *turns: dict[str, Any], **options: Any) -> str:
    """Write a script file and return its model spec."""
    path = directory / "script.json"
    path.write_text(json.dumps({"turns": list(turns), **options}), encoding="utf-8")
    return f"scripted:{path}"


def kinds(result: RunResult) -> list[str]:
    """Event types with consecutive text chunks folded into one ``text``."""
    folded: list[str] = []
    for event in result.events:
        if event.type == "text" and folded and folded[-1] == "text":
            continue
        folded.append(event.type)
    return folded


def of_type(result: RunResult, event_type: str) -> list[Any]:
    """All events of one type."""
    return [e for e in result.events if e.type == event_type]


def metric_points(reader: InMemoryMetricReader) -> dict[str, list[Any]]:
    """Every data point an in-memory metric reader holds now, by metric name."""
    data = reader.get_metrics_data()
    points: dict[str, list[Any]] = {}
    for resource in data.resource_metrics if data else ():
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                points.setdefault(metric.name, []).extend(metric.data.data_points)
    return points
