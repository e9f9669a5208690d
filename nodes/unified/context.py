"""Run configuration of the unified loop: its per-turn budgets."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from phasegraph.nodes.context import RunContext
from phasegraph.nodes.errors import ConfigurationError
from phasegraph.nodes.unified.prompts import BUDGET_NOTICE


@dataclass(kw_only=True)
class UnifiedContext(RunContext):
    """The plain tool loop (``create_agent``) and its budgets, counted per user turn."""

    PROTOCOL: ClassVar[str] = "unified"

    max_model_calls: int = field(
        default=10,
        metadata={
            "description": "Model calls that may use tools in one user turn; one more call then answers "
            "with tools unbound."
        },
    )
    max_tool_calls: int = field(
        default=8,
        metadata={
            "description": "Tool calls run in one user turn; later calls are refused and the model "
            "answers with tools unbound."
        },
    )
    budget_notice: str = field(
        default=BUDGET_NOTICE,
        metadata={"description": "Added to the system prompt of the answer a spent budget forces."},
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.max_model_calls < 1:
            raise ConfigurationError("max_model_calls must be at least 1")
        if self.max_tool_calls < 1:
            raise ConfigurationError("max_tool_calls must be at least 1")
