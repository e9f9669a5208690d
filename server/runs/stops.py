"""The stops a run asked for: ``interrupt_before`` / ``interrupt_after`` its nodes (breakpoints).

A LangGraph API run names them as the API does, a native chat run as ``interruptBefore`` /
``interruptAfter`` (the page's Debug tab sets them).

They are kept on the request (``options``), so whichever replica drives the run stops it at the
same nodes. The graph stops there as it does at the protocol's own pause points; the driver then
ends the segment as ``paused`` (reason ``interrupt``), and a later run on the thread goes on.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from langgraph.graph.state import CompiledStateGraph
from langgraph.types import StateSnapshot

from phasegraph.graphs.registry import ProtocolSpec
from phasegraph.nodes.errors import InvalidInputError

#: Every node ("*" in the LangGraph API).
ALL = "*"


def checked_stops(spec: ProtocolSpec, field: str, value: Any) -> Any:
    """Stop nodes as given (``"*"``, a list or None), refused (422) when one is not a node of the protocol."""
    if value is None or value == ALL:
        return value
    known = spec.node_names()
    unknown = [node for node in value if node not in known]
    if unknown:
        raise InvalidInputError(
            f"{field}: {unknown[0]!r} is not a node of {spec.id!r} ({', '.join(sorted(known))})"
        )
    return list(value)


@dataclass(frozen=True)
class RunStops:
    """Nodes to stop before and after (``"*"``: every node), on top of the protocol's pause points."""

    before: tuple[str, ...] | str = ()
    after: tuple[str, ...] | str = ()
    pause_after: tuple[str, ...] = ()

    @classmethod
    def of(cls, options: dict[str, Any], pause_after: Sequence[str]) -> RunStops:
        """The stops a request's ``options`` name."""

        def nodes(value: Any) -> tuple[str, ...] | str:
            return ALL if value == ALL else tuple(value or ())

        return cls(nodes(options.get("interrupt_before")), nodes(options.get("interrupt_after")),
                   tuple(pause_after))  # fmt: skip

    def __bool__(self) -> bool:
        return bool(self.before or self.after)

    def interrupts(self) -> dict[str, Any]:
        """``astream`` arguments: the asked stops and the protocol's pause points ({}: the compiled ones)."""
        if not self:
            return {}
        after = ALL if self.after == ALL else [*self.pause_after, *self.after]
        return {"interrupt_before": self.before or None, "interrupt_after": after}

    async def reached(self, graph: CompiledStateGraph[Any, Any, Any, Any], snapshot: StateSnapshot) -> bool:
        """True when the graph stopped at ``snapshot`` for one of these stops, not only at a pause point."""
        if not snapshot.next:
            return False  # the run ended
        if self.before == ALL or set(self.before) & set(snapshot.next):
            return True
        if not self.after or snapshot.parent_config is None:
            return False
        ran = {task.name for task in (await graph.aget_state(snapshot.parent_config)).tasks}
        return self.after == ALL or bool(set(self.after) & ran)
