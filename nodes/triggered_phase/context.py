"""Run configuration of the triggered-phase protocol: its limits and notices."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from phasegraph.nodes.context import RunContext
from phasegraph.nodes.errors import ConfigurationError
from phasegraph.nodes.triggered_phase.prompts import BUDGET_NOTICE, DUPLICATE_BUDGET_NOTICE


@dataclass(kw_only=True)
class TriggeredPhaseContext(RunContext):
    """Limits and notices of the triggered-phase protocol (seed 000)."""

    PROTOCOL: ClassVar[str] = "triggered_phase"
    #: Fixed by the protocol: a tool phase executes exactly one call.
    MAX_TOOLS_PER_TOOL_PHASE: ClassVar[int] = 1

    max_phase_cycles_per_turn: int = field(
        default=3, metadata={"description": "Tool executions allowed in one user turn."}
    )
    max_duplicate_attempts: int = field(
        default=3, metadata={"description": "Refused duplicate calls tolerated before the answer is forced."}
    )
    budget_notice: str = field(
        default=BUDGET_NOTICE, metadata={"description": "System message when the cycle budget is spent."}
    )
    duplicate_budget_notice: str = field(
        default=DUPLICATE_BUDGET_NOTICE,
        metadata={"description": "System message when too many duplicates forced the answer."},
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.max_phase_cycles_per_turn < 1:
            raise ConfigurationError("max_phase_cycles_per_turn must be at least 1")
        if self.max_duplicate_attempts < 0:
            raise ConfigurationError("max_duplicate_attempts must not be negative")
