"""Which planner calls wait for a person's approval, asked before a node emits or runs anything.

A call waits when its tool's policy says ``confirm`` (a project file's ``[tools]`` rule) or when the
tool is one of the domain's destructive ones (``archive_project``, ``delete_task``): those always
wait, whatever the project file says. The answer is explicit (``nodes.approval``): approve, approve
with edited arguments, or reject with a reason the model reads; a rejected call never runs, and the
same call made again waits for a new answer.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from phasegraph.nodes.approval import Verdict, ask, needs_approval
from phasegraph.nodes.context import RunContext
from phasegraph.nodes.emit import Emitter
from phasegraph.tools import ToolRegistry
from phasegraph.tools.planning import is_destructive

#: What the model reads above the result of a call a person edited before it ran.
EDITED = "A person edited this call's arguments before it ran; it ran with {args}.\n"


def waits_for_approval(registry: ToolRegistry, name: str) -> bool:
    """Whether calls of ``name`` wait for a person: its policy says confirm, or it is destructive."""
    found = registry.get(name)
    return found is not None and (needs_approval(registry, name) or is_destructive(found))


async def approve_planner_calls(
    context: RunContext,
    emitter: Emitter,
    registry: ToolRegistry,
    calls: Sequence[dict[str, Any]],
    meta: dict[str, Any] | None = None,
) -> dict[str, Verdict]:
    """The verdict on each call (by id) that waits, asked one after another before any of them runs.

    Call it at the start of a node: LangGraph runs a resumed node again from its start, so nothing
    before the questions may emit or run anything.
    """
    verdicts: dict[str, Verdict] = {}
    for call in calls:
        if waits_for_approval(registry, call["name"]):
            plain = {"id": call["id"], "name": call["name"], "args": call["args"]}
            verdicts[call["id"]] = await ask(context, emitter, registry, plain, meta)
    return verdicts
