"""What makes a drafted plan runnable: known tools, ordered dependencies, the project_create order."""

from __future__ import annotations

import re

from phasegraph.nodes.planner.guidance import ContextType
from phasegraph.nodes.planner.prompts import PROJECT_CREATE_RULE
from phasegraph.nodes.planner.schemas import PlanDraft
from phasegraph.tools import ToolRegistry
from phasegraph.tools.runner import argument_problem

#: ``${s2.project.id}``: the field ``project.id`` of step s2's JSON result.
REFERENCE = re.compile(r"\$\{(s[0-9]{1,3})((?:\.[A-Za-z0-9_]+)*)\}")
#: The project_create order: (tool, required) in the order they must appear.
PROJECT_CREATE_ORDER = (
    ("list_templates", True),
    ("create_template", False),
    ("create_project", True),
    ("publish_context_document", True),
)


def plan_problem(
    draft: PlanDraft, registry: ToolRegistry, context_type: ContextType, max_steps: int
) -> str | None:
    """Why the plan cannot run as drafted (the model reads it and corrects), or None."""
    if len(draft.steps) > max_steps:
        return f"the plan has {len(draft.steps)} steps; at most {max_steps} are allowed"
    seen: set[str] = set()
    for step in draft.steps:
        if step.id in seen:
            return f"step id {step.id} is used twice"
        tool = registry.get(step.tool)
        if tool is None:
            known = ", ".join(registry.names())
            return f"step {step.id} calls {step.tool!r}, which is not a tool; tools: {known}"
        later = [d for d in step.depends_on if d not in seen]
        if later:
            return f"step {step.id} depends on {later}, which are not earlier steps"
        referenced = {m.group(1) for m in REFERENCE.finditer(str(step.args))}
        if referenced - seen:
            return (
                f"step {step.id} uses the result of {sorted(referenced - seen)}, which are not earlier steps"
            )
        if not referenced and (problem := argument_problem(tool, step.args)) is not None:
            return f"step {step.id} ({step.tool}): {problem}"
        seen.add(step.id)
    return _order_problem(draft) if context_type == "project_create" else None


def _order_problem(draft: PlanDraft) -> str | None:
    """The project_create rule: template discovery, optional template, project, context document, in order."""
    tools = [step.tool for step in draft.steps]
    position = -1
    for tool, required in PROJECT_CREATE_ORDER:
        if tool not in tools:
            if required:
                return f"{PROJECT_CREATE_RULE} This plan has no {tool} step (its tools: {' → '.join(tools)})."
            continue
        at = tools.index(tool)
        if at < position:
            return f"{PROJECT_CREATE_RULE} This plan runs them out of order: {' → '.join(tools)}."
        position = at
    return None
