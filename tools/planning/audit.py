"""A project's audit: its health by fixed rules, task counts, blockers and findings in plain words.

The audit is computed from rows ``ProjectDomain.audit_project`` has already read (the project,
its tasks, whether it has a context document), so the rules here need no database.
"""

from __future__ import annotations

from typing import Any

from phasegraph.tools.planning.records import Project, Task
from phasegraph.tools.planning.rules import TASK_STATUSES

#: An audit's ``health``, by the first rule that holds (``assess_health``).
HEALTH_RULES = {
    "stalled": "open tasks exist and every one of them is blocked: nothing can move",
    "at_risk": "a task is blocked, no context document is published, or the project has no tasks",
    "healthy": "none of the above (a project whose tasks are all done is healthy)",
}


def assess_health(counts: dict[str, int], has_context_document: bool) -> str:
    """'stalled', 'at_risk' or 'healthy' for a project's task counts per status (see ``HEALTH_RULES``)."""
    open_tasks = sum(counts.values()) - counts.get("done", 0)
    if open_tasks and counts.get("blocked", 0) == open_tasks:
        return "stalled"
    if counts.get("blocked", 0) or not has_context_document or not sum(counts.values()):
        return "at_risk"
    return "healthy"


def audit(project: Project, found: list[Task], has_document: bool) -> dict[str, Any]:
    """The audit of a project with these tasks: health, counts, blockers and findings."""
    counts = {status: sum(1 for t in found if t.status == status) for status in TASK_STATUSES}
    blocked = [
        {"task_id": t.task_id, "title": t.title, "blocker": t.blocker} for t in found if t.status == "blocked"
    ]
    health = assess_health(counts, has_document)
    return {
        "project": project.model_dump(),
        "health": health,
        "counts": counts,
        "total": len(found),
        "blocked": blocked,
        "has_context_document": has_document,
        "findings": _findings(project, counts, blocked, has_document, health),
    }


def _findings(
    project: Project, counts: dict[str, int], blocked: list[dict[str, Any]], has_document: bool, health: str
) -> list[str]:
    total = sum(counts.values())
    findings = ["The project is archived."] if project.status == "archived" else []
    if not total:
        findings.append("The project has no tasks yet.")
    elif counts["done"] + counts["in_progress"] == 0:
        findings.append(f"None of the {total} tasks has started.")
    else:
        findings.append(f"{counts['done']} of {total} tasks are done, {counts['in_progress']} in progress.")
    findings += [
        f"{b['task_id']} ({b['title']}) is blocked: {b['blocker'] or 'no reason given'}." for b in blocked
    ]
    if health == "stalled":
        findings.append("Every open task is blocked, so nothing can move until a blocker is cleared.")
    if not has_document:
        findings.append("The project has no context document.")
    if total and counts["done"] == total and project.status == "active":
        findings.append("Every task is done: the project can be archived.")
    return findings
