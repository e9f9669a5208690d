"""Projects: made from a template with its seeded tasks, listed, looked up and archived.

A project's id is the slug of its name, with ``-2``, ``-3``... appended when the scope has that
id already. ``fetch_project`` is the one lookup of a project row; tasks and context documents use
it too, so every "unknown project" message reads the same.
"""

from __future__ import annotations

import time

import sqlalchemy as sa
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncConnection

from phasegraph.tools.planning.errors import PlanningError
from phasegraph.tools.planning.records import Project, Task, Template
from phasegraph.tools.planning.rules import (
    ATTEMPTS,
    MAX_SLUG,
    PROJECT_STATUSES,
    SHOWN_IDS,
    check_allowed,
    free_id,
    show_ids,
    slug,
)
from phasegraph.tools.planning.tables import projects, tasks
from phasegraph.tools.planning.templates import TemplateRows


async def fetch_project(conn: AsyncConnection, scope: str, project_id: str) -> Project:
    """One project of the scope, or a PlanningError naming some that exist."""
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
        raise PlanningError(f"no project {project_id!r} in this scope; projects: {show_ids(known)}")
    return Project.model_validate({k: v for k, v in row._mapping.items() if k != "scope"})


class ProjectRows(TemplateRows):
    """Creates, lists and archives a scope's projects (part of ``ProjectDomain``).

    It extends ``TemplateRows`` because a project is always made from a template.
    """

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
        stem = base[: MAX_SLUG - 6].rstrip("-")  # every id free_id picks starts with it
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
            project_id = free_id(base, taken)
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
            return await fetch_project(conn, scope, project_id)

    async def list_projects(self, scope: str, status: str = "active") -> list[Project]:
        """The scope's projects with that status (all when empty)."""
        query = sa.select(projects).where(projects.c.scope == scope).order_by(projects.c.created_at)
        if status and check_allowed(status, PROJECT_STATUSES, "project status"):
            query = query.where(projects.c.status == status)
        async with self.engine.connect() as conn:
            return [Project.model_validate(r._mapping) for r in (await conn.execute(query)).all()]

    async def archive_project(self, scope: str, project_id: str) -> Project:
        """Archive a project (it leaves the active list; its rows stay)."""
        async with self.engine.begin() as conn:
            project = await fetch_project(conn, scope, project_id)
            now = time.time()
            await conn.execute(
                projects.update()
                .where(projects.c.scope == scope, projects.c.project_id == project_id)
                .values(status="archived", updated_at=now)
            )
        return project.model_copy(update={"status": "archived", "updated_at": now})
