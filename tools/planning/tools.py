"""The project domain's tools: the planner calls them, each answering with compact JSON.

No ``from __future__ import annotations`` here: LangChain reads a tool function's type hints at
every call, and string annotations would be evaluated again each time.
"""

import json
from typing import Annotated, Any

from langchain_core.tools import BaseTool, InjectedToolArg, tool

from phasegraph.tools.context import ToolContext
from phasegraph.tools.errors import ToolError
from phasegraph.tools.planning.domain import ProjectDomain
from phasegraph.tools.registry import ToolRegistry
from phasegraph.tools.sources import POLICY_KEY, ToolPolicy

#: Metadata key of tools whose effect cannot be undone.
DESTRUCTIVE_KEY = "destructive"
Context = Annotated[ToolContext, InjectedToolArg]


def _domain(context: ToolContext) -> ProjectDomain:
    if context.planning is None:
        raise ToolError("this run has no project domain")
    return context.planning.domain


def _project_id(project_id: str, context: ToolContext) -> str:
    chosen = project_id.strip() or context.entity_id
    if not chosen:
        raise ToolError("name the project (project_id): this conversation has no project in scope")
    return chosen


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


@tool
async def list_templates(context: Context, query: str = "") -> str:
    """List project templates (built-in and this workspace's), optionally those matching a query."""
    found = await _domain(context).list_templates(context.project_id, query)
    return _json({"templates": [t.model_dump(exclude={"task_seeds"}) for t in found]})


@tool
async def create_template(
    name: str, description: str, sections: list[str], context: Context, task_seeds: list[str] | None = None
) -> str:
    """Create a project template: its context-document sections and the tasks new projects start with."""
    made = await _domain(context).create_template(
        context.project_id, name, description, sections, task_seeds or []
    )
    return _json({"template": made.model_dump()})


@tool
async def create_project(name: str, template_id: str, context: Context, description: str = "") -> str:
    """Create a project from a template; its tasks are seeded from the template."""
    project, seeded = await _domain(context).create_project(
        context.project_id, name, template_id, description
    )
    return _json(
        {
            "project": {"id": project.project_id, **project.model_dump()},
            "tasks_created": len(seeded),
            "tasks": [{"task_id": t.task_id, "title": t.title} for t in seeded],
        }
    )


@tool
async def publish_context_document(title: str, body: str, context: Context, project_id: str = "") -> str:
    """Publish a project's context document (the same title again publishes its next version)."""
    chosen = _project_id(project_id, context)
    document = await _domain(context).publish_context_document(context.project_id, chosen, title, body)
    return _json({"document": {"id": document.document_id, **document.model_dump(exclude={"body"})}})


@tool
async def list_projects(context: Context, status: str = "active") -> str:
    """List this workspace's projects: active (default), archived, or all with an empty status."""
    found = await _domain(context).list_projects(context.project_id, status)
    return _json({"projects": [p.model_dump() for p in found]})


@tool
async def list_tasks(context: Context, project_id: str = "", status: str = "") -> str:
    """List a project's tasks, optionally one status: todo, in_progress, blocked or done."""
    found = await _domain(context).list_tasks(context.project_id, _project_id(project_id, context), status)
    return _json({"tasks": [t.model_dump() for t in found]})


@tool
async def create_task(title: str, context: Context, project_id: str = "", priority: str = "normal") -> str:
    """Add a todo task to a project (priority low, normal or high)."""
    task = await _domain(context).create_task(
        context.project_id, _project_id(project_id, context), title, priority
    )
    return _json({"task": task.model_dump()})


@tool
async def update_task(
    task_id: str, context: Context, status: str = "", title: str = "", priority: str = "", blocker: str = ""
) -> str:
    """Change a task's status, title, priority or blocker: a blocker blocks it, another status clears that."""
    task, changed = await _domain(context).update_task(
        context.project_id,
        task_id,
        status=status or None,
        title=title or None,
        priority=priority or None,
        blocker=blocker or None,
    )
    return _json({"task": task.model_dump(), "changed": changed})


@tool
async def audit_project(context: Context, project_id: str = "") -> str:
    """Assess a project's health: task counts, blockers, its context document, and findings."""
    return _json(await _domain(context).audit_project(context.project_id, _project_id(project_id, context)))


@tool
async def archive_project(context: Context, project_id: str = "") -> str:
    """Archive a project. Destructive: it leaves the active projects for good."""
    project = await _domain(context).archive_project(context.project_id, _project_id(project_id, context))
    return _json({"project": project.model_dump()})


@tool
async def delete_task(task_id: str, context: Context) -> str:
    """Delete a task. Destructive: it cannot be undone."""
    task = await _domain(context).delete_task(context.project_id, task_id)
    return _json({"deleted": task.model_dump()})


# Destructive tools wait for a person's approval by default (their policy says confirm).
for _destructive in (archive_project, delete_task):
    _destructive.metadata = {
        **(_destructive.metadata or {}),
        DESTRUCTIVE_KEY: True,
        POLICY_KEY: ToolPolicy(confirm=True),
    }


def planning_tools() -> list[BaseTool]:
    """Every tool of the project domain."""
    return [
        list_templates,
        create_template,
        create_project,
        publish_context_document,
        list_projects,
        list_tasks,
        create_task,
        update_task,
        audit_project,
        archive_project,
        delete_task,
    ]


def planning_registry() -> ToolRegistry:
    """A registry of the project domain's tools."""
    return ToolRegistry(planning_tools())


def is_destructive(item: BaseTool) -> bool:
    """Whether a tool's effect cannot be undone (each call waits for a person's approval)."""
    return bool((item.metadata or {}).get(DESTRUCTIVE_KEY))
