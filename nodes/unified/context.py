"""Run configuration of the unified loop."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from nodes.context import RunContext


@dataclass(kw_only=True)
class UnifiedContext(RunContext):
    """The plain tool loop (``create_agent``); its call limits are fixed when the graph is built."""

    PROTOCOL: ClassVar[str] = "unified"
