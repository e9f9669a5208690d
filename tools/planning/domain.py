"""The project domain: templates, projects, tasks and context documents, per scope.

Every method takes the scope (the phasegraph project of the request) first and every query filters
on it, so one scope never sees or changes another's rows. Ids are slugs of names
(``spring-launch``); tasks are ``<project_id>-t<n>``, documents ``<project_id>-doc-<slug of title>``.
"""

from __future__ import annotations

import json
import re
import time
import unicodedata
from typing import Any

import sqlalchemy as sa
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from phasegraph.tools.planning.errors import PlanningError
from phasegraph.tools.planning.records import ContextDocument, Project, Task, Template
from phasegraph.tools.planning.tables import documents, projects, tasks, templates

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
PROJECT_STATUSES = ("active", "archived")
TASK_STATUSES = ("todo", "in_progress", "blocked", "done")
PRIORITIES = ("low", "normal", "high")
#: How many known ids an "unknown id" message lists.
SHOWN_IDS = 5
#: Longest id a name makes (a project's ``-2``, ``-3``... suffix included).
MAX_SLUG = 60
#: How often a write that lost a race for a fresh id or version tries the next one.
ATTEMPTS = 5
#: An audit's ``health``, by the first rule that holds (``assess_health``).
HEALTH_RULES = {
    "stalled": "open tasks exist and every one of them is blocked: nothing can move",
    "at_risk": "a task is blocked, no context document is published, or the project has no tasks",
    "healthy": "none of the above (a project whose tasks are all done is healthy)",
}


def slug(name: str) -> str:
    """A lowercase ASCII id made of the name's words (at most 60 characters)."""
    ascii_name = unicodedata.normalize("NFKD", name).encode("ascii", "ignore").decode()
    made = re.sub(r"[^a-z0-9]+", "-", ascii_name.lower()).strip("-")[:MAX_SLUG].strip("-")
    if not made:
        raise PlanningError(f"{name!r} has no letters or digits to make an id from")
    return made


def assess_health(counts: dict[str, int], has_context_document: bool) -> str:
    """'stalled', 'at_risk' or 'healthy' for a project's task counts per status (see ``HEALTH_RULES``)."""
    open_tasks = sum(counts.values()) - counts.get("done", 0)
    if open_tasks and counts.get("blocked", 0) == open_tasks:
        return "stalled"
    if counts.get("blocked", 0) or not has_context_document or not sum(counts.values()):
        return "at_risk"
    return "healthy"


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
        exists = PlanningError(f"template {template_id!r} exists already: use it, or choose another name")
        if any(t.template_id == template_id for t in await self.list_templates(scope)):
            raise exists
        made = Template(
            template_id=template_id,
            name=name.strip(),
            description=description.strip(),
            sections=_texts(sections, "sections"),
            task_seeds=_texts(task_seeds, "task seeds"),
        )
        if not made.sections:
            raise PlanningError("a template needs at least one section")
        try:
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
        except IntegrityError:  # another call created it since the check
            raise exists from None
        return made

    async def create_project(
        self, scope: str, name: str, template_id: str, description: str = ""
    ) -> tuple[Project, list[Task]]:
        """A new active project from a template, with one ``todo`` task per task seed of the template.

        Its id is the slug of its name, with ``-2``, ``-3``... appended when the scope has that id.
        """
        template = await self.get_template(scope, template_id)
        for _ in range(ATTEMPTS):  # two callers may pick the same free id: the one refused picks again
            try:
                return await self._insert_project(scope, name, template, description)
            except IntegrityError:
                continue
        raise PlanningError(f"project {name!r} could not be created: too many at once; try again")

    async def _insert_project(
        self, scope: str, name: str, template: Template, description: str
    ) -> tuple[Project, list[Task]]:
        base, now = slug(name), time.time()
        stem = base[: MAX_SLUG - 6].rstrip("-")  # every id _free_id picks starts with it
        async with self.engine.begin() as conn:
            taken = set(
                (
                    await conn.execute(
                        sa.select(projects.c.project_id).where(
                            projects.c.scope == scope, projects.c.project_id.startswith(stem, autoescape=True)
                        )
                    )
                ).scalars()
            )
            project_id = _free_id(base, taken)
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
        if status and _check(status, PROJECT_STATUSES, "project status"):
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
        for _ in range(
            ATTEMPTS
        ):  # two publishers may write the same version: the one refused writes the next
            try:
                published = await self._publish(scope, project_id, title, body)
            except IntegrityError:
                continue
            if published is not None:
                return published
        raise PlanningError(f"document {title!r} could not be published: too many publishers at once")

    async def _publish(self, scope: str, project_id: str, title: str, body: str) -> ContextDocument | None:
        """The next version of the document, or None when another publisher wrote it first."""
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
            if not version:
                await conn.execute(documents.insert().values(**values))
                return document
            written = await conn.execute(
                documents.update()
                .where(
                    documents.c.scope == scope,
                    documents.c.document_id == document_id,
                    documents.c.version == version,
                )
                .values(**values)
            )
        return document if written.rowcount else None

    async def list_documents(self, scope: str, project_id: str) -> list[ContextDocument]:
        """A project's context documents (their latest versions), by title."""
        async with self.engine.connect() as conn:
            await _project(conn, scope, project_id)
            rows = (
                await conn.execute(
                    sa.select(documents)
                    .where(documents.c.scope == scope, documents.c.project_id == project_id)
                    .order_by(documents.c.title)
                )
            ).all()
        return [
            ContextDocument.model_validate({k: v for k, v in r._mapping.items() if k != "scope"})
            for r in rows
        ]

    async def list_tasks(self, scope: str, project_id: str, status: str = "") -> list[Task]:
        """A project's tasks in the order they were made, optionally only those of one status."""
        if status:
            _check(status, TASK_STATUSES, "status")
        async with self.engine.connect() as conn:
            await _project(conn, scope, project_id)
            query = sa.select(tasks).where(tasks.c.scope == scope, tasks.c.project_id == project_id)
            if status:
                query = query.where(tasks.c.status == status)
            rows = (await conn.execute(query)).all()
        return sorted((_task(r) for r in rows), key=lambda t: _number(t.task_id, project_id))

    async def create_task(self, scope: str, project_id: str, title: str, priority: str = "normal") -> Task:
        """A new ``todo`` task of a project; its number follows the highest the project has."""
        _check(priority, PRIORITIES, "priority")
        title = _text(title, "task title")
        for _ in range(ATTEMPTS):  # two callers may take the same number: the one refused takes the next
            try:
                return await self._insert_task(scope, project_id, title, priority)
            except IntegrityError:
                continue
        raise PlanningError(f"task {title!r} could not be created: too many at once; try again")

    async def _insert_task(self, scope: str, project_id: str, title: str, priority: str) -> Task:
        async with self.engine.begin() as conn:
            await _project(conn, scope, project_id)
            ids = (
                await conn.execute(
                    sa.select(tasks.c.task_id).where(tasks.c.scope == scope, tasks.c.project_id == project_id)
                )
            ).scalars()
            number = max((_number(i, project_id) for i in ids), default=0) + 1
            task = Task.model_validate(
                {
                    "task_id": f"{project_id}-t{number}",
                    "project_id": project_id,
                    "title": title,
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
        """Change a task; returns it and ``{field: new value}`` for the fields that really changed.

        A blocker without a status blocks the task; a status other than ``blocked`` clears its blocker.
        """
        changes: dict[str, Any] = {}
        if status is not None:
            changes["status"] = _check(status, TASK_STATUSES, "status")
        if priority is not None:
            changes["priority"] = _check(priority, PRIORITIES, "priority")
        if title is not None:
            changes["title"] = _text(title, "task title")
        if blocker is not None:
            changes["blocker"] = _text(blocker, "blocker")
            changes.setdefault("status", "blocked")
        elif changes.get("status", "blocked") != "blocked":
            changes["blocker"] = None
        if not changes:
            raise PlanningError("nothing to change: give a status, title, priority or blocker")
        async with self.engine.begin() as conn:
            task = await _task_of(conn, scope, task_id)
            changed = {k: v for k, v in changes.items() if getattr(task, k) != v}
            if not changed:
                return task, {}
            now = time.time()
            await conn.execute(
                tasks.update()
                .where(tasks.c.scope == scope, tasks.c.task_id == task_id)
                .values(**changed, updated_at=now)
            )
        return task.model_copy(update={**changed, "updated_at": now}), changed

    async def delete_task(self, scope: str, task_id: str) -> Task:
        """Delete a task for good."""
        async with self.engine.begin() as conn:
            task = await _task_of(conn, scope, task_id)
            await conn.execute(tasks.delete().where(tasks.c.scope == scope, tasks.c.task_id == task_id))
        return task

    async def audit_project(self, scope: str, project_id: str) -> dict[str, Any]:
        """A project's health: task counts, blockers, whether it has a context document, and findings.

        ``health`` is the first of ``HEALTH_RULES`` that holds: stalled (every open task is blocked),
        at_risk (a task is blocked, no context document, or no tasks), healthy.
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
        known = (
            await conn.execute(
                sa.select(tasks.c.task_id)
                .where(tasks.c.scope == scope)
                .order_by(tasks.c.updated_at.desc())
                .limit(SHOWN_IDS)
            )
        ).scalars()
        raise PlanningError(
            f"no task {task_id!r} in this scope; tasks: {_ids(known)} (list_tasks shows a project's tasks)"
        )
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


def _text(value: str, what: str) -> str:
    text = value.strip()
    if not text:
        raise PlanningError(f"the {what} must not be empty")
    return text


def _texts(values: Any, what: str) -> list[str]:
    return [_text(v, f"{what}' entries") for v in values]


def _free_id(base: str, taken: set[str]) -> str:
    """``base``, or the first of ``base-2``, ``base-3``... not taken (shortened to ``MAX_SLUG``)."""
    candidate, n = base, 1
    while candidate in taken:
        n += 1
        candidate = f"{base[: MAX_SLUG - len(str(n)) - 1].rstrip('-')}-{n}"
    return candidate


def _number(task_id: str, project_id: str) -> int:
    """A task's number (``3`` of ``spring-launch-t3``)."""
    digits = task_id.removeprefix(f"{project_id}-t")
    return int(digits) if digits.isdigit() else 0


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
