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
    call_id: str = ""  # the call being run, as the model named it (set for each call)

    @property
    def idempotency_key(self) -> str:
        """The same for every run of one call, different for every other call: ``project/request/call``.

        A call whose server died before its result was saved runs again, under the same key (the
        model's call and its id are in the checkpoint it re-runs from): a tool with effects elsewhere
        passes this key on (an ``Idempotency-Key`` header, a unique column) so the second run changes
        nothing. Empty when the run has no request id or the call no id (an in-process run).
        """
        if not (self.request_id and self.call_id):
            return ""
        return f"{self.project_id}/{self.request_id}/{self.call_id}"
