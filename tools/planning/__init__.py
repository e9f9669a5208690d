"""The project domain the planner plans over, with its plans and its usage and error ledgers.

The planner's tools (``planning_tools``, ``planning_registry``, ``is_destructive``) are built when first
asked for: making them builds a pydantic model per tool, which a server that only stores usage rows or
serves the planner's routes does not need at start-up.
"""

from typing import TYPE_CHECKING

from phasegraph.tools.lazy import lazy_names
from phasegraph.tools.planning.domain import BUILTIN_TEMPLATES, ProjectDomain, slug
from phasegraph.tools.planning.errors import PlanningError, PlanNotFound
from phasegraph.tools.planning.ledger import ErrorReport, LedgerFilter, UsageLedger, UsageReport
from phasegraph.tools.planning.plans import PlanStore
from phasegraph.tools.planning.records import (
    ContextDocument,
    ErrorRow,
    PlanRecord,
    Project,
    Task,
    Template,
    UsageRow,
)
from phasegraph.tools.planning.store import PlanningStore, open_planning

if TYPE_CHECKING:
    from phasegraph.tools.planning.tools import is_destructive, planning_registry, planning_tools

__all__ = [
    "BUILTIN_TEMPLATES",
    "ContextDocument",
    "ErrorReport",
    "ErrorRow",
    "LedgerFilter",
    "PlanNotFound",
    "PlanRecord",
    "PlanStore",
    "PlanningError",
    "PlanningStore",
    "Project",
    "ProjectDomain",
    "Task",
    "Template",
    "UsageLedger",
    "UsageReport",
    "UsageRow",
    "is_destructive",
    "open_planning",
    "planning_registry",
    "planning_tools",
    "slug",
]


__getattr__ = lazy_names(
    __name__,
    dict.fromkeys(
        ("is_destructive", "planning_registry", "planning_tools"), "phasegraph.tools.planning.tools"
    ),
)
