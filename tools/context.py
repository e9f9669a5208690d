"""What a tool may know about the run that calls it."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeAlias

if TYPE_CHECKING:
    from tools.resources.repository import ResourceRepository

    OptionalRepository: TypeAlias = ResourceRepository | None
else:
    # Pydantic resolves this dataclass's annotations when a tool's argument schema is built; importing
    # the repository here would be circular, so at run time the field is untyped.
    OptionalRepository: TypeAlias = Any


@dataclass(frozen=True)
class ToolContext:
    """What a tool may know about the run that calls it."""

    workspace: Path
    project_id: str
    request_id: str = ""
    resources: OptionalRepository = None  # the repository the resource tools read and change, if any
    planning: Any = None  # the project domain's store (tools.planning.PlanningStore), if any
    entity_id: str = ""  # the entity the conversation is about (a project id), if any
