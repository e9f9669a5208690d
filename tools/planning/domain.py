"""The project domain: templates, projects, tasks and context documents, per scope."""

from __future__ import annotations

import json
import re
import time
import unicodedata
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from tools.planning.errors import PlanningError
from tools.planning.records import ContextDocument, Project, Task, Template
from tools.planning.tables import documents, projects, tasks, templates

#: Templates every scope has; they cannot be overwritten.
BUILTIN_TEMPLATES = (
    Template(
        template_id="product-launch",
        name="Product launch",
        builtin=True,
        description="Bring a product or feature to market: positioning, launch plan, channels and follow-up.",
        sections=["Goal", "Audience", "Positioning", "Launch plan", "Risks"],
        task_seeds=[
            "Write the positioning statement",
            "Plan the launch timeline",
            "Prepare launch channels",
            "Brief support and sales",
            "Review launch metrics",
        ],
    ),
    Template(
        template_id="research-study",
        name="Research study",
        builtin=True,
        description="Answer a question with evidence: hypotheses, method, sources and findings.",
        sections=["Question", "Hypotheses", "Method", "Sources", "Findings"],
        task_seeds=[
            "State the research question",
            "Collect sources",
            "Analyse the evidence",
            "Write up findings",
        ],
    ),
    Template(
        template_id="event-plan",
        name="Event plan",
        builtin=True,
        description="Run an event: venue, agenda, speakers, logistics and follow-up.",
        sections=["Purpose", "Agenda", "Logistics", "Budget"],
        task_seeds=["Book the venue", "Draft the agenda", "Invite speakers", "Send invitations"],
    ),
)
TASK_STATUSES = ("todo", "in_progress", "blocked", "done")
PRIORITIES = ("low", "normal", "high")
#: How many known ids an "unknown id" message lists.
SHOWN_IDS = 5


def slug(name: str) -> str:
    """A lowercase ASCII id made of the name's words (at most 60 characters)."""
    ascii_name = unicodedata.normalize("NFKD", name).encode("ascii", "ignore").decode()
    made = re.sub(r"[^a-z0-9]+", "-", ascii_name.lower()).strip("-")[:60].strip("-")
    if not made:
        raise PlanningError(f"{name!r} has no letters or digits to make an id from")
    return made


class ProjectDomain:
    """Reads and changes one database's domain rows; every method is limited to its ``scope``."""

    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine

    async def list_templates(self, scope: str, query: str = "") -> list[Template]:
        """Built-in and the scope's own templates, filtered by ``query`` on name and description."""
        async with self.engine.connect() as conn:
            rows = (await conn.execute(sa.select(templates).where(templates.c.scope == scope))).all()
        found = [*BUILTIN_TEMPLATES, *(_template(r) for r in rows)]
        needle = query.strip().lower()
        return (
            [
                t
                for t in found
                if needle in t.name.lower() or needle in t.description.lower() or needle in t.template_id
            ]
            if needle
            else found
        )

    async def get_template(self, scope: str, template_id: str) -> Template:
        """One template, or a PlanningError listing the known ones."""
        known = await self.list_templates(scope)
        found = next((t for t in known if t.template_id == template_id), None)
        if found is None:
            raise PlanningError(
                f"no template {template_id!r}; templates: {_ids(t.template_id for t in known)}"
            )
        return found

    async def create_template(
        self,
        scope: str,
        name: str,
        description: str,
        sections: list[str],
        task_seeds: list[str] = (),  # type: ignore[assignment]
    ) -> Template:
        """A new template of the scope; its id is the slug of its name and must be new."""
        template_id = slug(name)
        if any(t.template_id == template_id for t in await self.list_templates(scope)):
            raise PlanningError(f"template {template_id!r} exists already: use it, or choose another name")
        made = Template(
            template_id=template_id,
            name=name.strip(),
            description=description.strip(),
            sections=list(sections),
            task_seeds=list(task_seeds),
        )
        async with self.engine.begin() as conn:
            await conn.execute(
                templates.insert().values(
                    scope=scope,
                    template_id=template_id,
                    name=made.name,
                    description=made.description,
                    sections=json.dumps(made.sections),
                    task_seeds=json.dumps(made.task_seeds),
                    created_at=time.time(),
                )
            )
        return made

    async def create_project(
        self, scope: str, name: str, template_id: str, description: str = ""
    ) -> tuple[Project, list[Task]]:
        """A new active project from a template, with one ``todo`` task per task seed of the template."""
        template = await self.get_template(scope, template_id)
        base, now = slug(name), time.time()
        async with self.engine.begin() as conn:
            taken = set(
                (
                    await conn.execute(
                        sa.select(projects.c.project_id).where(
                            projects.c.scope == scope, projects.c.project_id.like(f"{base}%")
                        )
                    )
                ).scalars()
            )
            project_id = (
                base
                if base not in taken
                else next(f"{base}-{n}" for n in range(2, 10_000) if f"{base}-{n}" not in taken)
            )
            project = Project(
                project_id=project_id,
                name=name.strip(),
                template_id=template.template_id,
                description=description.strip(),
                status="active",
                created_at=now,
                updated_at=now,
            )
            await conn.execute(projects.insert().values(scope=scope, **project.model_dump()))
            made = [
                Task(
                    task_id=f"{project_id}-t{i}",
                    project_id=project_id,
                    title=title,
                    status="todo",
                    priority="normal",
                    updated_at=now,
                )
                for i, title in enumerate(template.task_seeds, 1)
            ]
            if made:
                await conn.execute(tasks.insert(), [{"scope": scope, **t.model_dump()} for t in made])
        return project, made

    async def get_project(self, scope: str, project_id: str) -> Project:
        """One project of the scope, or a PlanningError naming some that exist."""
        async with self.engine.connect() as conn:
            return await _project(conn, scope, project_id)

    async def list_projects(self, scope: str, status: str = "active") -> list[Project]:
        """The scope's projects with that status (all when empty)."""
        query = sa.select(projects).where(projects.c.scope == scope).order_by(projects.c.created_at)
        if status:
            query = query.where(projects.c.status == status)
        async with self.engine.connect() as conn:
            return [Project.model_validate(r._mapping) for r in (await conn.execute(query)).all()]

    async def archive_project(self, scope: str, project_id: str) -> Project:
        """Archive a project (it leaves the active list; its rows stay)."""
        async with self.engine.begin() as conn:
            project = await _project(conn, scope, project_id)
            now = time.time()
            await conn.execute(
                projects.update()
                .where(projects.c.scope == scope, projects.c.project_id == project_id)
                .values(status="archived", updated_at=now)
            )
        return project.model_copy(update={"status": "archived", "updated_at": now})

    async def publish_context_document(
        self, scope: str, project_id: str, title: str, body: str
    ) -> ContextDocument:
        """Publish a document of a project; the same title again is that document's next version."""
        document_id = f"{project_id}-doc-{slug(title)}"
        async with self.engine.begin() as conn:
            await _project(conn, scope, project_id)
            version = (
                await conn.execute(
                    sa.select(sa.func.max(documents.c.version)).where(
                        documents.c.scope == scope, documents.c.document_id == document_id
                    )
                )
            ).scalar() or 0
            document = ContextDocument(
                document_id=document_id,
                project_id=project_id,
                title=title.strip(),
                body=body,
                version=version + 1,
                published_at=time.time(),
            )
            values = {"scope": scope, **document.model_dump()}
            if version:
                await conn.execute(
                    documents.update()
                    .where(documents.c.scope == scope, documents.c.document_id == document_id)
                    .values(**values)
                )
            else:
                await conn.execute(documents.insert().values(**values))
        return document

    async def list_documents(self, scope: str, project_id: str) -> list[ContextDocument]:
        """A project's context documents (their latest versions)."""
        async with self.engine.connect() as conn:
            rows = (
                await conn.execute(
                    sa.select(documents).where(
                        documents.c.scope == scope, documents.c.project_id == project_id
                    )
                )
            ).all()
        return [
            ContextDocument.model_validate({k: v for k, v in r._mapping.items() if k != "scope"})
            for r in rows
        ]

    async def list_tasks(self, scope: str, project_id: str, status: str = "") -> list[Task]:
        """A project's tasks, optionally only those of one status."""
        if status and status not in TASK_STATUSES:
            raise PlanningError(f"status {status!r} is not a task status; use {', '.join(TASK_STATUSES)}")
        async with self.engine.connect() as conn:
            await _project(conn, scope, project_id)
            query = sa.select(tasks).where(tasks.c.scope == scope, tasks.c.project_id == project_id)
            if status:
                query = query.where(tasks.c.status == status)
            rows = (await conn.execute(query.order_by(tasks.c.task_id))).all()
        return [_task(r) for r in rows]

    async def create_task(self, scope: str, project_id: str, title: str, priority: str = "normal") -> Task:
        """A new ``todo`` task of a project."""
        _check(priority, PRIORITIES, "priority")
        async with self.engine.begin() as conn:
            await _project(conn, scope, project_id)
            count = (
                await conn.execute(
                    sa.select(sa.func.count())
                    .select_from(tasks)
                    .where(tasks.c.scope == scope, tasks.c.project_id == project_id)
                )
            ).scalar() or 0
            task = Task.model_validate(
                {
                    "task_id": f"{project_id}-t{count + 1}",
                    "project_id": project_id,
                    "title": title.strip(),
                    "status": "todo",
                    "priority": priority,
                    "updated_at": time.time(),
                }
            )
            await conn.execute(tasks.insert().values(scope=scope, **task.model_dump()))
        return task

    async def update_task(
        self,
        scope: str,
        task_id: str,
        *,
        status: str | None = None,
        title: str | None = None,
        priority: str | None = None,
        blocker: str | None = None,
    ) -> tuple[Task, dict[str, Any]]:
        """Change a task; a blocker without a status blocks it. Returns the task and what changed."""
        changes: dict[str, Any] = {}
        if status:
            changes["status"] = _check(status, TASK_STATUSES, "status")
        if priority:
            changes["priority"] = _check(priority, PRIORITIES, "priority")
        if title:
            changes["title"] = title.strip()
        if blocker:
            changes["blocker"] = blocker.strip()
            changes.setdefault("status", "blocked")
        if not changes:
            raise PlanningError("nothing to change: give a status, title, priority or blocker")
        async with self.engine.begin() as conn:
            task = await _task_of(conn, scope, task_id)
            changed = {k: v for k, v in changes.items() if getattr(task, k) != v}
            await conn.execute(
                tasks.update()
                .where(tasks.c.scope == scope, tasks.c.task_id == task_id)
                .values(**changes, updated_at=time.time())
            )
        return task.model_copy(update=changes), changed

    async def delete_task(self, scope: str, task_id: str) -> Task:
        """Delete a task for good."""
        async with self.engine.begin() as conn:
            task = await _task_of(conn, scope, task_id)
            await conn.execute(tasks.delete().where(tasks.c.scope == scope, tasks.c.task_id == task_id))
        return task

    async def audit_project(self, scope: str, project_id: str) -> dict[str, Any]:
        """A project's health: task counts, blockers, whether it has a context document, and findings.

        stalled: no task is done or in progress; at_risk: a task is blocked or there is no context
        document; healthy otherwise.
        """
        project = await self.get_project(scope, project_id)
        found = await self.list_tasks(scope, project_id)
        counts = {status: sum(1 for t in found if t.status == status) for status in TASK_STATUSES}
        blocked = [
            {"task_id": t.task_id, "title": t.title, "blocker": t.blocker}
            for t in found
            if t.status == "blocked"
        ]
        has_document = bool(await self.list_documents(scope, project_id))
        findings = []
        if found and counts["done"] + counts["in_progress"] == 0:
            findings.append(f"None of the {len(found)} tasks has started.")
        findings += [
            f"{b['task_id']} ({b['title']}) is blocked: {b['blocker'] or 'no reason given'}." for b in blocked
        ]
        if not has_document:
            findings.append("The project has no context document.")
        started = counts["done"] + counts["in_progress"] > 0
        health = (
            "stalled" if found and not started else "at_risk" if blocked or not has_document else "healthy"
        )
        return {
            "project": project.model_dump(),
            "health": health,
            "counts": counts,
            "blocked": blocked,
            "has_context_document": has_document,
            "findings": findings,
        }


async def _project(conn: AsyncConnection, scope: str, project_id: str) -> Project:
    row = (
        await conn.execute(
            sa.select(projects).where(projects.c.scope == scope, projects.c.project_id == project_id)
        )
    ).first()
    if row is None:
        known = (
            await conn.execute(
                sa.select(projects.c.project_id).where(projects.c.scope == scope).limit(SHOWN_IDS)
            )
        ).scalars()
        raise PlanningError(f"no project {project_id!r} in this scope; projects: {_ids(known)}")
    return Project.model_validate({k: v for k, v in row._mapping.items() if k != "scope"})


async def _task_of(conn: AsyncConnection, scope: str, task_id: str) -> Task:
    row = (
        await conn.execute(sa.select(tasks).where(tasks.c.scope == scope, tasks.c.task_id == task_id))
    ).first()
    if row is None:
        raise PlanningError(f"no task {task_id!r} in this scope; list_tasks shows a project's task ids")
    return _task(row)


def _task(row: Any) -> Task:
    return Task.model_validate({k: v for k, v in row._mapping.items() if k != "scope"})


def _template(row: Any) -> Template:
    return Template(
        template_id=row.template_id,
        name=row.name,
        description=row.description,
        sections=json.loads(row.sections),
        task_seeds=json.loads(row.task_seeds),
    )


def _check(value: str, allowed: tuple[str, ...], what: str) -> str:
    if value not in allowed:
        raise PlanningError(f"{what} {value!r} is not allowed; use {', '.join(allowed)}")
    return value


def _ids(ids: Any) -> str:
    shown = list(ids)[:SHOWN_IDS]
    return ", ".join(shown) if shown else "none yet"
