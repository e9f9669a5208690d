"""What a bench run leaves: the markdown table, ``latest.json`` and the chart."""

from __future__ import annotations

import json
import os
import platform
import subprocess
from datetime import UTC, datetime
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

from bench.harness import Row

PACKAGES = ("langgraph", "langchain", "langchain-core", "pydantic", "fastapi", "uvicorn", "langgraph-cli")


def markdown(rows: list[Row]) -> str:
    """One table: each row's sides, the headline figure, its ratio to the anchor, the other figures."""
    lines = ["| row | side | headline | x anchor | other figures |", "|---|---|---|---|---|"]
    for row in rows:
        if row.note and not row.sides:
            lines.append(f"| {row.key} {row.title} | — | {row.note} | | |")
            continue
        for side in row.sides:
            headline = side.figures.get(row.headline)
            ratio = row.ratio(side)
            shown = "anchor" if side.name == row.anchor else (f"{ratio:.2f}x" if ratio is not None else "—")
            others = "; ".join(f"{k}: {f.text()}" for k, f in side.figures.items() if k != row.headline)
            head = f"{row.headline}: {headline.text()}" if headline is not None else "—"
            lines.append(f"| {row.key} {row.title} | {side.name} | {head} | {shown} | {others} |")
        if row.note:
            lines.append(f"| {row.key} {row.title} | note | {row.note} | | |")
    return "\n".join(lines)


def workloads(rows: list[Row]) -> str:
    """What each row ran, once per row."""
    seen: dict[str, str] = {}
    for row in rows:
        if row.workload and row.workload not in seen.values():
            seen[f"{row.key} {row.title}"] = row.workload
    return "\n".join(f"- **{name}**: {text}" for name, text in seen.items())


def machine() -> dict[str, Any]:
    """Where and with what the figures were measured."""
    versions: dict[str, str] = {}
    for package in PACKAGES:
        try:
            versions[package] = version(package)
        except PackageNotFoundError:  # langgraph-cli lives in .venv-studio, not here
            versions[package] = ""
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=False
    )
    return {
        "measured_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "processor": platform.processor() or platform.machine(),
        "cpus": _cpus(),
        "commit": commit.stdout.strip() or None,
        "versions": versions,
    }


def write_json(rows: list[Row], path: Path, quick: bool, seconds: float) -> None:
    """Every figure of every side, the ratios, the machine and the versions."""
    data = {
        "quick": quick,
        "seconds": round(seconds, 1),
        "machine": machine(),
        "rows": [r.to_dict() for r in rows],
    }
    path.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")


def _cpus() -> int | None:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
