"""What a tool may know about the run that calls it."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class ToolContext:
    """What a tool may know about the run that calls it."""

    workspace: Path
    project_id: str
    request_id: str = ""
