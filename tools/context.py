"""What a tool may know about the run that calls it."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeAlias

if TYPE_CHECKING:
    from phasegraph.tools.planning.store import PlanningStore
    from phasegraph.tools.resources.repository import ResourceRepository

    OptionalRepository: TypeAlias = ResourceRepository | None
    OptionalPlanning: TypeAlias = PlanningStore | None
else:
    # Pydantic resolves this dataclass's annotations when a tool's argument schema is built; importing
    # the repository or the planning store here would be circular, so at run time the fields are untyped.
    OptionalRepository: TypeAlias = Any
    OptionalPlanning: TypeAlias = Any


@dataclass(frozen=True)
class ToolContext:
    """What a tool may know about the run that calls it."""

    workspace: Path
    project_id: str
    request_id: str = ""
    resources: OptionalRepository = None  # the repository the resource tools read and change, if any
    planning: OptionalPlanning = (
        None  # the project domain's store (phasegraph.tools.planning.PlanningStore), if any
    )
    entity_id: str = ""  # the entity the conversation is about (a project id), if any
