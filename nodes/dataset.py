"""Training data: one JSON line per iteration of a run, one file per run, and their export.

A line holds the ``state`` (the conversation before the model call), the ``action`` (what the
model wrote) and the ``observation`` (what the system answered), with ids and timings, so each
iteration is one (S, A, O) example. Configured secrets are masked before a line is written.
"""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from collections.abc import Iterator, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from langchain_core.messages import BaseMessage

from phasegraph.nodes.redact import redactor


def message_dicts(messages: Sequence[BaseMessage]) -> list[dict[str, str]]:
    """Messages as ``{role, content}`` (the shape chat fine-tuning data uses)."""
    roles = {"human": "user", "ai": "assistant", "system": "system", "tool": "tool"}
    return [{"role": roles.get(m.type, m.type), "content": m.text} for m in messages]


def run_file(folder: str | Path, protocol: str, request_id: str) -> Path:
    """Where a run's lines go."""
    return Path(folder) / protocol / f"{request_id}.jsonl"


async def append_line(folder: str, protocol: str, request_id: str, record: dict[str, Any]) -> None:
    """Append one iteration to the run's file (nothing when ``folder`` is empty); off the event loop."""
    if not folder:
        return
    line = json.dumps(redactor().data(record), ensure_ascii=False)
    await asyncio.to_thread(_append, run_file(folder, protocol, request_id), line)


def _append(path: Path, line: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", encoding="utf-8") as file:
        file.write(line + "\n")


def read_lines(
    folder: str | Path, since: datetime | None = None, protocol: str | None = None
) -> Iterator[dict[str, Any]]:
    """Every line under ``folder`` (of ``protocol``, at or after ``since``), file by file, in order."""
    root = Path(folder)
    files = sorted(root.glob(f"{protocol or '*'}/*.jsonl")) if root.is_dir() else []
    for file in files:
        for text in file.read_text(encoding="utf-8").splitlines():
            if not text.strip():
                continue
            line = json.loads(text)
            if since is None or datetime.fromisoformat(line["ts"]) >= since:
                yield line


def export(
    folder: str | Path, out: Path, since: datetime | None = None, protocol: str | None = None
) -> Counter[str]:
    """Gather the lines into one JSONL file; the count per protocol."""
    counts: Counter[str] = Counter()
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("w", encoding="utf-8") as file:
        for line in read_lines(folder, since, protocol):
            file.write(json.dumps(line, ensure_ascii=False) + "\n")
            counts[line.get("protocol", "?")] += 1
    return counts
